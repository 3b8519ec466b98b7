/**
 * The in-memory WebSocket caller transport: `websocketRpc` over sockets that connect to a
 * `fetch` handler in the same process (see `memory-websocket-factory.ts`), so long-lived
 * sessions, streaming methods and dropped connections can be tested without a network, on
 * every runtime.
 *
 * @module
 */
import { refuseUnknownKeys } from '../core/config-values.ts';
import { SvcConfigurationError, SvcInternalError } from '../core/errors.ts';
import type {
  OpenedRpcSession,
  OutboundRpcMetadata,
  RpcOpenTarget,
  RpcTransportFactory,
} from '../caller/transports/outbound-metadata.ts';
import { websocketRpc } from '../caller/transports/websocket.ts';
import {
  checkMemoryFetch,
  type MemoryFetch,
  type MemoryWebSocketConnection,
  memoryWebSocketFactory,
  type MemoryWebSocketFactoryOptions,
} from './memory-websocket-factory.ts';

/** Options of {@link memoryWebSocketRpc}. */
export interface MemoryWebSocketRpcOptions extends MemoryWebSocketFactoryOptions {
  /**
   * The ability's RPC URL, for an ability whose `rpc.path` is not the default. Default
   * `https://svc.internal/rpc/<abilityId>`, the route a service serves unless told otherwise.
   */
  url?: string | URL;
  /**
   * How long the handshake may take, in milliseconds, as `websocketRpc` reads it. Default
   * `WEBSOCKET_OPEN_TIMEOUT_MS`.
   */
  openTimeoutMs?: number;
}

/** A caller transport over in-memory WebSockets, with the connections it opened. */
export interface MemoryWebSocketRpc extends RpcTransportFactory {
  /** `websocket`: one long-lived session per connection, as over a network. */
  readonly kind: 'websocket';
  /** Every connection opened so far, oldest first (closed ones included). */
  readonly connections: readonly MemoryWebSocketConnection[];
  /** Breaks every connection not yet closed, as `MemoryWebSocketConnection.drop` does. */
  dropAll(): void;
}

const MEMORY_WEBSOCKET_RPC_OPTIONS: readonly string[] = ['env', 'ctx', 'url', 'openTimeoutMs'];

/** Base URL of in-process routes; the host is never resolved. */
const INTERNAL_ORIGIN = 'https://svc.internal';

/** Most ability routes one transport keeps a `websocketRpc` for (a transport usually serves one). */
const MAX_REMEMBERED_ROUTES = 64;

function checkOptions(options: unknown, label: string): MemoryWebSocketRpcOptions {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new SvcConfigurationError(`${label}: options must be an object`);
  }
  refuseUnknownKeys(options, MEMORY_WEBSOCKET_RPC_OPTIONS, label);
  return options as MemoryWebSocketRpcOptions;
}

/**
 * A WebSocket caller transport (the same shape `websocketRpc` returns) whose sessions open
 * against `fetch` in process, through the service's real WebSocket upgrade path. Metadata
 * travels in the upgrade URL's query and the token inside the session, as over a network.
 * `connections` lets a test watch each connection and break it on purpose (`drop()`): calls
 * waiting on a dropped connection fail with the retryable 503 `rpc_connection_lost`, and the
 * session's next call opens a new connection.
 *
 * Throws `SvcConfigurationError` now when `fetch` is not a function, for an unknown option, an
 * `env` that is not an object, a `url` that is not a `ws:`, `wss:`, `http:` or `https:` URL, or
 * an invalid `openTimeoutMs`.
 */
export function memoryWebSocketRpc(
  fetch: MemoryFetch,
  options: MemoryWebSocketRpcOptions = {},
): MemoryWebSocketRpc {
  const label = 'memoryWebSocketRpc';
  const handler = checkMemoryFetch(fetch, label);
  const { url, openTimeoutMs, ...factoryOptions } = checkOptions(options, label);
  const sockets = memoryWebSocketFactory(handler, factoryOptions);
  const socketOptions = {
    createWebSocket: sockets.createWebSocket,
    ...(openTimeoutMs !== undefined ? { openTimeoutMs } : {}),
  };
  // Built now, so a bad `url` or `openTimeoutMs` is refused before any session exists.
  const fixed = url === undefined ? undefined : websocketRpc(url, socketOptions);
  if (fixed === undefined) websocketRpc(INTERNAL_ORIGIN, socketOptions);
  const routes = new Map<string, RpcTransportFactory>();
  const routeFor = (target: RpcOpenTarget | undefined): RpcTransportFactory => {
    if (fixed !== undefined) return fixed;
    const abilityId = target?.abilityId;
    if (typeof abilityId !== 'string' || abilityId === '') {
      throw new SvcInternalError('An in-process WebSocket transport needs an ability id or a url', {
        reason: 'rpc_route_unknown',
      });
    }
    const known = routes.get(abilityId);
    if (known !== undefined) return known;
    const route = websocketRpc(
      new URL(`/rpc/${encodeURIComponent(abilityId)}`, INTERNAL_ORIGIN),
      socketOptions,
    );
    if (routes.size < MAX_REMEMBERED_ROUTES) routes.set(abilityId, route);
    return route;
  };
  return {
    kind: 'websocket',
    connections: sockets.connections,
    dropAll: () => sockets.dropAll(),
    open(meta: OutboundRpcMetadata, target?: RpcOpenTarget): OpenedRpcSession {
      return routeFor(target).open(meta, target);
    },
  };
}
