/**
 * The public RPC broker front door: `mountBroker(app, deps)` serves the broker's Cap'n Web main
 * object (`connect`) at the `rpc` option's path, over HTTP-batch and WebSocket, behind the
 * plane's invocation middleware (`svcInvocation.surface = 'broker'`). Every answer is
 * `Cache-Control: no-store`.
 *
 * Metadata the caller sends is read from its channel (headers on a batch, `timeout` and
 * `idempotency_key` query parameters on a WebSocket upgrade) and filtered as a service filters
 * it; connection info comes only from the middleware (`svcConnInfo`), never from the caller. The
 * caller's budget is measured from arrival: per batch on HTTP-batch, for the whole session on a
 * WebSocket (where the plane's `timeout.defaultMs` does not apply).
 *
 * @module
 */
import type { Context, Hono } from 'hono';
import { applyTimeoutPolicy } from '../../core/deadline.ts';
import { describeErrorForLog } from '../../core/logging.ts';
import { contextRequestId } from '../../service/problem-json-app.ts';
import { readInboundMetadata } from '../../service/inbound-metadata.ts';
import { serveRpc } from '../../service/rpc-serve.ts';
import { isWebSocketUpgradeRequest } from '../../service/websocket-upgrade.ts';
import type { FrontDoorDependencies } from '../invocation.ts';
import { PLANE_REQUEST_FAILED_EVENT } from '../request-failure.ts';
import { BrokerMain } from './broker-main.ts';
import { resolveBrokerPath } from './broker-option.ts';

export { BROKER_CONNECT_COMPLETED_EVENT, BROKER_CONNECT_FAILED_EVENT } from './broker-main.ts';
export { DEFAULT_BROKER_PATH } from './broker-option.ts';

/** What the plane hands the broker. */
export interface BrokerDependencies extends FrontDoorDependencies {
  /** The plane's `rpc` option, validated here. */
  rpc: unknown;
}

/** A response the caller's cache must not keep (a `101` is left as the upgrade made it). */
function noStore(response: Response): Response {
  if (response.status === 101 || (response as { webSocket?: unknown }).webSocket != null) {
    return response;
  }
  try {
    response.headers.set('Cache-Control', 'no-store');
    return response;
  } catch {
    const copy = new Response(response.body, response);
    copy.headers.set('Cache-Control', 'no-store');
    return copy;
  }
}

/**
 * Mounts the broker on `app` when the `rpc` option asks for it; returns its path, or `undefined`
 * when unmounted. Throws `SvcConfigurationError` for an invalid `rpc` option.
 */
export function mountBroker(app: Hono, deps: BrokerDependencies): string | undefined {
  const path = resolveBrokerPath(deps.rpc, deps.reservedPaths);
  if (path === undefined) return undefined;
  const policy = deps.options.timeoutPolicy;
  app.all(
    path,
    (c: Context) =>
      deps.withInvocationMiddleware(c, { surface: 'broker', path }, async (caller, connInfo) => {
        const request = c.req.raw;
        const arrivedAt = Date.now();
        const upgrade = isWebSocketUpgradeRequest(request);
        const metadata = readInboundMetadata(request, upgrade ? 'query' : 'header');
        const budget = applyTimeoutPolicy(metadata.budgetMs, policy, {
          perCallTransport: !upgrade,
        });
        const requestId = contextRequestId(c);
        const response = await serveRpc(request, {
          transports: ['http-batch', 'websocket'],
          runtime: c.env,
          requestId,
          // The middleware authenticated the caller before the upgrade: a broker socket takes no
          // token, so its authentication deadline is stopped once the session exists (the
          // deadline is armed right after this returns).
          createMain: (meta) => {
            if (meta.authenticated !== undefined) queueMicrotask(meta.authenticated);
            return new BrokerMain({
              invocation: deps.invocation,
              planeServiceId: deps.options.id,
              invocationContext: {
                caller,
                ...(connInfo !== undefined ? { connInfo } : {}),
                requestId,
                ...(budget !== undefined ? { deadline: arrivedAt + budget } : {}),
                ...(metadata.idempotencyKey !== undefined
                  ? { idempotencyKey: metadata.idempotencyKey }
                  : {}),
                bindings: c,
              },
              callerTransport: upgrade ? 'websocket' : 'http-batch',
              log: deps.log,
              logContext: c,
            });
          },
          // An error without the taxonomy was about to reach the caller: the operator gets it.
          onErrorReplaced: (error) =>
            deps.log({
              event: PLANE_REQUEST_FAILED_EVENT,
              level: 'error',
              requestId,
              method: request.method,
              path,
              status: 500,
              error: describeErrorForLog(error),
            }, c),
        });
        return noStore(response);
      }),
  );
  return path;
}
