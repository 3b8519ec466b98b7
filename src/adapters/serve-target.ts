/**
 * The shapes every serving helper shares: what it serves (any `fetch(request, env?, ctx?)`
 * object, such as a service or a control plane), its options and what it returns.
 *
 * @module
 */

/** Anything with a fetch handler: a service, a control plane, a Hono app. */
export interface FetchTarget {
  fetch(request: Request, env?: unknown, ctx?: unknown): Promise<Response> | Response;
}

/** Options of the serving helpers. */
export interface ServeOptions {
  /** Port to listen on; default `0` (an ephemeral port, reported back). */
  port?: number;
  /** Interface to listen on; default `127.0.0.1`. */
  hostname?: string;
  /** Fields merged into the `env` argument every request receives. */
  env?: Record<string, unknown>;
}

/** A running server. */
export interface ServedServer {
  /** Base URL, e.g. `http://127.0.0.1:43123`. */
  url: string;
  /** The port actually bound. */
  port: number;
  /** Stops listening and closes every open connection and WebSocket. */
  close(): Promise<void>;
}

/** Default interface of every serving helper: loopback, never every interface by accident. */
export const DEFAULT_SERVE_HOSTNAME = '127.0.0.1';

/** The base URL of a server bound to `hostname` and `port` (IPv6 literals bracketed). */
export function servedUrl(hostname: string, port: number): string {
  const host = hostname.includes(':') && !hostname.startsWith('[') ? `[${hostname}]` : hostname;
  return `http://${host}:${port}`;
}

/**
 * Response headers that describe the connection rather than the resource; they are never
 * copied onto a WebSocket handshake or a refusal written by hand.
 */
export const CONNECTION_HEADERS: ReadonlySet<string> = new Set([
  'connection',
  'content-length',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'sec-websocket-accept',
  'sec-websocket-extensions',
  'sec-websocket-protocol',
]);
