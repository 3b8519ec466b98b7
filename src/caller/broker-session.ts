/**
 * The caller's typed, disposable session with one ability through a control plane's public RPC
 * broker (`/rpc`): for callers outside the mesh (a browser app, a partner, a CLI), who hold no
 * capability token. The plane names the caller with its invocation middleware (from whatever
 * credentials the request carries: a cookie, an `Authorization` header), authorizes it, and keeps
 * every token to itself.
 *
 * It is an {@link abilitySession} whose authentication step is the broker's `connect({
 * targetServiceId, abilityId, scopes })`, pipelined with the first call: the same typed methods,
 * budget, metadata and disposal rules. Over HTTP-batch every batch connects afresh (a batch is a
 * session) and streaming methods fail with 405; over WebSocket one socket carries every call and
 * streams, and the budget it opened with bounds them all.
 *
 * @module
 */
import { refuseUnknownKeys } from '../core/config-values.ts';
import { SvcConfigurationError } from '../core/errors.ts';
import {
  type AbilitySession,
  abilitySession,
  refuseAbilityOutsideTarget,
} from './ability-session.ts';
import { httpBatchRpc, type RpcFetch } from './transports/http-batch.ts';
import type {
  OpenedRpcSession,
  OutboundRpcMetadata,
  RpcMainStub,
  RpcOpenTarget,
  RpcTransportFactory,
} from './transports/outbound-metadata.ts';
import { websocketRpc } from './transports/websocket.ts';

/** Options of {@link brokerSession}. */
export interface BrokerSessionOptions {
  /** The broker's URL (`https://plane.example/rpc`); `ws:`/`wss:` work for WebSocket too. */
  url: string | URL;
  /** The service serving the ability. */
  targetServiceId: string;
  /** The ability to call, `<targetServiceId>.<name>`. */
  abilityId: string;
  /** Scopes asked for; the plane checks them against the catalog and its grants. */
  scopes: readonly string[];
  /**
   * `http-batch` (default: each macrotask's calls in one POST, unary methods only) or
   * `websocket` (one socket for every call, streams included).
   */
  transport?: 'http-batch' | 'websocket';
  /**
   * The `fetch` each HTTP batch goes through (default the global one): where a CLI adds its
   * `Authorization` header, or a test reaches a plane in-process.
   */
  fetch?: RpcFetch;
  /**
   * Creates the WebSocket for the final URL (metadata already in its query), as `websocketRpc`
   * does; default the global `WebSocket`. A browser's socket carries the page's cookies.
   */
  createWebSocket?: (url: string) => WebSocket;
  /** Budget of each call in milliseconds, forwarded to the broker; `0` fails every call. */
  timeoutMs?: number;
  /** Forwarded with every call when well formed; svcplane never deduplicates. */
  idempotencyKey?: string;
  /** Forwarded with every call, so the plane's and the service's events carry it. */
  requestId?: string;
}

const OPTIONS: readonly string[] = [
  'url',
  'targetServiceId',
  'abilityId',
  'scopes',
  'transport',
  'fetch',
  'createWebSocket',
  'timeoutMs',
  'idempotencyKey',
  'requestId',
];

/**
 * What stands in for a token in the ability session: the broker holds the real ones, so nothing
 * is ever requested, and this value never leaves the process (`connect` takes no token).
 */
const NO_TOKEN = 'brokered';

function brokerTransport(options: BrokerSessionOptions): RpcTransportFactory {
  const kind = options.transport ?? 'http-batch';
  if (kind === 'websocket') {
    if (options.fetch !== undefined) {
      throw new SvcConfigurationError('brokerSession: `fetch` applies to http-batch only');
    }
    return websocketRpc(
      options.url,
      options.createWebSocket !== undefined ? { createWebSocket: options.createWebSocket } : {},
    );
  }
  if (kind !== 'http-batch') {
    throw new SvcConfigurationError(
      "brokerSession: `transport` must be 'http-batch' or 'websocket'",
    );
  }
  if (options.createWebSocket !== undefined) {
    throw new SvcConfigurationError('brokerSession: `createWebSocket` applies to websocket only');
  }
  return options.fetch !== undefined
    ? httpBatchRpc(options.fetch, { url: options.url })
    : httpBatchRpc(options.url);
}

/**
 * The broker's transport as the ability session sees it: `authenticate` on the opened session's
 * main object becomes the broker's `connect` for this ability.
 */
function connectingTransport(
  inner: RpcTransportFactory,
  request: { targetServiceId: string; abilityId: string; scopes: string[] },
): RpcTransportFactory {
  return {
    kind: inner.kind,
    open(meta: OutboundRpcMetadata, target?: RpcOpenTarget): OpenedRpcSession {
      const opened = inner.open(meta, target);
      // deno-lint-ignore no-explicit-any
      const broker = opened.main as any;
      const main: RpcMainStub = {
        authenticate: () => broker.connect(request),
        [Symbol.dispose]: () => opened.main[Symbol.dispose](),
      };
      return { ...opened, main };
    },
  };
}

/**
 * Opens a typed session with one ability through a control plane's broker. Nothing travels until
 * the first call. Throws `SvcConfigurationError` for invalid options.
 */
export function brokerSession<Api = Record<string, (input: unknown) => unknown>>(
  options: BrokerSessionOptions,
): AbilitySession<Api> {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new SvcConfigurationError('brokerSession: options object required');
  }
  refuseUnknownKeys(options, OPTIONS, 'brokerSession');
  const { targetServiceId, abilityId } = options;
  if (typeof targetServiceId !== 'string' || targetServiceId === '') {
    throw new SvcConfigurationError('brokerSession: targetServiceId must be a non-empty string');
  }
  if (typeof abilityId !== 'string' || abilityId === '') {
    throw new SvcConfigurationError('brokerSession: abilityId must be a non-empty string');
  }
  refuseAbilityOutsideTarget(abilityId, targetServiceId);
  if (
    !Array.isArray(options.scopes) || options.scopes.length === 0 ||
    !options.scopes.every((scope) => typeof scope === 'string' && scope !== '')
  ) {
    throw new SvcConfigurationError('brokerSession: scopes must be a non-empty array of strings');
  }
  const scopes = [...options.scopes];
  return abilitySession<Api>({
    abilityId,
    // The plane decides who the caller is; this id names nobody and is never sent.
    callerServiceId: 'broker-caller',
    targetServiceId,
    scopes,
    requestToken: () => Promise.resolve(NO_TOKEN),
    transport: connectingTransport(brokerTransport(options), {
      targetServiceId,
      abilityId,
      scopes,
    }),
    ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
    ...(options.idempotencyKey !== undefined ? { idempotencyKey: options.idempotencyKey } : {}),
    ...(options.requestId !== undefined ? { requestId: options.requestId } : {}),
  });
}
