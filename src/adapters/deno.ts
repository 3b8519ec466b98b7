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
import { type WebSocketUpgrader, withWebSocketUpgrader } from '../service/websocket-upgrade.ts';
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
  shutdown(): Promise<void>;
}

interface DenoRuntime {
  upgradeWebSocket(request: Request): { socket: WebSocket; response: Response };
  serve(
    options: { port: number; hostname: string; onListen(address: unknown): void },
    handler: (request: Request, info: unknown) => Response | Promise<Response>,
  ): DenoHttpServer;
}

function denoRuntime(): DenoRuntime {
  const runtime = (globalThis as { Deno?: DenoRuntime }).Deno;
  if (runtime === undefined || typeof runtime.upgradeWebSocket !== 'function') {
    throw new Error('The Deno adapter runs on Deno only');
  }
  return runtime;
}

/** Upgrades through `Deno.upgradeWebSocket`; the socket opens once the `101` is sent. */
export const denoWebSocketUpgrader: WebSocketUpgrader = {
  upgrade(request, _runtime, accept) {
    const { socket, response } = denoRuntime().upgradeWebSocket(request);
    accept(socket);
    return response;
  },
};

/**
 * Serves `target` with `Deno.serve`. Each request's `env` carries `options.env`, Deno's
 * connection `info` and the Deno WebSocket upgrader, so `serveRpc` finds it.
 */
export async function serveDeno(
  target: FetchTarget,
  options: ServeOptions = {},
): Promise<ServedServer> {
  const { hostname, port, env: userEnv } = resolveServeOptions(options, 'serveDeno');
  checkFetchTarget(target, 'serveDeno');
  const sockets = new Set<WebSocket>();
  // Tracks sockets so close() can end them: a graceful shutdown waits for open connections.
  const trackingUpgrader: WebSocketUpgrader = {
    upgrade(request, runtime, accept) {
      return denoWebSocketUpgrader.upgrade(request, runtime, (socket) => {
        sockets.add(socket);
        socket.addEventListener('close', () => sockets.delete(socket));
        accept(socket);
      });
    },
  };
  let listening!: () => void;
  const ready = new Promise<void>((resolve) => (listening = resolve));
  const server = denoRuntime().serve(
    { port, hostname, onListen: () => listening() },
    (request, info) =>
      target.fetch(request, withWebSocketUpgrader({ ...userEnv, info }, trackingUpgrader)),
  );
  await ready;
  return servedServer(hostname, server.addr.port, async () => {
    for (const socket of sockets) socket.close(1001, 'server closing');
    await server.shutdown();
  });
}
