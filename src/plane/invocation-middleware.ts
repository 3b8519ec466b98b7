/**
 * Runs the plane's `invocationMiddleware` for one front-door request (contract: Invocation
 * middleware). The middleware names the caller (`svcCaller`) and may forward connection info
 * (`svcConnInfo`); it reads `svcInvocation` (what the request is about) for policy and audit. It
 * may answer by itself, and a 401 it answers keeps its `WWW-Authenticate`.
 *
 * A door calls this only for a request it matched (a published REST route, the MCP endpoint,
 * the broker): never for an unmatched path, a wrong method, the token endpoint or the JWKS.
 *
 * @module
 */
import type { Context, MiddlewareHandler } from 'hono';
import { HTTPException } from 'hono/http-exception';
import { type ConnInfo, sanitizeConnInfo } from '../core/conn-info.ts';
import { SvcConfigurationError } from '../core/errors.ts';
import type { SvcEventLog } from '../core/logging.ts';
import { problemResponse } from '../core/problem.ts';
import { contextRequestId, policyRefusal } from '../service/problem-json-app.ts';
import { type BrokerCaller, validateBrokerCaller } from './broker-caller.ts';

/** `svcInvocation`: what the request is about, for policy and audit. */
export interface SvcInvocation {
  surface: 'rest' | 'mcp' | 'broker';
  serviceId?: string;
  abilityId?: string;
  method?: string;
  scopes?: readonly string[];
  path?: string;
  tool?: string;
}

/** The Hono variables of the plane's app. */
export type PlaneVariables = {
  /** Set by invocation middleware before `next()`: who the plane acts for. */
  svcCaller: BrokerCaller;
  /** Optionally set by invocation middleware: forwarded to the service only, never into a token. */
  svcConnInfo: ConnInfo;
  /** Set by the front door before the middleware runs. */
  svcInvocation: SvcInvocation;
  /** The request id (an accepted `X-Request-Id`, or a generated one). */
  requestId: string;
};

/** What a front door runs once the middleware named the caller. */
export type InvocationHandler = (
  caller: BrokerCaller,
  connInfo: ConnInfo | undefined,
) => Promise<Response>;

/** {@link createInvocationMiddlewareRunner}'s result: runs the middleware around a door's handler. */
export type WithInvocationMiddleware = (
  c: Context,
  invocation: SvcInvocation,
  handler: InvocationHandler,
) => Promise<Response>;

/** The reason of the 500 a front door answers when no caller was named. */
export const INVOCATION_CALLER_MISSING = 'invocation_caller_missing';

/** Event logged once, at the first front-door request, when no middleware names callers. */
export const INVOCATION_MIDDLEWARE_MISSING_EVENT = 'svc.plane.invocation_middleware_missing';

function callerMissing(c: Context, detail: string): Response {
  return problemResponse({
    status: 500,
    code: 'internal',
    detail,
    retryable: false,
    reason: INVOCATION_CALLER_MISSING,
    requestId: contextRequestId(c),
  });
}

/**
 * Validates the `invocationMiddleware` option: a Hono middleware `(c, next)`, or absent. Throws
 * `SvcConfigurationError` otherwise.
 */
export function validateInvocationMiddleware(value: unknown): MiddlewareHandler | undefined {
  if (value === undefined || value === false) return undefined;
  if (typeof value !== 'function') {
    throw new SvcConfigurationError(
      'createControlPlane: `invocationMiddleware` must be a Hono middleware (c, next) => ...',
      { reason: 'invalid_invocation_middleware' },
    );
  }
  return value as MiddlewareHandler;
}

/**
 * Builds the runner front doors call for each matched request: sets `svcInvocation`, runs the
 * middleware with a `next` that requires a valid `svcCaller` (none, or a malformed one: a 500
 * problem `invocation_caller_missing`, the handler never runs), then runs `handler(caller,
 * connInfo)`. What the middleware answers by itself (a returned `Response`, a thrown
 * `HTTPException`, or a response it set without calling `next`) is returned untouched. Without a
 * middleware every front-door request answers that 500, and `log` reports the configuration
 * error once, at the first such request (which front doors a catalog publishes is only known
 * once it is resolved; a plane that serves only tokens never reports it).
 */
export function createInvocationMiddlewareRunner(
  middleware: MiddlewareHandler | undefined,
  log: SvcEventLog,
): WithInvocationMiddleware {
  if (middleware === undefined) {
    let reported = false;
    return (c) => {
      if (!reported) {
        reported = true;
        log({
          event: INVOCATION_MIDDLEWARE_MISSING_EVENT,
          level: 'error',
          requestId: contextRequestId(c),
          detail: 'a front door was reached but no invocationMiddleware names its callers: ' +
            'every front-door request answers 500 invocation_caller_missing',
        }, c);
      }
      return Promise.resolve(
        callerMissing(c, 'The plane has no invocation middleware to name the caller'),
      );
    };
  }
  return async (c, invocation, handler) => {
    c.set('svcInvocation' as never, invocation as never);
    let handled: Response | undefined;
    let nextRan = false;
    let returned: unknown;
    try {
      returned = await middleware(c, async () => {
        nextRan = true;
        const raw = c.get('svcCaller' as never) as unknown;
        if (raw === undefined) {
          handled = callerMissing(c, 'The invocation middleware named no caller');
        } else {
          let caller: BrokerCaller | undefined;
          try {
            caller = validateBrokerCaller(raw, 'invocationMiddleware: svcCaller');
          } catch {
            handled = callerMissing(c, 'The invocation middleware named an invalid caller');
          }
          if (caller !== undefined) {
            const connInfo = sanitizeConnInfo(c.get('svcConnInfo' as never) as unknown);
            handled = await handler(caller, connInfo);
          }
        }
        c.res = handled;
      });
    } catch (error) {
      // A policy refusal (hono/bearer-auth throws one, with its WWW-Authenticate) is its answer.
      if (error instanceof HTTPException) return policyRefusal(error, contextRequestId(c));
      throw error;
    }
    if (returned instanceof Response) return returned;
    // After next(), the middleware may have decorated c.res (headers): that is the answer.
    if (nextRan) return c.res;
    if (c.finalized) return c.res;
    return callerMissing(c, 'The invocation middleware neither answered nor called next()');
  };
}
