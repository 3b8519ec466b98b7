/**
 * The REST facade: every published, non-streaming method with `rest` metadata as an HTTP route
 * of the plane (contract: REST rules; DESIGN.md "Front doors: decisions").
 *
 * Per request, in this order: the plane's own routes are never looked at; the path is matched
 * against the route table (unmatched: the plane's 404; served only under other methods: 405
 * with `Allow`; neither runs the invocation middleware); the body is read and the input
 * assembled (413, 415, 400); the invocation middleware names the caller; the shared invocation
 * path authorizes, mints and calls (403, 422, 504, the author's status, the opaque 500). Every
 * answer is `Cache-Control: no-store`, every failure RFC 9457 problem+json, and every request
 * the facade answers emits exactly one `svc.rest.completed` or `svc.rest.failed`.
 *
 * @module
 */
import type { Context, Hono } from 'hono';
import { svcErrorInfo } from '../../core/errors.ts';
import { filterIdempotencyKey, SVC_IDEMPOTENCY_KEY_HEADER } from '../../core/idempotency.ts';
import { parseTimeoutBudget, SVC_TIMEOUT_HEADER } from '../../core/deadline.ts';
import { describeErrorForLog, loggedRequestPath } from '../../core/logging.ts';
import { problemFromError, problemResponse } from '../../core/problem.ts';
import { contextRequestId } from '../../service/problem-json-app.ts';
import type { ServiceDiscoveryDocument } from '../../service/discovery.ts';
import type { ResolvedTarget } from '../catalog.ts';
import {
  type FrontDoorDependencies,
  type InvocationContext,
  invocationDeadline,
} from '../invocation.ts';
import type { SvcInvocation } from '../invocation-middleware.ts';
import {
  assembleInput,
  DEFAULT_REST_MAX_BODY_BYTES,
  readJsonBody,
  RestRequestRefusal,
} from './rest-input.ts';
import { publishedRestRoutes } from './published-routes.ts';
import { buildRestRoutes, refusalKey, type RestMatch, type RestRouteTable } from './rest-routes.ts';

/** Emitted once for every REST request that succeeded. */
export const REST_COMPLETED_EVENT = 'svc.rest.completed';
/** Emitted once for every REST request the facade answered with a failure. */
export const REST_FAILED_EVENT = 'svc.rest.failed';

/** Headers on every REST answer: never cache-eligible. */
const NO_STORE: Readonly<Record<string, string>> = {
  'Cache-Control': 'no-store',
  'Pragma': 'no-cache',
};

/** Headers of a success answer with a JSON body. */
const JSON_NO_STORE: Readonly<Record<string, string>> = {
  'Content-Type': 'application/json',
  ...NO_STORE,
};

/** Statuses whose response carries no body. */
const EMPTY_BODY_STATUSES: ReadonlySet<number> = new Set([204, 205]);

/** Options of {@link mountRestFacade} beyond the plane's front-door dependencies. */
export interface RestFacadeOptions {
  /** Largest request body; default {@link DEFAULT_REST_MAX_BODY_BYTES} (1 MiB). */
  maxBodyBytes?: number;
}

/**
 * Remembers the route table of the last catalog seen: rebuilt only when a target's document is
 * not the very object it was (accepted documents are frozen, and a discovery cache hands back
 * the same object), so a warm plane matches without building anything.
 */
function routeTableCache(deps: FrontDoorDependencies) {
  let last: {
    documents: readonly ServiceDiscoveryDocument[];
    table: RestRouteTable;
    refused: ReadonlySet<string>;
  } | undefined;
  const unchanged = (targets: readonly ResolvedTarget[]) =>
    last !== undefined && last.documents.length === targets.length &&
    targets.every((target, index) => target.document === last!.documents[index]);
  return async (c: Context, requestId: string): Promise<RestRouteTable> => {
    const targets = deps.catalog.peekAll('default') ??
      (await deps.catalog.all(c, 'default', { requestId })).targets;
    if (!unchanged(targets)) {
      const documents = targets.map((target) => target.document);
      const published = publishedRestRoutes(documents, deps.reservedPaths);
      const table = buildRestRoutes(published, deps.log, c, last?.refused);
      last = { documents, table, refused: new Set(published.refused.map(refusalKey)) };
    }
    return last!.table;
  };
}

/** The raw (still percent-encoded) path and query of a request URL. */
interface RequestTarget {
  pathname: string;
  search: string;
}

/**
 * The path and query of an absolute request URL, as `new URL` would give them (the runtime
 * already normalised the URL it handed over), without building a URL object per request.
 */
function requestTarget(url: string): RequestTarget {
  const authority = url.indexOf('//');
  const pathStart = url.indexOf('/', authority < 0 ? 0 : authority + 2);
  if (pathStart < 0) return { pathname: '/', search: '' };
  const fragment = url.indexOf('#', pathStart);
  const end = fragment < 0 ? url.length : fragment;
  const query = url.indexOf('?', pathStart);
  if (query < 0 || query > end) return { pathname: url.slice(pathStart, end), search: '' };
  return { pathname: url.slice(pathStart, query), search: url.slice(query, end) };
}

/**
 * Sets `no-store` on an answer, unless its headers are immutable (a fetched response). Most
 * answers were built with it (the facade's own): reading costs less than setting again, and
 * still catches a middleware that changed them.
 */
function noStore(response: Response): Response {
  const headers = response.headers;
  if (headers.get('Cache-Control') === 'no-store' && headers.get('Pragma') === 'no-cache') {
    return response;
  }
  try {
    for (const [name, value] of Object.entries(NO_STORE)) response.headers.set(name, value);
    return response;
  } catch {
    const copy = new Response(response.body, response);
    for (const [name, value] of Object.entries(NO_STORE)) copy.headers.set(name, value);
    return copy;
  }
}

/** The success answer: the output as JSON with `rest.status` (no body for 204 and 205). */
function successResponse(status: number, output: unknown): Response {
  if (EMPTY_BODY_STATUSES.has(status)) return new Response(null, { status, headers: NO_STORE });
  return new Response(JSON.stringify(output ?? null), { status, headers: JSON_NO_STORE });
}

/**
 * The answer to a failed invocation. A 401 from the service refused the token the plane minted:
 * that is the plane's failure, never the client's credential, so it is an opaque 500 (only the
 * invocation middleware answers 401 on this surface).
 */
function failureResponse(error: unknown, requestId: string): Response {
  const info = svcErrorInfo(error);
  if (info.code === 'capability_auth' && info.status === 401) {
    return problemResponse({
      status: 500,
      code: 'internal',
      detail: 'Internal error',
      retryable: false,
      reason: 'upstream_token_refused',
      requestId,
      headers: NO_STORE,
    });
  }
  return problemFromError(error, requestId, NO_STORE);
}

function refusalResponse(refusal: RestRequestRefusal, requestId: string): Response {
  return problemResponse({
    status: refusal.status,
    code: refusal.code,
    detail: refusal.message,
    reason: refusal.reason,
    retryable: false,
    requestId,
    headers: NO_STORE,
  });
}

/**
 * Mounts the REST facade on the plane's app, after the plane's own routes. Requests to a
 * reserved path (the plane's routes, which other front doors also declare) pass through
 * untouched, without resolving the catalog.
 */
export function mountRestFacade(
  app: Hono,
  deps: FrontDoorDependencies,
  options: RestFacadeOptions = {},
): void {
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_REST_MAX_BODY_BYTES;
  const reserved = new Set(deps.reservedPaths);
  const tableFor = routeTableCache(deps);
  const { invocation, withInvocationMiddleware, log, logging } = deps;

  app.use('*', async (c, next) => {
    const url = requestTarget(c.req.url);
    if (reserved.has(url.pathname)) return await next();
    const requestId = contextRequestId(c);
    const table = await tableFor(c, requestId);
    const matches = table.match(url.pathname);
    if (matches.size === 0) return await next();
    const startedAt = Date.now();
    const request = c.req.raw;
    const match = matches.get(request.method);
    let response: Response;
    let thrown: unknown;
    if (match === undefined) {
      request.body?.cancel().catch(() => {});
      response = problemResponse({
        status: 405,
        code: 'internal',
        detail: `${request.method} is not served at this path`,
        reason: 'method_not_allowed',
        retryable: false,
        requestId,
        headers: { Allow: [...matches.keys()].sort().join(', '), ...NO_STORE },
      });
    } else {
      try {
        response = await answer(c, match, url, requestId, startedAt);
      } catch (error) {
        thrown = error;
        response = failureResponse(error, requestId);
      }
    }
    response = noStore(response);
    report(c, match, response.status, requestId, startedAt, thrown);
    return response;
  });

  async function answer(
    c: Context,
    match: RestMatch,
    url: RequestTarget,
    requestId: string,
    arrivedAt: number,
  ): Promise<Response> {
    const request = c.req.raw;
    const { route } = match;
    let body: Record<string, unknown> | undefined;
    if (route.readsBody) {
      try {
        body = await readJsonBody(request, maxBodyBytes);
      } catch (error) {
        if (error instanceof RestRequestRefusal) return refusalResponse(error, requestId);
        throw error;
      }
    } else {
      request.body?.cancel().catch(() => {});
    }
    const input = assembleInput(match, url.search, body);
    const svcInvocation: SvcInvocation = {
      surface: 'rest',
      serviceId: route.target.serviceId,
      abilityId: route.target.abilityId,
      method: route.target.method,
      scopes: route.scopes,
      path: route.path,
    };
    const deadline = invocationDeadline(
      parseTimeoutBudget(request.headers.get(SVC_TIMEOUT_HEADER)),
      deps.options.timeoutPolicy,
      arrivedAt,
    );
    const idempotencyKey = filterIdempotencyKey(request.headers.get(SVC_IDEMPOTENCY_KEY_HEADER));
    return await withInvocationMiddleware(c, svcInvocation, async (caller, connInfo) => {
      const context: InvocationContext = { caller, requestId, bindings: c };
      if (connInfo !== undefined) context.connInfo = connInfo;
      if (deadline !== undefined) context.deadline = deadline;
      if (idempotencyKey !== undefined) context.idempotencyKey = idempotencyKey;
      return successResponse(route.status, await invocation.call(route.target, input, context));
    });
  }

  /** The request's one outcome event. */
  function report(
    c: Context,
    match: RestMatch | undefined,
    status: number,
    requestId: string,
    startedAt: number,
    thrown: unknown,
  ): void {
    if (!logging) return;
    const failed = status >= 400;
    const fields: Record<string, unknown> = {
      requestId,
      method: c.req.method,
      path: loggedRequestPath(c.req.url),
      status,
      durationMs: Date.now() - startedAt,
    };
    if (match !== undefined) {
      fields.route = match.route.path;
      fields.service = match.route.target.serviceId;
      fields.ability = match.route.target.abilityId;
      fields.abilityMethod = match.route.target.method;
    }
    if (thrown !== undefined) {
      const info = svcErrorInfo(thrown);
      fields.code = info.code;
      if (info.reason !== undefined) fields.reason = info.reason;
      // The caller got a problem that says what it may learn; an unshaped failure's cause is
      // for the operator.
      if (info.code === 'internal') fields.error = describeErrorForLog(thrown);
    }
    log({
      event: failed ? REST_FAILED_EVENT : REST_COMPLETED_EVENT,
      level: status >= 500 ? 'error' : failed ? 'warn' : 'info',
      ...fields,
    }, c);
  }
}
