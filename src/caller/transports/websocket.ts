/**
 * The WebSocket caller transport: one socket per session, metadata in the upgrade URL's query
 * (browsers cannot set headers on an upgrade), the token inside the session.
 *
 * @module
 */
import { refuseUnknownKeys } from '../../core/config-values.ts';
import { SvcConfigurationError } from '../../core/errors.ts';
import {
  type OpenedRpcSession,
  openSessionOver,
  type OutboundRpcMetadata,
  type RpcTransportFactory,
  withMetadataQuery,
} from './outbound-metadata.ts';
import { type RpcWebSocket, WebSocketRpcTransport } from '../../service/websocket-rpc-transport.ts';

/**
 * How long a caller's socket may take to open, in milliseconds, unless `openTimeoutMs` says
 * otherwise.
 */
export const WEBSOCKET_OPEN_TIMEOUT_MS = 10_000;

/** Options of {@link websocketRpc}. */
export interface WebSocketRpcOptions {
  /**
   * Creates the socket for the final URL (metadata already in its query). Default: the global
   * `WebSocket`. On Node 20, which has none, pass `nodeWebSocketFactory()` from the Node
   * adapter; on Deno pass `denoWebSocketFactory()` from the Deno adapter, since Deno's own
   * client leaves Nagle's algorithm on and every call then waits about 40 ms for a delayed ACK.
   */
  createWebSocket?: (url: string) => WebSocket;
  /**
   * How long the socket may take to open (connection and handshake), in milliseconds; default
   * {@link WEBSOCKET_OPEN_TIMEOUT_MS}. Past it the socket is closed and the session breaks, so
   * the next call opens a fresh one instead of waiting on a peer that never answers.
   */
  openTimeoutMs?: number;
}

/** `http(s)` URLs name the same endpoint as `ws(s)`; anything else is refused. */
function webSocketUrl(url: string | URL): URL {
  const parsed = new URL(url);
  if (parsed.protocol === 'http:') parsed.protocol = 'ws:';
  else if (parsed.protocol === 'https:') parsed.protocol = 'wss:';
  if (parsed.protocol !== 'ws:' && parsed.protocol !== 'wss:') {
    throw new SvcConfigurationError(
      `websocketRpc needs a ws:, wss:, http: or https: URL (got ${parsed.protocol})`,
    );
  }
  return parsed;
}

// The upper bound is the largest delay a timer accepts (2^31 - 1 ms, about 24.8 days).
const MAX_OPEN_TIMEOUT_MS = 2_147_483_647;

function validOpenTimeout(timeoutMs: number): number {
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0 || timeoutMs > MAX_OPEN_TIMEOUT_MS) {
    throw new SvcConfigurationError(
      `websocketRpc openTimeoutMs must be a positive number of milliseconds up to ` +
        `${MAX_OPEN_TIMEOUT_MS} (got ${timeoutMs})`,
    );
  }
  return timeoutMs;
}

const WEBSOCKET_RPC_OPTIONS: readonly string[] = ['createWebSocket', 'openTimeoutMs'];

/**
 * The socket factory: the one given, else the runtime's global `WebSocket`, looked up now so a
 * runtime without one (Node 20) is refused at construction, before any token is requested.
 */
function socketFactory(createWebSocket: unknown): (url: string) => WebSocket {
  if (createWebSocket !== undefined) {
    if (typeof createWebSocket !== 'function') {
      throw new SvcConfigurationError(
        'websocketRpc: `createWebSocket` must be a function (url) => WebSocket',
      );
    }
    return createWebSocket as (url: string) => WebSocket;
  }
  const Constructor = (globalThis as { WebSocket?: new (url: string) => WebSocket }).WebSocket;
  if (typeof Constructor !== 'function') {
    throw new SvcConfigurationError(
      'websocketRpc: this runtime has no global WebSocket: pass the `createWebSocket` option ' +
        '(on Node 20, nodeWebSocketFactory() from the Node adapter)',
      { reason: 'websocket_unavailable' },
    );
  }
  return (socketUrl) => new Constructor(socketUrl);
}

/**
 * WebSocket caller transport. The factory (default: the global `WebSocket`) receives the final
 * URL, with `request_id`, `timeout`, `idempotency_key` and `conn_info` in its query. Throws
 * `SvcConfigurationError` now for an unknown option, an invalid `openTimeoutMs`, or no factory
 * on a runtime without a global `WebSocket`.
 */
export function websocketRpc(
  url: string | URL,
  options: WebSocketRpcOptions = {},
): RpcTransportFactory {
  const base = webSocketUrl(url);
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new SvcConfigurationError('websocketRpc: options must be an object');
  }
  refuseUnknownKeys(options, WEBSOCKET_RPC_OPTIONS, 'websocketRpc');
  const createWebSocket = socketFactory(options.createWebSocket);
  const openTimeoutMs = validOpenTimeout(options.openTimeoutMs ?? WEBSOCKET_OPEN_TIMEOUT_MS);
  // Errors name the endpoint, not the per-call metadata the query carries.
  const displayUrl = `${base.origin}${base.pathname}`;
  return {
    kind: 'websocket',
    open(meta: OutboundRpcMetadata): OpenedRpcSession {
      const finalUrl = withMetadataQuery(base, meta).href;
      const socket = createWebSocket(finalUrl) as unknown as RpcWebSocket;
      // A normal closure first, so the peer sees 1000 rather than the abort's 3000.
      const transport = new WebSocketRpcTransport(socket, { openTimeoutMs, url: displayUrl });
      return openSessionOver(transport, () => {
        try {
          socket.close(1000, 'session disposed');
        } catch {
          // Already closed by the peer.
        }
      });
    },
  };
}
