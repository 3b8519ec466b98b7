/**
 * Deno: serve a `fetch` target with `Deno.serve`, upgrading WebSockets with
 * `Deno.upgradeWebSocket`, which returns a standard `WebSocket` and the `101` response; and a
 * WebSocket client factory for callers that keeps a call to one round trip.
 *
 * `Deno.upgradeWebSocket` needs the very `Request` object `Deno.serve` delivered; pass the
 * original request (Hono's `c.req.raw`) to `serveRpc`, not a copy.
 *
 * @module
 */
import { discardBody, markServerFramedBody } from '../core/bounded-body.ts';
import { problemResponse } from '../core/problem.ts';
import { type WebSocketUpgrader, withWebSocketUpgrader } from '../service/websocket-upgrade.ts';
import { SERVER_CLOSING } from './websocket-close-grace.ts';
import { refuseOversizedMessages } from './websocket-message-limit.ts';
import { wsWebSocketFactory } from './ws-client.ts';
import {
  checkFetchTarget,
  type FetchTarget,
  resolveServeOptions,
  type ServedServer,
  servedServer,
  type ServeOptions,
} from './serve-target.ts';

export type { FetchTarget, ServedServer, ServeOptions } from './serve-target.ts';
export { MAX_WEBSOCKET_PAYLOAD_BYTES } from './serve-target.ts';
export { swaggerUiAssets } from './swagger-ui-assets.ts';
export type { WsWebSocketFactoryOptions } from './ws-client.ts';

/**
 * A WebSocket factory for callers on Deno (`websocketRpc(url, { createWebSocket })`), backed by
 * the `ws` client. Deno's own `WebSocket` client leaves Nagle's algorithm on, which holds the
 * second frame of every call for the peer's delayed ACK (about 40 ms per call); this one does
 * not.
 */
export const denoWebSocketFactory: typeof wsWebSocketFactory = wsWebSocketFactory;

interface DenoHttpServer {
  readonly addr: { port: number };
  /** Settles once the server stopped, e.g. after its `signal` aborted. */
  readonly finished: Promise<void>;
}

/** The part of Deno's `ServeHandlerInfo` the adapter uses. */
interface DenoServeHandlerInfo {
  readonly remoteAddr: unknown;
}

interface DenoServeOptions {
  port: number;
  hostname: string;
  signal: AbortSignal;
  onListen(address: unknown): void;
}

interface DenoRuntime {
  upgradeWebSocket(request: Request): { socket: WebSocket; response: Response };
  serve(
    options: DenoServeOptions,
    handler: (request: Request, info: DenoServeHandlerInfo) => Response | Promise<Response>,
  ): DenoHttpServer;
}

function denoRuntime(): DenoRuntime {
  const runtime = (globalThis as { Deno?: DenoRuntime }).Deno;
  if (runtime === undefined || typeof runtime.upgradeWebSocket !== 'function') {
    throw new Error('The Deno adapter runs on Deno only');
  }
  return runtime;
}

/** The refusal of a handshake whose headers `Deno.upgradeWebSocket` rejected. */
function malformedHandshake(error: TypeError): Response {
  return problemResponse({
    status: 400,
    code: 'internal',
    retryable: false,
    reason: 'websocket_handshake_malformed',
    detail: `Malformed WebSocket handshake: ${error.message}`,
  });
}

/**
 * Upgrades through `Deno.upgradeWebSocket`; the socket opens once the `101` is sent. A handshake
 * the client malformed is answered `400` rather than thrown, so it is not a server failure.
 *
 * `Deno.upgradeWebSocket` takes no size limit, so the socket handed on closes with 1009 at the
 * first message above `MAX_WEBSOCKET_PAYLOAD_BYTES` (32 MiB), which the session never receives:
 * the peer sees what Node and Bun answer. Deno has read that whole message by then (up to its
 * own cap, 64 MiB), so on Deno a connection can make the server hold that much before it is
 * refused; put a proxy with a smaller message limit in front on a hostile network.
 */
export const denoWebSocketUpgrader: WebSocketUpgrader = {
  upgrade(request, _runtime, accept) {
    let upgraded: { socket: WebSocket; response: Response };
    try {
      upgraded = denoRuntime().upgradeWebSocket(request);
    } catch (error) {
      // Deno throws a TypeError only for the handshake headers a client controls (no
      // `Upgrade: websocket`, no `Connection: Upgrade`, no key); a request already upgraded or
      // closed is the server's own failure and stays one.
      if (error instanceof TypeError) return malformedHandshake(error);
      throw error;
    }
    // First listener on the socket, so an oversized message stops before the session's.
    refuseOversizedMessages(upgraded.socket);
    accept(upgraded.socket);
    return upgraded.response;
  },
};

/** What a request still in flight, or an upgrade arriving late, is answered once closing. */
function closingRefusal(): Response {
  return problemResponse({
    status: 503,
    code: 'internal',
    reason: 'server_closing',
    detail: 'The server is closing',
  });
}

/**
 * The Deno upgrader, tracking the sockets it opens so close() can end them (`Deno.serve` leaves
 * upgraded connections alone when it stops) and opening none once the server is closing.
 */
function trackingUpgrader(sockets: Set<WebSocket>, closing: AbortSignal): WebSocketUpgrader {
  return {
    upgrade(request, runtime, accept) {
      if (closing.aborted) return closingRefusal();
      return denoWebSocketUpgrader.upgrade(request, runtime, (socket) => {
        sockets.add(socket);
        socket.addEventListener('close', () => sockets.delete(socket));
        accept(socket);
      });
    },
  };
}

/**
 * The target's answer, or a {@link closingRefusal} once `inFlight`'s entry for it is called,
 * whichever comes first. Deno keeps a connection whose request is unanswered (an upgrade
 * request above all) open even after the server was aborted, so close() answers them all.
 * Each entry is removed when the target answers: nothing is retained per finished request.
 */
function answeredOrRefusedOnClose(
  answer: Promise<Response>,
  inFlight: Set<() => void>,
): Promise<Response> {
  return new Promise<Response>((resolve, reject) => {
    const refuse = () => resolve(closingRefusal());
    inFlight.add(refuse);
    answer.then(resolve, reject).finally(() => inFlight.delete(refuse));
  });
}

/** Starts `Deno.serve` and waits until it listens. */
async function listeningServer(
  options: Omit<DenoServeOptions, 'onListen'>,
  handler: (request: Request, info: DenoServeHandlerInfo) => Response | Promise<Response>,
): Promise<DenoHttpServer> {
  let listening!: () => void;
  const ready = new Promise<void>((resolve) => (listening = resolve));
  const server = denoRuntime().serve({ ...options, onListen: () => listening() }, handler);
  await ready;
  return server;
}

/**
 * Serves `target` with `Deno.serve`. Each request's `env` carries `options.env`, Deno's
 * connection `info`, the peer's address as `remoteAddr` (where Hono's `getConnInfo` from
 * `hono/deno` reads it) and the Deno WebSocket upgrader, so `serveRpc` finds it.
 *
 * `close()` ends every WebSocket with `1001`, answers every request still in flight with a
 * `503` and closes every connection without waiting for them: a graceful `shutdown()` would
 * wait, so a client that declares a body and never sends it could hold the server open for as
 * long as it likes. A `503` is written if its connection still takes it; the target's own late
 * answer never is.
 *
 * A WebSocket message above `MAX_WEBSOCKET_PAYLOAD_BYTES` closes its connection with 1009 (see
 * {@link denoWebSocketUpgrader}); Deno reads each message whole, up to its own 64 MiB, before the
 * adapter can see its size.
 */
export async function serveDeno(
  target: FetchTarget,
  options: ServeOptions = {},
): Promise<ServedServer> {
  const { hostname, port, env: userEnv } = resolveServeOptions(options, 'serveDeno');
  checkFetchTarget(target, 'serveDeno');
  const sockets = new Set<WebSocket>();
  const inFlight = new Set<() => void>();
  // Aborting the signal given to Deno.serve stops it without waiting for requests in flight.
  const closing = new AbortController();
  const upgrader = trackingUpgrader(sockets, closing.signal);
  const server = await listeningServer(
    { port, hostname, signal: closing.signal },
    (request, info) => {
      // Read now: Deno closes the request's connection details once it is answered or upgraded.
      const env = withWebSocketUpgrader(
        { ...userEnv, info, remoteAddr: info.remoteAddr },
        upgrader,
      );
      // Deno's HTTP server frames a body by its declared length: a bounded read takes it whole
      // (through its stream, each chunk is a separate trip to the runtime). A read that gives up
      // cancels the body; the answer's `Connection: close` ends the connection.
      markServerFramedBody(request, () => discardBody(request));
      const answer = target.fetch(request, env);
      // An answer already there leaves nothing in flight (and keeps Deno's synchronous path).
      if (answer instanceof Response) return answer;
      return answeredOrRefusedOnClose(Promise.resolve(answer), inFlight);
    },
  );
  return servedServer(hostname, server.addr.port, async () => {
    for (const socket of sockets) socket.close(SERVER_CLOSING.code, SERVER_CLOSING.reason);
    for (const refuse of inFlight) refuse();
    closing.abort();
    await server.finished;
  });
}
