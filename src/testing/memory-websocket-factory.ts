/**
 * WebSockets that connect to a `fetch` handler in the same process: each one is an upgrade
 * request handed to the handler (a service's or a control plane's `fetch`), which upgrades it
 * through its real upgrade path, as a serving helper would, and an in-memory connection
 * instead of a network one. No socket is listened on, so it works on every runtime, workerd
 * included.
 *
 * @module
 */
import { refuseUnknownKeys } from '../core/config-values.ts';
import { SvcConfigurationError } from '../core/errors.ts';
import { upgradeRequestUrl } from '../adapters/event-target-websocket.ts';
import { withWebSocketUpgrader } from '../service/websocket-upgrade.ts';
import {
  type MemoryWebSocket,
  type MemoryWebSocketClose,
  memoryWebSocketPair,
} from './memory-websocket.ts';

export type { MemoryWebSocketClose } from './memory-websocket.ts';

/**
 * A `fetch` handler reached in process: `service.fetch`, `plane.fetch`, or any handler of the
 * same shape. It receives `env` and `ctx` as a runtime would hand them.
 */
export type MemoryFetch = (
  request: Request,
  env?: unknown,
  ctx?: unknown,
) => Response | Promise<Response>;

/** Options of {@link memoryWebSocketFactory}. */
export interface MemoryWebSocketFactoryOptions {
  /**
   * The `env` each upgrade request is handed with (bindings a handler reads). Its own fields
   * are copied into a fresh object per request that also carries the upgrader. Default: none.
   */
  env?: object;
  /** The third argument of `fetch` (a Workers `ExecutionContext`, say). Default: none. */
  ctx?: unknown;
}

/** Where a connection stands, as seen from the caller's end. */
export type MemoryWebSocketState = 'connecting' | 'open' | 'closing' | 'closed';

/** One connection a memory WebSocket factory opened, for a test to watch and to break. */
export interface MemoryWebSocketConnection {
  /** The URL the caller opened (`ws:` or `wss:`, propagated metadata in its query). */
  readonly url: string;
  /** The caller end's state. */
  readonly state: MemoryWebSocketState;
  /**
   * What the handler answered the upgrade request with: `200` when it upgraded (standing for
   * the `101` a network server would send), else its refusal, whose body is left unread. Rejects
   * when the handler threw.
   */
  readonly response: Promise<Response>;
  /** Settles once the caller's end reported its close: the code, the reason, and how it ended. */
  readonly closed: Promise<MemoryWebSocketClose>;
  /**
   * Closes the connection from the service's end with a closing handshake, as a server going
   * away would: both ends report `code` and `reason`. Throws as the standard `close()` does for
   * a code other than 1000 or 3000-4999, or a reason over 123 bytes.
   */
  close(code?: number, reason?: string): void;
  /**
   * Breaks the connection with no closing handshake, as a network failure does: what is in
   * flight is lost and both ends report 1006 with `wasClean: false`. Calls waiting on the
   * connection fail as a lost connection; a caller that reconnects gets a new connection.
   */
  drop(): void;
}

/** The socket factory with the connections it opened. */
export interface MemoryWebSocketFactory {
  /**
   * Opens a connection to the handler for `url` (`ws:`, `wss:`, `http:` or `https:`), returned
   * connecting, as the standard `WebSocket` constructor does. Pass it as `createWebSocket` to
   * `websocketRpc` or to a control plane's `httpService`.
   */
  createWebSocket(url: string): WebSocket;
  /** Every connection opened so far, oldest first (closed ones included). */
  readonly connections: readonly MemoryWebSocketConnection[];
  /** Breaks every connection not yet closed, as {@link MemoryWebSocketConnection.drop} does. */
  dropAll(): void;
}

const FACTORY_OPTIONS: readonly string[] = ['env', 'ctx'];
const READY_STATES: readonly MemoryWebSocketState[] = ['connecting', 'open', 'closing', 'closed'];

/** Refuses anything but a function for `fetch`, and options with a key no reader knows. */
export function checkMemoryFetch(fetch: unknown, label: string): MemoryFetch {
  if (typeof fetch !== 'function') {
    throw new SvcConfigurationError(
      `${label}: the first argument must be a fetch handler (request, env?, ctx?) => Response, ` +
        'such as service.fetch',
    );
  }
  return fetch as MemoryFetch;
}

function checkFactoryOptions(
  options: unknown,
  known: readonly string[],
  label: string,
): MemoryWebSocketFactoryOptions {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new SvcConfigurationError(`${label}: options must be an object`);
  }
  refuseUnknownKeys(options, known, label);
  const env = (options as MemoryWebSocketFactoryOptions).env;
  if (env !== undefined && (env === null || typeof env !== 'object')) {
    throw new SvcConfigurationError(`${label}: \`env\` must be an object`);
  }
  return options as MemoryWebSocketFactoryOptions;
}

/** A handshake request as a client sends it: GET, `Upgrade`, `Connection`, version and key. */
function upgradeRequest(url: URL): Request {
  const key = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(16))));
  return new Request(url, {
    method: 'GET',
    headers: {
      Upgrade: 'websocket',
      Connection: 'Upgrade',
      'Sec-WebSocket-Version': '13',
      'Sec-WebSocket-Key': key,
    },
  });
}

/**
 * Runs one handshake: the handler gets the request with an upgrader that only records the
 * session's socket consumer; once it answered `200` having accepted, the service's end is handed
 * over open and the caller's end opens. Any other outcome fails the caller's end (1006), as a
 * refused handshake does on a network.
 */
function connect(
  fetch: MemoryFetch,
  options: MemoryWebSocketFactoryOptions,
  caller: MemoryWebSocket,
  service: MemoryWebSocket,
): Promise<Response> {
  let accept: ((socket: WebSocket) => void) | undefined;
  const env = withWebSocketUpgrader(options.env, {
    upgrade(_request, _runtime, acceptSocket) {
      accept = acceptSocket;
      return new Response(null, { status: 200 });
    },
  });
  const request = upgradeRequest(upgradeRequestUrl(caller.url, 'createWebSocket'));
  const answered = (async () => await fetch(request, env, options.ctx))();
  answered.then((response) => {
    if (response.status !== 200 || accept === undefined || caller.readyState !== 0) {
      caller.fail();
      return;
    }
    service.open(false);
    // The caller's `open` is queued first, so it precedes anything the service sends (or a close
    // it starts) from inside `accept`, as on a network.
    caller.open(true);
    try {
      accept(service as unknown as WebSocket);
    } catch {
      service.fail();
      caller.fail();
    }
  }, () => caller.fail());
  return answered;
}

/**
 * A socket factory whose sockets connect to `fetch` in process, through the handler's own
 * WebSocket upgrade. Throws `SvcConfigurationError` when `fetch` is not a function, for an
 * unknown option, or for an `env` that is not an object.
 */
export function memoryWebSocketFactory(
  fetch: MemoryFetch,
  options: MemoryWebSocketFactoryOptions = {},
): MemoryWebSocketFactory {
  const label = 'memoryWebSocketFactory';
  const handler = checkMemoryFetch(fetch, label);
  const checked = checkFactoryOptions(options, FACTORY_OPTIONS, label);
  const connections: MemoryWebSocketConnection[] = [];
  return {
    connections,
    createWebSocket(url: string): WebSocket {
      upgradeRequestUrl(url, 'createWebSocket');
      let reportClosed: (close: MemoryWebSocketClose) => void = () => {};
      const closed = new Promise<MemoryWebSocketClose>((resolve) => reportClosed = resolve);
      const [caller, service] = memoryWebSocketPair(url, (close) => reportClosed(close));
      const response = connect(handler, checked, caller, service);
      // A test that never reads the answer must not see a handler's failure as unhandled.
      response.catch(() => {});
      connections.push(Object.freeze({
        url,
        get state() {
          return READY_STATES[caller.readyState];
        },
        response,
        closed,
        close(code?: number, reason?: string) {
          service.close(code, reason);
          // Before the handshake completed there is no session to close: the handshake fails.
          if (caller.readyState === 0) caller.fail();
        },
        drop() {
          caller.fail();
          service.fail();
        },
      }));
      return caller as unknown as WebSocket;
    },
    dropAll() {
      for (const connection of connections) {
        if (connection.state !== 'closed') connection.drop();
      }
    },
  };
}
