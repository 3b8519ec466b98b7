/**
 * `createService`: one pure `fetch` that serves a service's discovery document and each
 * ability's RPC route, on every runtime.
 *
 * @module
 */
import { type Context, Hono } from 'hono';
import { applyTimeoutPolicy } from '../core/deadline.ts';
import { SvcError, svcErrorInfo } from '../core/errors.ts';
import { httpCacheHeaders } from '../core/http-cache.ts';
import {
  createEventLog,
  describeErrorForLog,
  loggedRequestPath,
  type SvcLogEvent,
} from '../core/logging.ts';
import {
  acceptRequestId,
  generateRequestId,
  SVC_REQUEST_ID_HEADER,
  SVC_REQUEST_ID_QUERY_PARAM,
} from '../core/request-id.ts';
import { type AbilityDefinition, assertUniqueProjections } from './ability.ts';
import { AbilityGateway, type GatewayContext } from './ability-gateway.ts';
import { type ServiceDiscoveryDocument, serviceDiscoveryDocument } from './discovery.ts';
import { readInboundMetadata } from './inbound-metadata.ts';
import {
  type ConnectAbilityAnswer,
  type ConnectAbilityRequest,
  createNativeAbilityConnector,
} from './native-ability-rpc.ts';
import {
  contextRequestId,
  installRequestIdAndProblemJson,
  type RequestIdAndProblemJsonOptions,
  type RouteHandler,
  serveRouteDirectly,
} from './problem-json-app.ts';
import {
  beginLogEventCollection,
  endLogEventCollection,
  errorWithheldEvent,
  recordLogEvent,
} from './log-events.ts';
import { serveRpc, type ServeRpcOptions } from './rpc-serve.ts';
import { resolveServiceOptions, type ServiceOptions } from './service-options.ts';
import { isWebSocketUpgradeRequest } from './websocket-upgrade.ts';

/** A running service: a web-standard `fetch`, its Hono app, and its discovery document. */
export interface SvcService {
  /**
   * Serves one request: the discovery document and every ability's RPC route. `env` holds the
   * runtime's bindings (handlers read them from `context`, Hono's `c.env`); `ctx` is the
   * runtime's execution context (Workers), passed through.
   */
  fetch(request: Request, env?: unknown, ctx?: unknown): Promise<Response>;
  /** The Hono app behind `fetch`, for mounting the service inside a larger app. */
  app: Hono;
  /** The discovery document the service publishes (a fresh copy on every call). */
  discovery(): ServiceDiscoveryDocument;
  /**
   * Native binding RPC: opens a session with one ability enabling `cloudflare-binding-rpc`, for
   * a caller bound to this Worker. Expose it from a `WorkerEntrypoint`:
   * `connectAbility(request) { return service.connectAbility(request, this.env); }`. Refusals
   * resolve as `{ error }` data; `env` is the handler factories' `context.env`.
   */
  connectAbility(request: ConnectAbilityRequest, env?: unknown): Promise<ConnectAbilityAnswer>;
}

/** The path every service publishes its discovery document at. */
export const SERVICE_DISCOVERY_PATH = '/.well-known/svc/service.json';

/**
 * What the log says of a session aborted for its peer's messages. Only this system's own errors
 * (by class, not by shape: a peer can send an error carrying any `code` and `reason`) give their
 * reason and message; anything else is Cap'n Web's or the peer's text, which may quote the
 * peer's frame (a token included) or forge a reason, so it is logged by name only.
 */
function sessionAbortLogFields(reason: unknown): Pick<SvcLogEvent, 'reason' | 'error'> {
  if (reason instanceof SvcError) {
    return {
      reason: svcErrorInfo(reason).reason ?? 'rpc_session_aborted',
      error: describeErrorForLog(reason),
    };
  }
  const { name } = describeErrorForLog(reason);
  return {
    reason: 'rpc_protocol_error',
    error: {
      name: /^[A-Za-z]{1,64}$/.test(name) ? name : 'Error',
      message: 'withheld: it may quote what the peer sent',
    },
  };
}

/**
 * The path of a request URL as Hono's router reads it, when reading it takes nothing but
 * finding its ends: `undefined` for a path with percent-escapes, which Hono decodes first.
 */
function plainRequestPath(url: string): string | undefined {
  const start = url.indexOf('/', url.indexOf(':') + 3);
  if (start === -1) return undefined;
  let end = start;
  while (end < url.length) {
    const code = url.charCodeAt(end);
    if (code === 0x3f /* ? */ || code === 0x23 /* # */) break;
    if (code === 0x25 /* % */) return undefined;
    end++;
  }
  return url.slice(start, end);
}

/**
 * Creates a service from its abilities. Every definition is checked now: a service that would
 * misbehave at request time refuses to be created, with an error naming what is wrong.
 */
export function createService(options: ServiceOptions): SvcService {
  const resolved = resolveServiceOptions(options);
  // deno-lint-ignore no-explicit-any
  const abilities = options.abilities as readonly AbilityDefinition<any>[];
  assertUniqueProjections(abilities, resolved.id);
  const document = serviceDiscoveryDocument({
    id: resolved.id,
    title: resolved.title,
    version: resolved.version,
    ...(options.capabilities !== undefined ? { capabilities: options.capabilities } : {}),
    abilities,
    ...(resolved.methodCeilingMs !== undefined
      ? { serviceMethodCeilingMs: resolved.methodCeilingMs }
      : {}),
    ...(resolved.brokerServiceId !== undefined
      ? { ingress: { brokerServiceId: resolved.brokerServiceId } }
      : {}),
  });
  const documentBody = JSON.stringify(document);
  const discoveryHeaders = httpCacheHeaders(resolved.httpCache, [
    'svc:discovery',
    `svc:service:${resolved.id}`,
  ]);
  const sink = createEventLog(options.logger, 'createService: `logger`');
  const generateId = resolved.requestIdGenerator ?? generateRequestId;

  const emit = (c: Context | undefined, event: SvcLogEvent): void => {
    if (c !== undefined) recordLogEvent(c, event);
    sink(event, c);
  };

  const app = new Hono();
  const SESSION_ABORT_VARIABLE = 'svcSessionAbort';
  const OUTCOME_REPORTED_VARIABLE = 'svcOutcomeReported';

  const requestIdAndProblems: RequestIdAndProblemJsonOptions = {
    begin: beginLogEventCollection,
    requestIdOf(c) {
      const incoming = acceptRequestId(c.req.header(SVC_REQUEST_ID_HEADER)) ??
        // Only a URL with a query can carry one there: most requests need not parse it.
        (c.req.url.includes('?')
          ? acceptRequestId(c.req.query(SVC_REQUEST_ID_QUERY_PARAM))
          : undefined);
      // Only a custom generator's output needs checking; the default one is well formed.
      return incoming ??
        (generateId === generateRequestId
          ? generateRequestId()
          : acceptRequestId(generateId()) ?? generateRequestId());
    },
    end(c, requestId, startedAt, thrown) {
      const status = c.res.status;
      // An HTTP batch whose session the caller's message aborted still answers 200: its one
      // outcome is that failure, reported here with the abort's fields, not a completion too.
      const aborted = c.get(SESSION_ABORT_VARIABLE as never) as Record<string, unknown> | undefined;
      c.set(OUTCOME_REPORTED_VARIABLE as never, true as never);
      const failed = status >= 500 || aborted !== undefined;
      emit(c, {
        event: failed ? 'svc.request.failed' : 'svc.request.completed',
        level: status >= 500 ? 'error' : aborted !== undefined ? 'warn' : 'info',
        requestId,
        method: c.req.method,
        path: loggedRequestPath(c.req.url),
        status,
        durationMs: Date.now() - startedAt,
        // The caller got an opaque problem; the operator gets the cause.
        ...(status >= 500 && thrown !== undefined ? { error: describeErrorForLog(thrown) } : {}),
        ...aborted,
      });
      endLogEventCollection(c);
    },
  };
  installRequestIdAndProblemJson(app, requestIdAndProblems);
  // A batch on the direct route (a service with no middleware of the operator's) has no reader
  // of its events but the logger: with logging off, it neither collects nor reports them.
  const directRouteSteps: RequestIdAndProblemJsonOptions = options.logger === false
    ? { requestIdOf: requestIdAndProblems.requestIdOf }
    : requestIdAndProblems;

  for (const middleware of resolved.middleware) app.use('*', middleware);

  app.get(SERVICE_DISCOVERY_PATH, (c) => {
    emit(c, {
      event: 'svc.discovery.served',
      level: 'info',
      requestId: contextRequestId(c),
    });
    return new Response(documentBody, {
      headers: { 'Content-Type': 'application/json', ...discoveryHeaders },
    });
  });

  // An app with no middleware of the operator's serves its RPC batches without Hono's dispatch.
  const batchRoutes = new Map<string, RouteHandler>();
  for (const ability of abilities) {
    const route: RouteHandler = (c) => {
      const request = c.req.raw;
      const transport = isWebSocketUpgradeRequest(request) ? 'websocket' : 'http-batch';
      const metadata = readInboundMetadata(request, transport === 'websocket' ? 'query' : 'header');
      const budgetMs = applyTimeoutPolicy(metadata.budgetMs, resolved.timeoutPolicy, {
        perCallTransport: transport === 'http-batch',
      });
      const requestId = contextRequestId(c);
      const arrivedAt = Date.now();
      // Optional members are set one by one rather than spread from conditional objects: on
      // some engines (JavaScriptCore) each spread copies through a slow generic path, per request.
      const serve: ServeRpcOptions = {
        transports: ability.rpc.transports,
        runtime: c.env,
        requestId,
        // The backstop behind the wrapper: what reaches it is a failure the handler caused
        // (an output Cap'n Web cannot send) or one of Cap'n Web's own, replaced all the same.
        onErrorReplaced(error) {
          emit(c, errorWithheldEvent(requestId, ability.id, error));
        },
        // A session ended by what its caller sent: no handler failed, but the RPC request did
        // (an HTTP batch still answers 200, carrying the abort).
        // Over HTTP-batch the abort is known before the response leaves, and becomes the
        // request's one outcome event; a WebSocket session ends long after its upgrade did.
        onSessionAborted(reason) {
          const fields = { ability: ability.id, ...sessionAbortLogFields(reason) };
          if (c.get(OUTCOME_REPORTED_VARIABLE as never) !== true) {
            c.set(SESSION_ABORT_VARIABLE as never, fields as never);
            return;
          }
          emit(c, { event: 'svc.request.failed', level: 'warn', requestId, ...fields });
        },
        createMain(meta) {
          const gateway: GatewayContext = {
            ability,
            service: resolved,
            transport,
            metadata,
            requestId,
            context: c,
            log(event) {
              emit(c, event);
            },
          };
          if (budgetMs !== undefined) gateway.callerDeadlineEndsAt = arrivedAt + budgetMs;
          if (meta.authenticated !== undefined) gateway.onAuthenticated = meta.authenticated;
          return new AbilityGateway(gateway);
        },
      };
      if (options.upgradeWebSocket !== undefined) serve.upgrader = options.upgradeWebSocket;
      return serveRpc(request, serve);
    };
    app.all(ability.rpc.path, route);
    if (resolved.middleware.length === 0) batchRoutes.set(ability.rpc.path, route);
  }

  const connectAbility = createNativeAbilityConnector({
    abilities,
    service: resolved,
    emit: (event) => emit(undefined, event),
  });

  return {
    app,
    fetch(request, env, ctx) {
      // Only a batch: Hono answers other methods its own way (a HEAD as a GET without a body).
      const path = request.method === 'POST' ? plainRequestPath(request.url) : undefined;
      const route = path === undefined ? undefined : batchRoutes.get(path);
      if (route === undefined) return app.fetch(request, env, ctx as never) as Promise<Response>;
      return serveRouteDirectly(request, env, ctx, path!, route, directRouteSteps);
    },
    discovery: () => structuredClone(document),
    connectAbility,
  };
}
