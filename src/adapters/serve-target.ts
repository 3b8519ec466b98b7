/**
 * What every serving helper shares: what it serves (any `fetch(request, env?, ctx?)` object,
 * such as a service or a control plane), its options and their defaults, what it returns, and
 * the WebSocket upgrade plumbing of the helpers that complete a handshake themselves.
 *
 * @module
 */
import { isPlainObject, refuseUnknownKeys } from '../core/config-values.ts';
import { SvcConfigurationError } from '../core/errors.ts';
import type { WebSocketUpgrader } from '../service/websocket-upgrade.ts';

/** Anything with a fetch handler: a service, a control plane, a Hono app. */
export interface FetchTarget {
  /** Answers one request; `env` carries the helper's `env` fields and its WebSocket upgrader. */
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

/** Largest WebSocket message accepted, in bytes (Cap'n Web's own message limit applies too). */
export const MAX_WEBSOCKET_PAYLOAD_BYTES = 32 * 1024 * 1024;

/** {@link ServeOptions} with their defaults applied. */
export interface ResolvedServeOptions {
  hostname: string;
  port: number;
  env: Record<string, unknown>;
}

/** The largest TCP port number. */
const MAX_PORT = 65_535;

const SERVE_OPTION_NAMES: readonly string[] = ['port', 'hostname', 'env'];

/**
 * Refuses what cannot be served: a target without a `fetch` handler would fail every request
 * instead of failing here.
 */
export function checkFetchTarget(target: unknown, helper: string): FetchTarget {
  if (
    target === null || (typeof target !== 'object' && typeof target !== 'function') ||
    typeof (target as { fetch?: unknown }).fetch !== 'function'
  ) {
    throw new SvcConfigurationError(
      `${helper}: the target must have a fetch(request, env?, ctx?) handler (a service, a ` +
        'control plane or a Hono app)',
    );
  }
  return target as FetchTarget;
}

/**
 * Applies the defaults (loopback, an ephemeral port, no extra `env` fields) and refuses what a
 * listener would misread: an empty hostname means "every interface" to Node's `listen`, so an
 * unset `HOST=` passed through would expose the server; a port outside 0–65535 or fractional is
 * refused rather than wrapped or rounded by the runtime; a misspelt option (`prot`, `host`) is
 * refused rather than silently serving on the defaults. `known` narrows the accepted names for a
 * helper that takes fewer of them.
 */
export function resolveServeOptions(
  options: unknown,
  helper = 'serve',
  known: readonly string[] = SERVE_OPTION_NAMES,
): ResolvedServeOptions {
  if (options === undefined) options = {};
  if (!isPlainObject(options)) {
    throw new SvcConfigurationError(`${helper}: options must be an object`);
  }
  refuseUnknownKeys(options, known, helper);
  const { hostname = DEFAULT_SERVE_HOSTNAME, port = 0, env = {} } = options as ServeOptions;
  if (typeof hostname !== 'string' || hostname.trim() === '') {
    throw new SvcConfigurationError(
      `${helper}: \`hostname\` must be a non-empty string (default 127.0.0.1); listen on ` +
        "every interface only by naming it, e.g. '0.0.0.0'",
    );
  }
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 0 || port > MAX_PORT) {
    throw new SvcConfigurationError(
      `${helper}: \`port\` must be an integer from 0 to ${MAX_PORT} (0 picks a free port)`,
    );
  }
  if (!isPlainObject(env)) {
    throw new SvcConfigurationError(`${helper}: \`env\` must be a plain object of fields`);
  }
  return { hostname, port, env };
}

/**
 * The running server bound to `hostname` and `port`: `close()` runs `stop` once and every later
 * call returns that same promise.
 */
export function servedServer(
  hostname: string,
  port: number,
  stop: () => Promise<void>,
): ServedServer {
  let closing: Promise<void> | undefined;
  return {
    url: servedUrl(hostname, port),
    port,
    close() {
      closing ??= stop();
      return closing;
    },
  };
}

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

/** Calls `visit` for each header of `headers` that is not a {@link CONNECTION_HEADERS} one. */
export function forEachForwardableHeader(
  headers: Headers,
  visit: (value: string, name: string) => void,
): void {
  headers.forEach((value, name) => {
    if (!CONNECTION_HEADERS.has(name)) visit(value, name);
  });
}

/**
 * An upgrade the serving helper completes itself once the target returned, so the target's
 * response headers ride on the `101`: the upgrader only records that the target accepted.
 */
export interface DeferredWebSocketUpgrade {
  /** The upgrader to put in the target's `env`. */
  upgrader: WebSocketUpgrader;
  /**
   * The accepted session's socket consumer when the target accepted and answered with the
   * `200` that stands for the `101`; `undefined` when `response` is a refusal to write back.
   */
  acceptedBy(response: Response): ((socket: WebSocket) => void) | undefined;
}

/** A fresh {@link DeferredWebSocketUpgrade} for one request. */
export function deferredWebSocketUpgrade(): DeferredWebSocketUpgrade {
  let accepted: ((socket: WebSocket) => void) | undefined;
  return {
    upgrader: {
      upgrade(_request, _runtime, accept) {
        accepted = accept;
        // Stands for the 101 the helper writes once the target returns.
        return new Response(null, { status: 200 });
      },
    },
    acceptedBy(response) {
      return response.status === 200 ? accepted : undefined;
    },
  };
}
