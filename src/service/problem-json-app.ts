/**
 * What every svcplane Hono app (a service, the control plane) does around its routes: give each
 * request an id, echo it on the response, and answer every failure, a throw or an unknown route,
 * as problem+json carrying that id; a policy middleware's `HTTPException` keeps its own answer.
 *
 * @module
 */
import { Context, type Hono } from 'hono';
import { HTTPException } from 'hono/http-exception';
import { problemFromError, problemResponse, problemTitle } from '../core/problem.ts';
import { generateRequestId, SVC_REQUEST_ID_HEADER } from '../core/request-id.ts';

const REQUEST_ID_VARIABLE = 'requestId';

/** The id the request-id middleware gave this request. */
export function contextRequestId(c: Context): string {
  return c.get(REQUEST_ID_VARIABLE as never) as string;
}

/**
 * The answer to a policy refusal (Roles r1a): Hono's own middlewares (`bearerAuth`) and rate
 * limiters refuse by throwing an `HTTPException`, whose status and headers (a 401's
 * `WWW-Authenticate`) are the refusal. A custom response is the middleware's chosen answer;
 * otherwise the status and the message it chose to show become a problem.
 */
export function policyRefusal(exception: HTTPException, requestId: string): Response {
  if (exception.res !== undefined) return exception.getResponse();
  return problemResponse({
    status: exception.status,
    code: 'internal',
    // A server-side failure's message may describe internals; a refusal's is meant for the caller.
    detail: exception.status >= 500 || exception.message === ''
      ? problemTitle(exception.status)
      : exception.message,
    reason: 'http_policy',
    requestId,
  });
}

/** The answer to anything thrown below the request-id middleware. */
function answerToThrow(error: unknown, requestId: string): Response {
  return error instanceof HTTPException
    ? policyRefusal(error, requestId)
    : problemFromError(error, requestId);
}

/** Options of {@link installRequestIdAndProblemJson}. */
export interface RequestIdAndProblemJsonOptions {
  /** The id of this request: an incoming one the app accepts, or a fresh one. */
  requestIdOf(c: Context): string;
  /** Called first on every request, before its id is chosen. */
  begin?(c: Context): void;
  /**
   * Called once the response (a problem for any throw) is final, with what was thrown when the
   * response answers a throw (the problem says only what the caller may learn; the log needs
   * the cause).
   */
  end?(c: Context, requestId: string, startedAt: number, thrown?: unknown): void;
}

const THROWN_VARIABLE = 'svcThrown';

/**
 * Echoes the request id on the response. A runtime's own WebSocket `101` (Deno's, a Workers
 * pair's) takes headers too; one whose headers are immutable keeps the id in its query alone,
 * where the caller sent it, rather than fail the upgrade.
 */
function setResponseRequestId(response: Response, requestId: string): void {
  try {
    response.headers.set(SVC_REQUEST_ID_HEADER, requestId);
  } catch (error) {
    if (response.status !== 101) throw error;
  }
}

/** A request's id, and when it started (0 when nothing reads it). */
interface StartedRequest {
  readonly requestId: string;
  readonly startedAt: number;
}

/** Starts one request: `begin`, then its id; returns the id and when it started. */
function startRequest(c: Context, options: RequestIdAndProblemJsonOptions): StartedRequest {
  options.begin?.(c);
  const requestId = options.requestIdOf(c);
  c.set(REQUEST_ID_VARIABLE as never, requestId as never);
  // Only an app that reports request durations reads the clock.
  const startedAt = options.end === undefined ? 0 : Date.now();
  return { requestId, startedAt };
}

/** Answers a throw below the request-id step with problem+json, remembering what was thrown. */
function answerThrowInRequest(c: Context, error: unknown, requestId: string): void {
  c.set(THROWN_VARIABLE as never, error as never);
  c.res = answerToThrow(error, requestId);
}

/** Finishes one request whose response is final: the id echoed, `end` told. */
function finishRequest(
  c: Context,
  options: RequestIdAndProblemJsonOptions,
  started: StartedRequest,
): void {
  setResponseRequestId(c.res, started.requestId);
  options.end?.(c, started.requestId, started.startedAt, c.get(THROWN_VARIABLE as never));
}

/**
 * Runs `handle` for one request between choosing its id and finishing its response: a throw
 * becomes problem+json, the id is echoed in `X-Request-Id`, and `options.end` hears of it.
 */
async function withRequestId(
  c: Context,
  options: RequestIdAndProblemJsonOptions,
  handle: () => Promise<void>,
): Promise<void> {
  const started = startRequest(c, options);
  try {
    await handle();
  } catch (error) {
    answerThrowInRequest(c, error, started.requestId);
  }
  finishRequest(c, options, started);
}

/** The answer to a throw the request-id middleware did not catch (its own, or Hono's). */
function answerOutsideMiddleware(error: unknown, c: Context): Response {
  c.set(THROWN_VARIABLE as never, error as never);
  return answerToThrow(error, contextRequestId(c) ?? generateRequestId());
}

/**
 * Installs on `app`, before its routes: a middleware that sets the request id (read it with
 * {@link contextRequestId}), turns a throw below it into problem+json and echoes the id in
 * `X-Request-Id`; an `onError` doing the same for what escapes it; and a problem+json 404. An
 * `HTTPException` keeps its status and headers: its own response when it has one, else a problem.
 */
export function installRequestIdAndProblemJson(
  app: Hono,
  options: RequestIdAndProblemJsonOptions,
): void {
  app.use('*', (c, next) => withRequestId(c, options, next));

  // Hono answers a throw in middleware or a route itself (plain text, the error logged to the
  // console whatever the app's logger says) unless told otherwise: leave as problem+json instead.
  app.onError(answerOutsideMiddleware);

  app.notFound((c) =>
    problemResponse({
      status: 404,
      code: 'internal',
      detail: 'No such route',
      retryable: false,
      reason: 'not_found',
      requestId: contextRequestId(c),
    })
  );
}

/** A route's handler, as Hono calls it. */
export type RouteHandler = (c: Context) => Response | Promise<Response>;

/**
 * Serves `request` with `handler` as an app set up by {@link installRequestIdAndProblemJson}
 * would when `handler` is the route matching `path` and the app has no other middleware: the
 * same request id, problem+json and `end` report, without the router and middleware chain
 * (which cost a service a few microseconds per request on every runtime). The handler gets a
 * Hono context of its own for `path` (no path parameters), holding `env` and `executionCtx`.
 */
export function serveRouteDirectly(
  request: Request,
  env: unknown,
  executionCtx: unknown,
  path: string,
  handler: RouteHandler,
  options: RequestIdAndProblemJsonOptions,
): Promise<Response> {
  const c = new Context(request, {
    env,
    executionCtx: executionCtx as never,
    path,
    // As the router reports a route without parameters: `c.req.param()` answers `{}`.
    matchResult: [[[handler, {}]]] as never,
  });
  // The steps of `withRequestId` as one promise chain rather than three nested async
  // functions: each async layer costs a request a promise and a suspended frame more.
  let started: StartedRequest;
  let answered: Response | Promise<Response>;
  try {
    started = startRequest(c, options);
  } catch (error) {
    // What escapes the wrapper itself (choosing the id failed), as the app's `onError` answers.
    return Promise.resolve(answerOutsideMiddleware(error, c));
  }
  try {
    answered = handler(c);
  } catch (error) {
    answered = Promise.reject(error);
  }
  return Promise.resolve(answered).then(
    (response) => {
      try {
        c.res = response;
      } catch (error) {
        return failed(c, options, started, error);
      }
      return finished(c, options, started);
    },
    (error) => failed(c, options, started, error),
  );
}

/** The problem answering what a direct route threw, finished as any response is. */
function failed(
  c: Context,
  options: RequestIdAndProblemJsonOptions,
  started: StartedRequest,
  error: unknown,
): Response {
  try {
    answerThrowInRequest(c, error, started.requestId);
  } catch (thrown) {
    return answerOutsideMiddleware(thrown, c);
  }
  return finished(c, options, started);
}

/** The final response of a direct route, or the app's answer to what finishing it threw. */
function finished(
  c: Context,
  options: RequestIdAndProblemJsonOptions,
  started: StartedRequest,
): Response {
  try {
    finishRequest(c, options, started);
  } catch (error) {
    return answerOutsideMiddleware(error, c);
  }
  return c.res;
}
