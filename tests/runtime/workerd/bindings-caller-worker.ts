// Worker bundled by service-bindings.test.ts: the `billing` caller. It gets tokens from the
// plane's TokenIssuer entrypoint over its PLANE_TOKENS binding (JS RPC) and calls orders over its
// ORDERS binding (HTTP-batch through `binding.fetch`, or a WebSocket session upgraded through it).
// The host drives it over 127.0.0.1:
//
// - `POST /call` (a CallRequest): one call through an ability session, answered as a CallOutcome.
// - `POST /stream` (a StreamRequest): a WebSocket session to orders over the ORDERS binding, a
//   unary call and a stream read item by item, answered as a StreamOutcome.
// - `POST /native-stream` (a StreamRequest): the same over native binding RPC, through its
//   ORDERS_RPC binding to orders' OrdersAbilities entrypoint (`connectAbility`).
// - `POST /broker-stream` (`{ count, scopes? }`): a brokerSession to the plane's broker over a
//   WebSocket upgraded through PLANE_BROKER; the plane reaches orders over native binding RPC.
// - `POST /plane-stream` (`{ count }`): the same through the plane's own `abilitySession`, run by
//   its PlaneSessions entrypoint, answered as a StreamOutcome.
// - `POST /issue` (any JSON): handed as is to `PLANE_TOKENS.requestCapabilityToken` (with
//   `?issuer=throwing`, to `PLANE_THROWING`), answered as an IssueOutcome.
// - `GET /discovery-hits`: how many discovery requests the orders Worker answered.
// - `GET /sockets`: the WebSocket sessions the orders Worker accepted (a SocketRecord).
// - `GET /catalog-events`: the catalog events the plane Worker logged.
import { serviceBindingWebSocketFactory } from '../../../src/adapters/workers.ts';
import { abilitySession, disposeAbilitySession } from '../../../src/caller/ability-session.ts';
import { brokerSession } from '../../../src/caller/broker-session.ts';
import {
  type CapabilityTokenBinding,
  controlPlaneRpcTokenRequester,
} from '../../../src/caller/token-requesters.ts';
import {
  cloudflareServiceBindingRpc,
  type ServiceBindingFetcher,
} from '../../../src/caller/transports/http-batch.ts';
import { websocketRpc } from '../../../src/caller/transports/websocket.ts';
import {
  cloudflareNativeRpc,
  type NativeAbilityBinding,
} from '../../../src/caller/transports/cloudflare-native.ts';
import type { TokenRequester } from '../../../src/caller/ability-session.ts';
import {
  BILLING_SERVICE_ID,
  type CallOutcome,
  type CallRequest,
  type CatalogEvent,
  DISCOVERY_HITS_PATH,
  type IssueOutcome,
  lookupAndStream,
  type OrdersApi,
  seenError,
  SOCKETS_PATH,
  type StreamOutcome,
  type StreamRequest,
} from './bindings-deployment.ts';

interface CallerEnv {
  /** The plane's `TokenIssuer` entrypoint. */
  PLANE_TOKENS: CapabilityTokenBinding;
  /** The plane's `ThrowingTokenIssuer` entrypoint. */
  PLANE_THROWING: CapabilityTokenBinding;
  /** The plane's test-only `PlaneEvents` entrypoint. */
  PLANE_EVENTS: { catalogEvents(): Promise<CatalogEvent[]> };
  /** The plane's test-only `PlaneSessions` entrypoint. */
  PLANE_SESSIONS: { streamOrders(count: number): Promise<StreamOutcome> };
  /** The orders Worker. */
  ORDERS: ServiceBindingFetcher;
  /** The orders Worker's OrdersAbilities entrypoint (native binding RPC). */
  ORDERS_RPC: NativeAbilityBinding;
  /** The plane's PlaneBroker entrypoint (its broker at `/rpc`). */
  PLANE_BROKER: ServiceBindingFetcher;
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

/** A compact JWS no plane signed: orders must refuse it inside the session, with 401. */
const UNSIGNED_TOKEN = [
  btoa(JSON.stringify({ alg: 'ES256', typ: 'svc-capability+jwt', kid: 'bindings-k1' })),
  btoa(JSON.stringify({ iss: 'https://plane.bindings.test', aud: 'orders', sub: 'billing' })),
  'c2lnbmF0dXJl',
].map((part) => part.replaceAll('=', '').replaceAll('+', '-').replaceAll('/', '_')).join('.');

/**
 * A WebSocket session to orders: the upgrade goes through the ORDERS binding's fetch, the token
 * (the plane's, unless the request asks for an unsigned one) inside the session.
 */
function stream(env: CallerEnv, request: StreamRequest): Promise<StreamOutcome> {
  const requester = requesterFor(env, 'tokens');
  return lookupAndStream(
    () =>
      abilitySession<OrdersApi>({
        abilityId: 'orders.catalog',
        callerServiceId: BILLING_SERVICE_ID,
        targetServiceId: 'orders',
        scopes: ['orders.read'],
        requestToken: request.token === 'unsigned'
          ? () => Promise.resolve(UNSIGNED_TOKEN)
          : requester,
        transport: websocketRpc(
          new URL(request.path ?? '/rpc/orders.catalog', 'https://orders.internal'),
          { createWebSocket: serviceBindingWebSocketFactory(env.ORDERS) },
        ),
        timeoutMs: CALL_BUDGET_MS,
      }),
    request.count,
  );
}

/** A session to orders over native binding RPC: `connectAbility` through ORDERS_RPC. */
function nativeStream(env: CallerEnv, request: StreamRequest): Promise<StreamOutcome> {
  const requester = requesterFor(env, 'tokens');
  return lookupAndStream(
    () =>
      abilitySession<OrdersApi>({
        abilityId: 'orders.catalog',
        callerServiceId: BILLING_SERVICE_ID,
        targetServiceId: 'orders',
        scopes: ['orders.read'],
        requestToken: request.token === 'unsigned'
          ? () => Promise.resolve(UNSIGNED_TOKEN)
          : requester,
        transport: cloudflareNativeRpc(env.ORDERS_RPC),
        timeoutMs: CALL_BUDGET_MS,
      }),
    request.count,
  );
}

/** A session through the plane's broker: no token on this side, orders reached natively. */
function brokerStream(
  env: CallerEnv,
  request: { count: number; scopes?: string[] },
): Promise<StreamOutcome> {
  return lookupAndStream(
    () =>
      brokerSession<OrdersApi>({
        url: 'https://plane.internal/rpc',
        targetServiceId: 'orders',
        abilityId: 'orders.catalog',
        scopes: request.scopes ?? ['orders.read'],
        transport: 'websocket',
        createWebSocket: serviceBindingWebSocketFactory(env.PLANE_BROKER),
        timeoutMs: CALL_BUDGET_MS,
      }),
    request.count,
  );
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
    if (request.method === 'POST' && path === '/stream') {
      return Response.json(await stream(env, await request.json() as StreamRequest));
    }
    if (request.method === 'POST' && path === '/native-stream') {
      return Response.json(await nativeStream(env, await request.json() as StreamRequest));
    }
    if (request.method === 'POST' && path === '/broker-stream') {
      return Response.json(
        await brokerStream(env, await request.json() as { count: number; scopes?: string[] }),
      );
    }
    if (request.method === 'POST' && path === '/plane-stream') {
      const { count } = await request.json() as { count: number };
      return Response.json(await env.PLANE_SESSIONS.streamOrders(count));
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
    if (path === '/sockets') {
      return await env.ORDERS.fetch(new Request(new URL(SOCKETS_PATH, 'https://orders')));
    }
    if (path === '/catalog-events') {
      return Response.json(await env.PLANE_EVENTS.catalogEvents());
    }
    return new Response('not found', { status: 404 });
  },
};
