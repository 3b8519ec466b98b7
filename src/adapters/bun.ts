/**
 * Bun: serve a `fetch` target with `Bun.serve`, upgrading WebSockets with `server.upgrade()`.
 *
 * Bun hands a server socket to a `websocket` handler object rather than returning a
 * `WebSocket`, so the helper adapts Bun's `ServerWebSocket` to the part of the standard
 * interface an RPC session uses. The upgrade itself happens after the target returned, so the
 * target's response headers ride on the `101`.
 *
 * @module
 */
import { type WebSocketUpgrader, withWebSocketUpgrader } from '../service/websocket-upgrade.ts';
import {
  CONNECTION_HEADERS,
  DEFAULT_SERVE_HOSTNAME,
  type FetchTarget,
  type ServedServer,
  servedUrl,
  type ServeOptions,
} from './serve-target.ts';

export type { FetchTarget, ServedServer, ServeOptions } from './serve-target.ts';

/** The part of Bun's `ServerWebSocket` the adapter uses. */
interface BunServerWebSocket {
  readonly readyState: number;
  data: BunSocketData;
  send(data: string | ArrayBufferView | ArrayBuffer): number;
  close(code?: number, reason?: string): void;
}

interface BunSocketData {
  accept: (socket: WebSocket) => void;
  adapter?: BunWebSocketAdapter;
}

/** The part of Bun's `Server` the adapter uses. */
interface BunServer {
  readonly port: number;
  upgrade(request: Request, options: { data: BunSocketData; headers?: HeadersInit }): boolean;
  stop(closeActiveConnections?: boolean): Promise<void> | void;
}

interface BunRuntime {
  serve(options: {
    port: number;
    hostname: string;
    fetch(request: Request, server: BunServer): Promise<Response | undefined>;
    websocket: {
      maxPayloadLength: number;
      open(socket: BunServerWebSocket): void;
      message(socket: BunServerWebSocket, message: string | Uint8Array): void;
      close(socket: BunServerWebSocket, code: number, reason: string): void;
    };
  }): BunServer;
}

/** Largest WebSocket message accepted, in bytes (Cap'n Web's own message limit applies too). */
const MAX_WEBSOCKET_PAYLOAD_BYTES = 32 * 1024 * 1024;

type Listener = (event: Record<string, unknown>) => void;

/** Bun's server socket seen through the standard `WebSocket` event interface. */
class BunWebSocketAdapter {
  binaryType = 'arraybuffer';
  #socket: BunServerWebSocket;
  #listeners = new Map<string, Listener[]>();

  constructor(socket: BunServerWebSocket) {
    this.#socket = socket;
  }

  get readyState(): number {
    return this.#socket.readyState;
  }

  addEventListener(type: string, listener: Listener): void {
    const list = this.#listeners.get(type) ?? [];
    list.push(listener);
    this.#listeners.set(type, list);
  }

  removeEventListener(type: string, listener: Listener): void {
    const list = this.#listeners.get(type);
    if (list !== undefined) this.#listeners.set(type, list.filter((l) => l !== listener));
  }

  send(data: string): void {
    this.#socket.send(data);
  }

  close(code?: number, reason?: string): void {
    this.#socket.close(code, reason);
  }

  dispatch(type: string, event: Record<string, unknown>): void {
    for (const listener of this.#listeners.get(type) ?? []) listener(event);
  }
}

function bunRuntime(): BunRuntime {
  const runtime = (globalThis as { Bun?: BunRuntime }).Bun;
  if (runtime === undefined) throw new Error('serveBun runs on Bun only');
  return runtime;
}

function handshakeHeaders(response: Response): Headers {
  const headers = new Headers();
  response.headers.forEach((value, name) => {
    if (!CONNECTION_HEADERS.has(name)) headers.set(name, value);
  });
  return headers;
}

/**
 * Serves `target` with `Bun.serve`. Each request's `env` carries `options.env`, Bun's `server`
 * and a per-request WebSocket upgrader, so `serveRpc` finds it.
 */
export async function serveBun(
  target: FetchTarget,
  options: ServeOptions = {},
): Promise<ServedServer> {
  const hostname = options.hostname ?? DEFAULT_SERVE_HOSTNAME;
  const userEnv = options.env ?? {};
  const adapters = new Set<BunWebSocketAdapter>();
  const server = bunRuntime().serve({
    port: options.port ?? 0,
    hostname,
    async fetch(request, bunServer) {
      let accepted: ((socket: WebSocket) => void) | undefined;
      const upgrader: WebSocketUpgrader = {
        upgrade(_request, _runtime, accept) {
          accepted = accept;
          // Stands for the 101 Bun writes once the target returns.
          return new Response(null, { status: 200 });
        },
      };
      const env = withWebSocketUpgrader({ ...userEnv, server: bunServer }, upgrader);
      const response = await target.fetch(request, env);
      const accept = accepted;
      if (accept === undefined || response.status !== 200) return response;
      const upgraded = bunServer.upgrade(request, {
        data: { accept },
        headers: handshakeHeaders(response),
      });
      return upgraded ? undefined : new Response('WebSocket upgrade failed', { status: 400 });
    },
    websocket: {
      maxPayloadLength: MAX_WEBSOCKET_PAYLOAD_BYTES,
      open(socket) {
        const adapter = new BunWebSocketAdapter(socket);
        socket.data.adapter = adapter;
        adapters.add(adapter);
        socket.data.accept(adapter as unknown as WebSocket);
      },
      message(socket, message) {
        const data = typeof message === 'string'
          ? message
          : message.buffer.slice(message.byteOffset, message.byteOffset + message.byteLength);
        socket.data.adapter?.dispatch('message', { data });
      },
      close(socket, code, reason) {
        const adapter = socket.data.adapter;
        if (adapter === undefined) return;
        adapters.delete(adapter);
        adapter.dispatch('close', { code, reason });
      },
    },
  });
  let closing: Promise<void> | undefined;
  return {
    url: servedUrl(hostname, server.port),
    port: server.port,
    close() {
      closing ??= (async () => {
        for (const adapter of adapters) adapter.close(1001, 'server closing');
        await server.stop(true);
      })();
      return closing;
    },
  };
}
