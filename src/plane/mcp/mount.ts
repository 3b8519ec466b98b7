/**
 * `mountMcpEndpoint`: the MCP endpoint at `POST /mcp`, the plane's one entry into this door.
 * Gates run in the contract's order before anything else: method (405), Origin (403), protocol
 * version (400), body size, JSON and JSON-RPC shape (413 / 400); then the catalog (no MCP
 * projection: 404, not mounted), then the invocation middleware, then the SDK, which is loaded
 * only now, so a plane without MCP projections never loads it. Every answer is `no-store`.
 *
 * @module
 */
import type { Context, Hono } from 'hono';
import { parseTimeoutBudget, SVC_TIMEOUT_HEADER } from '../../core/deadline.ts';
import { filterIdempotencyKey, SVC_IDEMPOTENCY_KEY_HEADER } from '../../core/idempotency.ts';
import { describeErrorForLog } from '../../core/logging.ts';
import { contextRequestId } from '../../service/problem-json-app.ts';
import type { BrokerCaller } from '../broker-caller.ts';
import type { ConnInfo } from '../../core/conn-info.ts';
import {
  type FrontDoorDependencies,
  type InvocationContext,
  invocationDeadline,
  type PublishedMethod,
  publishedMethodsOf,
} from '../invocation.ts';
import type { SvcInvocation } from '../invocation-middleware.ts';
import {
  type BodyRefusal,
  JSONRPC_INVALID_REQUEST,
  jsonRpcErrorResponse,
  type McpMessage,
  readMcpMessages,
} from './jsonrpc-body.ts';
import { buildMcpCatalog, type McpCatalog, type McpProjected } from './mcp-catalog.ts';
import { JSONRPC_INTERNAL_ERROR, McpDispatch } from './mcp-dispatch.ts';
import { originAllowed } from './origin-gate.ts';
import { pinInitializeVersion, protocolVersionAccepted } from './protocol-version.ts';

/** Where the endpoint is served. */
export const MCP_PATH = '/mcp';

const NO_STORE = { 'Cache-Control': 'no-store' } as const;

type SdkModule = typeof import('./sdk-server.ts');
let sdk: Promise<SdkModule> | undefined;
/** The SDK half once loaded: later requests take it without waiting on a promise. */
let loadedSdk: SdkModule | undefined;

/** Loads the SDK half once, on the first request that needs it. */
function loadSdk(): Promise<SdkModule> {
  sdk ??= import('./sdk-server.ts').then((module) => loadedSdk = module);
  return sdk;
}

function refusal(status: number, code: number, message: string, extra?: HeadersInit): Response {
  return jsonRpcErrorResponse({ status, code, message }, {
    ...NO_STORE,
    ...Object.fromEntries(new Headers(extra)),
  });
}

/**
 * The same answer, never cache-eligible (MCP rule 3), whoever wrote it: marked in place, or
 * copied when its headers are immutable (a fetched response).
 */
function noStore(response: Response): Response {
  if (response.headers.get('Cache-Control') === 'no-store') return response;
  try {
    response.headers.set('Cache-Control', 'no-store');
    return response;
  } catch {
    const headers = new Headers(response.headers);
    headers.set('Cache-Control', 'no-store');
    return new Response(response.body, {
      status: response.status,
      statusText: response.statusText,
      headers,
    });
  }
}

/** Whether any request asks for progress: then the answer must be a stream of events. */
function wantsProgress(messages: readonly McpMessage[]): boolean {
  return messages.some((message) => {
    const meta = (message.params as { _meta?: { progressToken?: unknown } } | undefined)?._meta;
    return meta?.progressToken !== undefined;
  });
}

function invocationContext(
  c: Context,
  caller: BrokerCaller,
  connInfo: ConnInfo | undefined,
  deps: FrontDoorDependencies,
  arrivedAt: number,
): InvocationContext {
  const deadline = invocationDeadline(
    parseTimeoutBudget(c.req.header(SVC_TIMEOUT_HEADER)),
    deps.options.timeoutPolicy,
    arrivedAt,
  );
  const idempotencyKey = filterIdempotencyKey(c.req.header(SVC_IDEMPOTENCY_KEY_HEADER));
  const context: InvocationContext = { caller, requestId: contextRequestId(c), bindings: c };
  if (connInfo !== undefined) context.connInfo = connInfo;
  if (deadline !== undefined) context.deadline = deadline;
  if (idempotencyKey !== undefined) context.idempotencyKey = idempotencyKey;
  return context;
}

/**
 * Mounts `/mcp` on the plane's app. Tools, prompts and resources come from the catalog's
 * published methods with MCP projections, the same for every caller; each call goes through the
 * shared invocation path with `svcInvocation.surface = 'mcp'`, enriched with the projected
 * method (and `tool`) during dispatch.
 */
export function mountMcpEndpoint(app: Hono, deps: FrontDoorDependencies): void {
  const { invocation, log } = deps;
  if (deps.options.mcp === false) return;
  const options = deps.options.mcp;
  const gate = {
    publicOrigins: deps.options.publicOrigins,
    allowedOrigins: options.allowedOrigins,
  };
  const serverInfo = { name: deps.options.id, version: '1.0.0' };

  // The projection of the last catalog seen: rebuilt only when a published method changed
  // (accepted documents are frozen and kept while cached, so identity tells). `documents` are
  // those it was built from when every target was cached: while the cache hands back the very
  // same documents, the projection is reused without resolving or listing anything.
  let last: {
    methods: unknown[];
    catalog: McpCatalog;
    documents: readonly unknown[] | undefined;
  } | undefined;
  function projected(published: PublishedMethod[], documents?: readonly unknown[]): McpCatalog {
    const methods = published.map((entry) => entry.method);
    const unchanged = last !== undefined && last.methods.length === methods.length &&
      last.methods.every((method, index) => method === methods[index]);
    const catalog = unchanged ? last!.catalog : buildMcpCatalog(published);
    last = { methods, catalog, documents };
    return catalog;
  }

  function cachedCatalog(): McpCatalog | undefined {
    const targets = deps.catalog.peekAll('default');
    if (targets === undefined) return undefined;
    const known = last?.documents;
    if (
      known !== undefined && known.length === targets.length &&
      targets.every((target, index) => target.document === known[index])
    ) {
      return last!.catalog;
    }
    return projected(publishedMethodsOf(targets), targets.map((target) => target.document));
  }

  async function catalogOf(c: Context): Promise<McpCatalog | Response> {
    try {
      return cachedCatalog() ??
        projected(await invocation.publishedMethods(c, contextRequestId(c)));
    } catch (error) {
      // Fail closed: no catalog, no tools (Catalog rules). The log has the cause.
      log({
        event: 'svc.mcp.catalog_failed',
        level: 'error',
        requestId: contextRequestId(c),
        error: describeErrorForLog(error),
      }, c);
      return refusal(500, JSONRPC_INTERNAL_ERROR, 'Internal error: the catalog is unavailable');
    }
  }

  app.all(MCP_PATH, async (c) => {
    const arrivedAt = Date.now();
    const request = c.req.raw;
    if (request.method !== 'POST') {
      return refusal(
        405,
        JSONRPC_INVALID_REQUEST,
        'Method not allowed: the MCP endpoint takes POST',
        {
          Allow: 'POST',
        },
      );
    }
    if (!originAllowed(request, gate)) {
      return refusal(
        403,
        JSONRPC_INVALID_REQUEST,
        'Forbidden: this Origin may not use the MCP endpoint',
      );
    }
    if (!protocolVersionAccepted(request.headers.get('mcp-protocol-version'))) {
      return refusal(400, JSONRPC_INVALID_REQUEST, 'Bad request: unsupported MCP-Protocol-Version');
    }
    const read = await readMcpMessages(request, options.maxBodyBytes);
    if ('status' in read) {
      return jsonRpcErrorResponse(read as BodyRefusal, NO_STORE);
    }
    const catalog = await catalogOf(c);
    if (catalog instanceof Response) return catalog;
    if (catalog.empty) return noStore(await c.notFound());
    for (const message of read.messages) pinInitializeVersion(message);
    return noStore(
      await deps.withInvocationMiddleware(c, { surface: 'mcp' }, async (caller, connInfo) => {
        const dispatch = new McpDispatch({
          catalog,
          invocation,
          context: invocationContext(c, caller, connInfo, deps, arrivedAt),
          log,
          logging: deps.logging,
          logContext: c,
          limits: { maxItems: options.maxItems, maxBytes: options.maxBytes },
          enrich(projected: McpProjected, extra: { tool?: string }) {
            const current = c.get('svcInvocation' as never) as SvcInvocation | undefined;
            const enriched: SvcInvocation = {
              ...current,
              surface: 'mcp',
              serviceId: projected.target.serviceId,
              abilityId: projected.target.abilityId,
              method: projected.target.method,
            };
            if (extra.tool !== undefined) enriched.tool = extra.tool;
            c.set('svcInvocation' as never, enriched as never);
          },
        });
        const { serveMcpRequest } = loadedSdk ?? await loadSdk();
        return await serveMcpRequest(
          request,
          read.batch ? read.messages : read.messages[0],
          dispatch,
          {
            serverInfo,
            jsonResponse: !wantsProgress(read.messages),
          },
        );
      }),
    );
  });
}
