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
import { discardBody, markServerFramedBody } from '../core/bounded-body.ts';
import {
  MAX_WEBSOCKET_SEND_BUFFER_BYTES,
  SEND_BUFFER_FULL_CLOSE,
} from '../service/websocket-rpc-transport.ts';
import { withWebSocketUpgrader } from '../service/websocket-upgrade.ts';
import { SERVER_CLOSING, settledWithin } from './websocket-close-grace.ts';
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
export { MAX_WEBSOCKET_PAYLOAD_BYTES } from './serve-target.ts';
export { swaggerUiAssets } from './swagger-ui-assets.ts';
export { WEBSOCKET_CLOSE_GRACE_MS } from './websocket-close-grace.ts';

/** The part of Bun's `ServerWebSocket` the adapter uses. */
interface BunServerWebSocket {
  readonly readyState: number;
  data: BunSocketData;
  send(data: string | ArrayBufferView | ArrayBuffer): number;
  close(code?: number, reason?: string): void;
  /** Bytes queued by `send` that Bun has not yet handed to the network. */
  getBufferedAmount(): number;
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
      drain(socket: BunServerWebSocket): void;
      close(socket: BunServerWebSocket, code: number, reason: string): void;
    };
  }): BunServer;
}

type Listener = (event: Record<string, unknown>) => void;

/** `ServerWebSocket.send` returns 0 when Bun dropped the message. */
const SEND_DROPPED = 0;

/** The standard `readyState` values the adapter reports itself. */
const OPEN = 1;
const CLOSING = 2;

/** Bun's server socket seen through the standard `WebSocket` event interface. */
class BunWebSocketAdapter {
  binaryType = 'arraybuffer';
  #socket: BunServerWebSocket;
  #listeners = new Map<string, Listener[]>();
  #serverClosing = false;
  /** While the server waits for the send buffer to drain: resolves that wait. */
  #stopWaited: (() => void) | undefined;

  constructor(socket: BunServerWebSocket) {
    this.#socket = socket;
  }

  get readyState(): number {
    const state = this.#socket.readyState;
    return this.#serverClosing && state === OPEN ? CLOSING : state;
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
    // Once the server is closing nothing more is queued, so the buffer can drain: as a standard
    // socket does after close(), a message sent then is dropped.
    if (this.#serverClosing) return;
    if (this.#socket.send(data) !== SEND_DROPPED) return;
    // Bun dropped the message, and would drop every later one too: end the connection so both
    // sides see it broken, as the RPC transport does where the socket reports its buffer.
    this.#socket.close(SEND_BUFFER_FULL_CLOSE.code, SEND_BUFFER_FULL_CLOSE.reason);
  }

  close(code?: number, reason?: string): void {
    this.#socket.close(code, reason);
  }

  /**
   * Closes with `1001` once Bun has handed every queued message to the network; resolves then,
   * or when the socket closed first. Bun's `close()` would queue the close frame after them
   * too, but then reports no buffer left and no later event: draining first is what tells when
   * the connection may be stopped without losing them.
   */
  closeForServerStop(): Promise<void> {
    this.#serverClosing = true;
    return new Promise((resolve) => {
      this.#stopWaited = resolve;
      this.drained();
    });
  }

  /** Bun's `drain`: the socket handed more of its send buffer to the network. */
  drained(): void {
    const stopWaited = this.#stopWaited;
    if (stopWaited === undefined || this.#socket.getBufferedAmount() !== 0) return;
    this.#stopWaited = undefined;
    try {
      this.#socket.close(SERVER_CLOSING.code, SERVER_CLOSING.reason);
    } finally {
      stopWaited();
    }
  }

  /** Bun's `close`: the connection ended (the peer left, or close() was called). */
  closed(code: number, reason: string): void {
    const stopWaited = this.#stopWaited;
    this.#stopWaited = undefined;
    this.dispatch('close', { code, reason });
    stopWaited?.();
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
 * and a per-request WebSocket upgrader, so `serveRpc` finds it. A WebSocket message above
 * `MAX_WEBSOCKET_PAYLOAD_BYTES` (32 MiB) closes its connection with `1009` before it is read
 * whole. A request body with a declared length within a bounded read's limit is read whole
 * (Bun's parser never delivers more than it declares); one that stalls is answered with
 * `Connection: close`, which ends its connection.
 *
 * `close()` stops listening and closes every WebSocket with `1001` once the messages already
 * queued to it have been handed to the network, then closes every connection left; it waits
 * at most `WEBSOCKET_CLOSE_GRACE_MS` (1 s) for those messages, so a peer that stopped reading
 * gets `1006` and loses what it did not read.
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
      // Bun's parser frames a body by its declared length: a bounded read takes it whole (its
      // stream costs several times the read). A read that gives up cannot end the connection
      // from here; the answer's `Connection: close` does.
      markServerFramedBody(request, () => discardBody(request));
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
      drain(socket) {
        socket.data.adapter?.drained();
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
        adapter.closed(code, reason);
      },
    },
  });
  return servedServer(hostname, server.port, async () => {
    // Stops listening only; its promise settles once every connection has ended, which the
    // second stop, closing those left, brings about (awaited within the same bound, so a
    // connection Bun never reports ended cannot hold close() open).
    const drained = Promise.resolve(server.stop(false));
    await settledWithin([...adapters].map((adapter) => adapter.closeForServerStop()));
    await server.stop(true);
    await settledWithin([drained]);
  });
}
