// Worker bundled by service-bindings.test.ts: the orders service behind the Workers adapter. It
// verifies tokens with the keys the plane Worker publishes, fetched through its PLANE binding,
// and counts the discovery requests it answered (read by the host through billing).
import { z } from 'zod';
import { workersEntrypoint } from '../../../src/adapters/workers.ts';
import { defineAbility } from '../../../src/service/ability.ts';
import { jwksFromServiceBinding } from '../../../src/service/jwks-sources.ts';
import { abilityMethod } from '../../../src/service/method.ts';
import { SERVICE_DISCOVERY_PATH } from '../../../src/service/service.ts';
import { createService } from '../../../src/service/service.ts';
import type { ServiceBindingFetcher } from '../../../src/service/transports/http-batch.ts';
import { BINDINGS_ISSUER, DISCOVERY_HITS_PATH } from './bindings-deployment.ts';

interface OrdersEnv {
  /** The plane Worker's default entrypoint: its JWKS route. */
  PLANE: ServiceBindingFetcher;
}

const STOCK: Record<string, number> = { 'tea-01': 12, 'mug-02': 4 };

const catalog = defineAbility({
  id: 'orders.catalog',
  scopes: ['orders.read'],
  methods: {
    lookup: abilityMethod({
      input: z.object({ sku: z.string().min(1) }),
      output: z.object({
        sku: z.string(),
        stock: z.number().int(),
        caller: z.string(),
        callerAccess: z.string(),
      }),
    }),
    reserve: abilityMethod({
      input: z.object({ sku: z.string().min(1) }),
      output: z.object({ reserved: z.boolean() }),
      scopes: ['orders.write'],
    }),
  },
  handler: ({ identity }) => ({
    lookup: ({ sku }) => ({
      sku,
      stock: STOCK[sku] ?? 0,
      caller: identity.serviceId,
      callerAccess: identity.callerAccess,
    }),
    reserve: () => ({ reserved: true }),
  }),
});

let service: ReturnType<typeof createService> | undefined;
let discoveryHits = 0;

function serviceOf(env: OrdersEnv) {
  service ??= createService({
    id: 'orders',
    title: 'Orders',
    version: '1.0.0',
    auth: { jwks: jwksFromServiceBinding(env.PLANE), issuer: BINDINGS_ISSUER },
    abilities: [catalog],
    logger: false,
  });
  return service;
}

export default workersEntrypoint({
  fetch(request: Request, env?: unknown, ctx?: unknown): Promise<Response> {
    const path = new URL(request.url).pathname;
    if (path === DISCOVERY_HITS_PATH) return Promise.resolve(Response.json({ discoveryHits }));
    if (path === SERVICE_DISCOVERY_PATH) discoveryHits++;
    return serviceOf(env as OrdersEnv).fetch(request, env, ctx);
  },
});
