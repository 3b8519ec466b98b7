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
import {
  MAX_WEBSOCKET_SEND_BUFFER_BYTES,
  SEND_BUFFER_FULL_CLOSE,
} from '../service/transports/websocket-rpc-transport.ts';
import { withWebSocketUpgrader } from '../service/websocket-upgrade.ts';
import {
  checkFetchTarget,
  deferredWebSocketUpgrade,
  type FetchTarget,
  forEachForwardableHeader,
  MAX_WEBSOCKET_PAYLOAD_BYTES,
  resolveServeOptions,
  type ServedServer,
  servedServer,
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
    development: boolean;
    fetch(request: Request, server: BunServer): Promise<Response | undefined>;
    error(error: unknown): Response;
    websocket: {
      maxPayloadLength: number;
      backpressureLimit: number;
      closeOnBackpressureLimit: boolean;
      open(socket: BunServerWebSocket): void;
      message(socket: BunServerWebSocket, message: string | Uint8Array): void;
      close(socket: BunServerWebSocket, code: number, reason: string): void;
    };
  }): BunServer;
}

type Listener = (event: Record<string, unknown>) => void;

/** `ServerWebSocket.send` returns 0 when Bun dropped the message. */
const SEND_DROPPED = 0;

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
    if (this.#socket.send(data) !== SEND_DROPPED) return;
    // Bun dropped the message, and would drop every later one too: end the connection so both
    // sides see it broken, as the RPC transport does where the socket reports its buffer.
    this.#socket.close(SEND_BUFFER_FULL_CLOSE.code, SEND_BUFFER_FULL_CLOSE.reason);
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
  // Appended, not set: a target may send several Set-Cookie headers on the upgrade.
  forEachForwardableHeader(response.headers, (value, name) => headers.append(name, value));
  // Bun would otherwise agree to the first subprotocol the client offers, but an RPC session
  // speaks none (RFC 6455 section 4.2.2); an empty value makes Bun send no such header.
  headers.set('Sec-WebSocket-Protocol', '');
  return headers;
}

/**
 * What a client gets when the target itself throws (a service or plane never does; a bare Hono
 * app may): a bare 500, as on Node and Deno. The error goes to the server's console only.
 */
function answerTargetFailure(error: unknown): Response {
  console.error('serveBun: the target threw', error);
  return new Response(null, { status: 500 });
}

/**
 * Serves `target` with `Bun.serve`. Each request's `env` carries `options.env`, Bun's `server`
 * and a per-request WebSocket upgrader, so `serveRpc` finds it.
 */
export async function serveBun(
  target: FetchTarget,
  options: ServeOptions = {},
): Promise<ServedServer> {
  const { hostname, port, env: userEnv } = resolveServeOptions(options, 'serveBun');
  checkFetchTarget(target, 'serveBun');
  const adapters = new Set<BunWebSocketAdapter>();
  const server = bunRuntime().serve({
    port,
    hostname,
    // Bun's development mode answers a throw with an HTML page carrying the message, absolute
    // source paths and a source excerpt, whatever NODE_ENV says; a server never sends that.
    development: false,
    error: answerTargetFailure,
    async fetch(request, bunServer) {
      const upgrade = deferredWebSocketUpgrade();
      const env = withWebSocketUpgrader({ ...userEnv, server: bunServer }, upgrade.upgrader);
      const response = await target.fetch(request, env);
      const accept = upgrade.acceptedBy(response);
      if (accept === undefined) return response;
      const upgraded = bunServer.upgrade(request, {
        data: { accept },
        headers: handshakeHeaders(response),
      });
      return upgraded ? undefined : new Response('WebSocket upgrade failed', { status: 400 });
    },
    websocket: {
      maxPayloadLength: MAX_WEBSOCKET_PAYLOAD_BYTES,
      backpressureLimit: MAX_WEBSOCKET_SEND_BUFFER_BYTES,
      // Bun's own closing drops the connection without a close frame (the peer sees 1006) and
      // discards what was buffered; the adapter's send() closes with a code and reason instead.
      closeOnBackpressureLimit: false,
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
  return servedServer(hostname, server.port, async () => {
    for (const adapter of adapters) adapter.close(1001, 'server closing');
    await server.stop(true);
  });
}
