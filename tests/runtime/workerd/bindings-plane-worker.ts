// Worker bundled by service-bindings.test.ts: the control plane. Its default `fetch` serves the
// plane's routes (the orders Worker reads the JWKS through its binding); `TokenIssuer` is the
// entrypoint the billing Worker's PLANE_TOKENS binding points at. The plane resolves `orders`
// (and `ledger`, bound to the same orders Worker) through `binding.fetch`, and reaches orders'
// WebSocket route through the same binding (`PlaneSessions` streams from it).
import { WorkerEntrypoint } from 'cloudflare:workers';
import {
  serviceBindingWebSocketFactory,
  workersWebSocketUpgrader,
} from '../../../src/adapters/workers.ts';
import type { NativeAbilityBinding } from '../../../src/caller/transports/cloudflare-native.ts';
import { withWebSocketUpgrader } from '../../../src/service/websocket-upgrade.ts';
import { CapabilityAuthError } from '../../../src/core/errors.ts';
import type { SvcLogEvent } from '../../../src/core/logging.ts';
import { type ControlPlane, createControlPlane } from '../../../src/plane/control-plane.ts';
import { cloudflareServiceBinding } from '../../../src/plane/endpoints.ts';
import type { SigningKeyEntry } from '../../../src/plane/signing-keys.ts';
import {
  type CapabilityTokenEntrypoint,
  capabilityTokenEntrypoint,
  type CapabilityTokenEntrypointRequest,
} from '../../../src/plane/token-entrypoint.ts';
import type { ServiceBindingFetcher } from '../../../src/caller/transports/http-batch.ts';
import {
  BILLING_SERVICE_ID,
  BINDINGS_ISSUER,
  BINDINGS_PLANE_ID,
  type CatalogEvent,
  lookupAndStream,
  type OrdersApi,
  type StreamOutcome,
} from './bindings-deployment.ts';

interface PlaneEnv {
  /** A generated signing key, passed in as a JSON binding. */
  SIGNING_KEY: SigningKeyEntry;
  /** The orders Worker. */
  ORDERS: ServiceBindingFetcher;
  /** Also the orders Worker, configured here as the service `ledger`: its discovery says otherwise. */
  LEDGER: ServiceBindingFetcher;
  /** The orders Worker's OrdersAbilities entrypoint (native binding RPC), for the broker plane. */
  ORDERS_RPC: NativeAbilityBinding;
}

const catalogEvents: CatalogEvent[] = [];
let plane: ControlPlane | undefined;
let entrypoint: CapabilityTokenEntrypoint | undefined;

function recordCatalogEvent(event: SvcLogEvent): void {
  if (!event.event.startsWith('svc.catalog.')) return;
  const { target, reason, detail } = event;
  catalogEvents.push({ event: event.event, target, reason, detail });
}

/** The catalog reads the bindings from the context it is handed: the entrypoint's `env`. */
function servicesOf(context: unknown) {
  const env = context as PlaneEnv;
  return [
    cloudflareServiceBinding({
      id: 'orders',
      binding: env.ORDERS,
      grants: [{ caller: BILLING_SERVICE_ID, scopes: ['orders.read'] }],
      createWebSocket: serviceBindingWebSocketFactory(env.ORDERS),
    }),
    cloudflareServiceBinding({
      id: 'ledger',
      binding: env.LEDGER,
      grants: [{ caller: BILLING_SERVICE_ID, scopes: ['ledger.read'] }],
    }),
  ];
}

function planeOf(env: PlaneEnv): ControlPlane {
  plane ??= createControlPlane({
    id: BINDINGS_PLANE_ID,
    issuer: BINDINGS_ISSUER,
    signingKeys: [env.SIGNING_KEY],
    services: servicesOf,
    log: recordCatalogEvent,
  });
  return plane;
}

function entrypointOf(env: PlaneEnv): CapabilityTokenEntrypoint {
  entrypoint ??= capabilityTokenEntrypoint(planeOf(env), {
    callerServiceId: BILLING_SERVICE_ID,
    context: env,
  });
  return entrypoint;
}

/** The token entrypoint of the billing Worker's binding. */
export class TokenIssuer extends WorkerEntrypoint<PlaneEnv> {
  requestCapabilityToken(request: CapabilityTokenEntrypointRequest) {
    return entrypointOf(this.env).requestCapabilityToken(request);
  }
}

/**
 * An entrypoint that throws its refusal instead of answering it, as a hand-written one might:
 * what arrives on the other side of the binding depends on the runtime's error serialisation.
 */
export class ThrowingTokenIssuer extends WorkerEntrypoint<PlaneEnv> {
  requestCapabilityToken(_request: CapabilityTokenEntrypointRequest): Promise<never> {
    return Promise.reject(
      new CapabilityAuthError('billing is not granted orders.write on orders', {
        status: 403,
        reason: 'grant_denied',
      }),
    );
  }
}

/** Test-only: the catalog events the plane logged, for the host to read through billing. */
export class PlaneEvents extends WorkerEntrypoint<PlaneEnv> {
  catalogEvents(): CatalogEvent[] {
    return catalogEvents;
  }
}

/** Budget of each call of a plane session, in milliseconds. */
const SESSION_BUDGET_MS = 15_000;

/**
 * Test-only: the plane's own session with orders, acting for billing. `orders.catalog` has a
 * streaming method, so the session travels over WebSocket, dialled through the ORDERS binding.
 */
export class PlaneSessions extends WorkerEntrypoint<PlaneEnv> {
  streamOrders(count: number): Promise<StreamOutcome> {
    return lookupAndStream(
      () =>
        planeOf(this.env).abilitySession<OrdersApi>({
          abilityId: 'orders.catalog',
          targetServiceId: 'orders',
          scopes: ['orders.read'],
          caller: { id: BILLING_SERVICE_ID, kind: 'service' },
          timeoutMs: SESSION_BUDGET_MS,
        }, this.env),
      count,
    );
  }
}

export default {
  fetch(request: Request, env: PlaneEnv, ctx: unknown): Promise<Response> {
    return planeOf(env).fetch(request, env, ctx);
  },
};

let brokerPlane: ControlPlane | undefined;

/**
 * The same plane (id, issuer, key) with the broker mounted at `/rpc`, reaching orders over its
 * native binding (`abilityRpc`). Every request reaches it only through a private binding from
 * billing, so its invocation middleware names billing, as a service, for every request.
 */
function brokerPlaneOf(env: PlaneEnv): ControlPlane {
  brokerPlane ??= createControlPlane({
    id: BINDINGS_PLANE_ID,
    issuer: BINDINGS_ISSUER,
    signingKeys: [env.SIGNING_KEY],
    services: (context) => {
      const bindings = (context as { env: PlaneEnv }).env;
      return [
        cloudflareServiceBinding({
          id: 'orders',
          binding: bindings.ORDERS,
          abilityRpc: bindings.ORDERS_RPC,
          grants: [{ caller: BILLING_SERVICE_ID, scopes: ['orders.read'] }],
        }),
      ];
    },
    rpc: {},
    invocationMiddleware: async (c, next) => {
      c.set('svcCaller' as never, { id: BILLING_SERVICE_ID, kind: 'service' } as never);
      await next();
    },
    log: false,
  });
  return brokerPlane;
}

/** The broker plane's routes (`/rpc`), for billing's PLANE_BROKER binding. */
export class PlaneBroker extends WorkerEntrypoint<PlaneEnv> {
  override fetch(request: Request): Promise<Response> {
    return brokerPlaneOf(this.env).fetch(
      request,
      withWebSocketUpgrader(this.env, workersWebSocketUpgrader),
    );
  }
}
