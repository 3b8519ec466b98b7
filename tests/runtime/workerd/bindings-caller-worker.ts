// Worker bundled by service-bindings.test.ts: the `billing` caller. It gets tokens from the
// plane's TokenIssuer entrypoint over its PLANE_TOKENS binding (JS RPC) and calls orders over its
// ORDERS binding (HTTP-batch through `binding.fetch`). The host drives it over 127.0.0.1:
//
// - `POST /call` (a CallRequest): one call through an ability session, answered as a CallOutcome.
// - `POST /issue` (any JSON): handed as is to `PLANE_TOKENS.requestCapabilityToken` (with
//   `?issuer=throwing`, to `PLANE_THROWING`), answered as an IssueOutcome.
// - `GET /discovery-hits`: how many discovery requests the orders Worker answered.
// - `GET /catalog-events`: the catalog events the plane Worker logged.
import { abilitySession, disposeAbilitySession } from '../../../src/service/ability-session.ts';
import {
  type CapabilityTokenBinding,
  controlPlaneRpcTokenRequester,
} from '../../../src/service/token-requesters.ts';
import {
  cloudflareServiceBindingRpc,
  type ServiceBindingFetcher,
} from '../../../src/service/transports/http-batch.ts';
import type { TokenRequester } from '../../../src/service/ability-session.ts';
import {
  BILLING_SERVICE_ID,
  type CallOutcome,
  type CallRequest,
  type CatalogEvent,
  DISCOVERY_HITS_PATH,
  type IssueOutcome,
  type SeenError,
} from './bindings-deployment.ts';

interface CallerEnv {
  /** The plane's `TokenIssuer` entrypoint. */
  PLANE_TOKENS: CapabilityTokenBinding;
  /** The plane's `ThrowingTokenIssuer` entrypoint. */
  PLANE_THROWING: CapabilityTokenBinding;
  /** The plane's test-only `PlaneEvents` entrypoint. */
  PLANE_EVENTS: { catalogEvents(): Promise<CatalogEvent[]> };
  /** The orders Worker. */
  ORDERS: ServiceBindingFetcher;
}

const CALL_BUDGET_MS = 15_000;

// One requester per entrypoint for the Worker's lifetime: its token cache outlives a request.
const requesters = new Map<string, TokenRequester>();

function requesterFor(env: CallerEnv, issuer: 'tokens' | 'throwing'): TokenRequester {
  let requester = requesters.get(issuer);
  if (requester === undefined) {
    requester = controlPlaneRpcTokenRequester({
      binding: issuer === 'tokens' ? env.PLANE_TOKENS : env.PLANE_THROWING,
      callerServiceId: BILLING_SERVICE_ID,
    });
    requesters.set(issuer, requester);
  }
  return requester;
}

/** An error as the caller holds it: the fields it carries, nothing re-validated. */
function seenError(error: unknown): SeenError {
  const record = (error !== null && typeof error === 'object' ? error : {}) as Record<
    string,
    unknown
  >;
  return {
    name: record.name,
    code: record.code,
    status: record.status,
    retryable: record.retryable,
    reason: record.reason,
    message: record.message ?? String(error),
  };
}

async function call(env: CallerEnv, request: CallRequest): Promise<CallOutcome> {
  const requester = requesterFor(env, request.issuer ?? 'tokens');
  const tokens: string[] = [];
  const session = abilitySession<Record<string, (input: unknown) => unknown>>({
    abilityId: request.abilityId,
    callerServiceId: BILLING_SERVICE_ID,
    targetServiceId: request.targetServiceId,
    scopes: request.scopes,
    // Records the tokens the session presented, for the host to verify.
    requestToken: async (tokenRequest) => {
      const token = await requester(tokenRequest);
      tokens.push(token);
      return token;
    },
    transport: cloudflareServiceBindingRpc(env.ORDERS),
    timeoutMs: CALL_BUDGET_MS,
  });
  try {
    const result = await session[request.method](request.input);
    return { ok: true, result, tokens };
  } catch (error) {
    return { ok: false, error: seenError(error) };
  } finally {
    disposeAbilitySession(session);
  }
}

async function issue(binding: CapabilityTokenBinding, request: unknown): Promise<IssueOutcome> {
  try {
    return { answer: await binding.requestCapabilityToken(request as never) };
  } catch (error) {
    return { thrown: seenError(error) };
  }
}

export default {
  async fetch(request: Request, env: CallerEnv): Promise<Response> {
    const url = new URL(request.url);
    const path = url.pathname;
    if (request.method === 'POST' && path === '/call') {
      return Response.json(await call(env, await request.json() as CallRequest));
    }
    if (request.method === 'POST' && path === '/issue') {
      const binding = url.searchParams.get('issuer') === 'throwing'
        ? env.PLANE_THROWING
        : env.PLANE_TOKENS;
      return Response.json(await issue(binding, await request.json()));
    }
    if (path === '/discovery-hits') {
      return await env.ORDERS.fetch(new Request(new URL(DISCOVERY_HITS_PATH, 'https://orders')));
    }
    if (path === '/catalog-events') {
      return Response.json(await env.PLANE_EVENTS.catalogEvents());
    }
    return new Response('not found', { status: 404 });
  },
};
