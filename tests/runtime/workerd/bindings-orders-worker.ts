// Worker bundled by service-bindings.test.ts: the orders service behind the Workers adapter, and
// its OrdersAbilities entrypoint (native binding RPC, `connectAbility`). It
// verifies tokens with the keys the plane Worker publishes, fetched through its PLANE binding,
// serves `orders.catalog` over HTTP-batch and WebSocket (its `movements` method streams), counts
// the discovery requests it answered and records the WebSocket sessions it accepted and how each
// ended (both read by the host through billing).
import { WorkerEntrypoint } from 'cloudflare:workers';
import { z } from 'zod';
import { workersEntrypoint, workersWebSocketUpgrader } from '../../../src/adapters/workers.ts';
import { defineAbility } from '../../../src/service/ability.ts';
import { jwksFromServiceBinding } from '../../../src/service/jwks-sources.ts';
import { abilityMethod } from '../../../src/service/method.ts';
import { SERVICE_DISCOVERY_PATH } from '../../../src/service/service.ts';
import { createService } from '../../../src/service/service.ts';
import type { ConnectAbilityRequest } from '../../../src/service/native-ability-rpc.ts';
import type { ServiceBindingFetcher } from '../../../src/caller/transports/http-batch.ts';
import {
  type WebSocketUpgrader,
  withWebSocketUpgrader,
} from '../../../src/service/websocket-upgrade.ts';
import {
  BINDINGS_ISSUER,
  DISCOVERY_HITS_PATH,
  type SocketRecord,
  SOCKETS_PATH,
} from './bindings-deployment.ts';

interface OrdersEnv {
  /** The plane Worker's default entrypoint: its JWKS route. */
  PLANE: ServiceBindingFetcher;
}

const STOCK: Record<string, number> = { 'tea-01': 12, 'mug-02': 4 };

/** The most movements one call may ask for. */
const MAX_MOVEMENTS = 5_000;

/** Movements 0..count-1, each with an undeclared `note` the output schema strips. */
async function* movements({ sku, count }: { sku: string; count: number }) {
  for (let seq = 0; seq < count; seq++) yield { seq, sku, note: 'internal' };
}

const catalog = defineAbility({
  id: 'orders.catalog',
  // Published: the plane's broker reaches it (private abilities are for in-process sessions).
  exposure: 'published',
  scopes: ['orders.read'],
  rpc: { transports: ['http-batch', 'websocket', 'cloudflare-binding-rpc'] },
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
    movements: abilityMethod({
      input: z.object({
        sku: z.string().min(1),
        count: z.number().int().min(0).max(MAX_MOVEMENTS),
      }),
      output: z.object({ seq: z.number().int().nonnegative(), sku: z.string() }),
      stream: true,
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
    movements,
  }),
});

let service: ReturnType<typeof createService> | undefined;
let discoveryHits = 0;
const sockets: SocketRecord = { opened: 0, closed: [] };

/** The Workers upgrader, recording each session socket it accepted and the close it saw. */
const recordingUpgrader: WebSocketUpgrader = {
  upgrade(request, runtime, accept) {
    return workersWebSocketUpgrader.upgrade(request, runtime, (socket) => {
      sockets.opened++;
      socket.addEventListener('close', (event) => {
        sockets.closed.push({ code: event.code, reason: event.reason });
      });
      accept(socket);
    });
  },
};

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
    if (path === SOCKETS_PATH) return Promise.resolve(Response.json(sockets));
    if (path === SERVICE_DISCOVERY_PATH) discoveryHits++;
    return serviceOf(env as OrdersEnv).fetch(
      request,
      withWebSocketUpgrader(env, recordingUpgrader),
      ctx,
    );
  },
});

/** Native binding RPC: the entrypoint a caller's binding points at to open ability sessions. */
export class OrdersAbilities extends WorkerEntrypoint<OrdersEnv> {
  connectAbility(request: ConnectAbilityRequest) {
    return serviceOf(this.env).connectAbility(request, this.env);
  }
}
