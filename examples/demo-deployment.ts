/**
 * The demo deployment behind `npm start`: a control plane and two services on 127.0.0.1 (ports
 * chosen by the OS), two callers with credentials made at start, and a short tour through them.
 *
 * - `orders` (no ingress): ability `orders.catalog` with `list`, `reserve` (needs
 *   `orders.write`) and the streaming `watch`, over HTTP-batch and WebSocket.
 * - `ledger` (ingress): ability `ledger.entries`, reachable only with tokens the plane brokers.
 * - Callers: `billing` authenticates to the plane with an HMAC secret, `shipping` with a P-256
 *   key (its tokens are bound to that key, and its sessions prove possession).
 * - An AI agent reaches `orders.catalog.list` and `watch` as MCP tools at the plane's `POST /mcp`,
 *   with `Authorization: Bearer <agent token>` (made at start); the plane calls orders for it
 *   with a delegated token.
 * - The REST facade: `GET /orders/items`, `POST /orders/reservations` and
 *   `GET /ledger/accounts/{account}/balance`, described at `/openapi.json` and browsable at
 *   `/reference` (Swagger UI, served by the plane from the installed package). The plane's
 *   invocation middleware accepts one demo bearer credential (made at start) and calls the
 *   services on behalf of the user `demo-user` (an API key).
 * - The plane's public RPC broker at `/rpc`: a CLI user with the same demo credential calls
 *   orders over one WebSocket (a unary call and a short stream) without ever holding a token.
 *
 * @module
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { MiddlewareHandler } from 'hono';
import { decodeJwt } from 'jose';
import { WebSocket as WsWebSocket } from 'ws';
import { z } from 'zod';
import {
  abilityMethod,
  abilitySession,
  brokerSession,
  controlPlaneHmacTokenRequester,
  controlPlaneJwkTokenRequester,
  createControlPlane,
  createService,
  defineAbility,
  disposeAbilitySession,
  generateSigningKeyEntry,
  hmacServiceClientAuth,
  httpBatchRpc,
  httpService,
  jwkServiceClientAuth,
  jwksFromUrl,
  svcErrorInfo,
  websocketRpc,
} from '../mod.ts';
import {
  nodeWebSocketFactory,
  type ServedServer,
  serveNode,
  swaggerUiAssets,
} from '../src/adapters/node.ts';

const PLANE_ID = 'demo-plane';

/** One step of the tour: what it showed, and whether it went as expected. */
export interface TourStep {
  title: string;
  ok: boolean;
  /** Lines describing the outcome (claims, results, the refusal). */
  details: string[];
}

/** A running demo deployment. */
export interface DemoDeployment {
  /** The servers, the OpenAPI document and the API reference page. */
  urls: { plane: string; orders: string; ledger: string; openapi: string; reference: string };
  /** The two callers' plane credentials, made at start (for the CLI and its tests). */
  callers: {
    billing: { serviceId: 'billing'; clientId: string; clientSecret: string };
    shipping: { serviceId: 'shipping'; clientId: string; keyId: string; privateJwk: JsonWebKey };
  };
  /** The REST facade's demo credential, and a ready-to-paste call with it. */
  rest: { bearer: string; curl: string };
  /** The MCP endpoint and the header an agent sends to it (the same demo credential). */
  mcp: { url: string; header: string };
  /** Runs the tour once; every step reports instead of throwing. */
  runTour(): Promise<TourStep[]>;
  /** Stops the three servers. */
  close(): Promise<void>;
}

const itemSchema = z.object({ sku: z.string(), name: z.string(), stock: z.number().int() });

const CATALOG = [
  { sku: 'tea-01', name: 'Green tea', stock: 12 },
  { sku: 'mug-02', name: 'Stoneware mug', stock: 4 },
  { sku: 'pot-03', name: 'Cast-iron pot', stock: 0 },
];

const catalogAbility = defineAbility({
  id: 'orders.catalog',
  title: 'Catalog',
  exposure: 'published',
  scopes: ['orders.read'],
  rpc: { transports: ['http-batch', 'websocket'] },
  methods: {
    list: abilityMethod({
      input: z.object({ inStockOnly: z.boolean().optional() }),
      output: z.object({ items: z.array(itemSchema), caller: z.string() }),
      idempotent: true,
      mcp: {
        name: 'orders_list',
        description: 'List the catalog, optionally only what is in stock',
      },
      rest: { method: 'get', path: '/orders/items' },
    }),
    reserve: abilityMethod({
      input: z.object({ sku: z.string(), quantity: z.number().int().positive() }),
      output: z.object({ reserved: z.boolean() }),
      scopes: ['orders.write'],
      rest: { method: 'post', path: '/orders/reservations', status: 201 },
    }),
    watch: abilityMethod({
      input: z.object({ count: z.number().int().min(1).max(100) }),
      output: z.object({ sku: z.string(), stock: z.number().int() }),
      stream: true,
      mcp: { name: 'orders_watch', description: 'Stream `count` stock updates' },
    }),
  },
  handler: ({ identity }) => ({
    list: ({ inStockOnly }: { inStockOnly?: boolean }) => ({
      items: CATALOG.filter((item) => !inStockOnly || item.stock > 0),
      caller: identity.serviceId,
    }),
    reserve: () => ({ reserved: true }),
    async *watch({ count }: { count: number }) {
      for (let i = 0; i < count; i++) {
        const item = CATALOG[i % CATALOG.length];
        yield { sku: item.sku, stock: item.stock + i };
      }
    },
  }),
});

const ledgerAbility = defineAbility({
  id: 'ledger.entries',
  title: 'Ledger entries',
  exposure: 'published',
  scopes: ['ledger.read'],
  methods: {
    balance: abilityMethod({
      input: z.object({ account: z.string() }),
      output: z.object({
        account: z.string(),
        cents: z.number().int(),
        brokeredBy: z.string().nullable(),
        onBehalfOf: z.string().nullable(),
      }),
      rest: { method: 'get', path: '/ledger/accounts/{account}/balance' },
    }),
  },
  handler: ({ identity }) => ({
    balance: ({ account }: { account: string }) => ({
      account,
      cents: 123_45,
      brokeredBy: identity.brokerServiceId ?? null,
      onBehalfOf: identity.subject?.id ?? null,
    }),
  }),
});

/** A P-256 key pair for the JWK caller, made at start and never stored. */
async function generateCallerKey(kid: string) {
  const pair = await crypto.subtle.generateKey(
    { name: 'ECDSA', namedCurve: 'P-256' },
    true,
    ['sign', 'verify'],
  ) as CryptoKeyPair;
  const jwk = await crypto.subtle.exportKey('jwk', pair.privateKey);
  const publicJwk = { kty: 'EC', crv: 'P-256', x: jwk.x, y: jwk.y, kid };
  return { kid, publicJwk, privateJwk: { ...publicJwk, d: jwk.d } as JsonWebKey };
}

function randomSecret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('');
}

/**
 * The plane's invocation middleware: one bearer credential names the demo user (an API key);
 * anything else gets a 401 with its challenge, before the plane contacts any service.
 */
function demoBearerMiddleware(bearer: string): MiddlewareHandler {
  return async (c, next) => {
    if (c.req.header('Authorization') !== `Bearer ${bearer}`) {
      return new Response(
        JSON.stringify({
          type: 'urn:svcplane:problem:capability_auth',
          title: 'Unauthorized',
          status: 401,
          detail: 'Send the demo bearer credential',
          code: 'capability_auth',
          retryable: false,
        }),
        {
          status: 401,
          headers: {
            'Content-Type': 'application/problem+json',
            'WWW-Authenticate': 'Bearer realm="svcplane-demo"',
          },
        },
      );
    }
    c.set('svcCaller', { id: 'demo-user', kind: 'user', principalKind: 'api_key' });
    await next();
  };
}

/** A service that verifies tokens against the plane's published JWKS. */
function demoService(planeUrl: string, id: string, ingress: boolean) {
  return createService({
    id,
    title: id === 'orders' ? 'Orders' : 'Ledger',
    version: '1.0.0',
    auth: { jwks: jwksFromUrl(`${planeUrl}/.well-known/svc/jwks.json`), issuer: planeUrl },
    ...(ingress ? { ingress: { brokerServiceId: PLANE_ID } } : {}),
    abilities: [id === 'orders' ? catalogAbility : ledgerAbility],
    logger: false,
  });
}

/** Runs one step; a throw is reported as a failed step with its message. */
async function step(title: string, run: () => Promise<string[]>): Promise<TourStep> {
  try {
    return { title, ok: true, details: await run() };
  } catch (error) {
    const info = svcErrorInfo(error);
    const message = error instanceof Error ? error.message : String(error);
    return {
      title,
      ok: false,
      details: [`${message} (code ${info.code}, status ${info.status}, reason ${info.reason})`],
    };
  }
}

function describeClaims(token: string, withConfirmation: boolean): string[] {
  const claims = decodeJwt(token) as Record<string, unknown>;
  const line = `sub=${claims.sub} aud=${claims.aud} scp=${JSON.stringify(claims.scp)} ` +
    `spa=${claims.spa}`;
  if (!withConfirmation) return [line];
  const cnf = claims.cnf as { jkt?: string } | undefined;
  if (cnf?.jkt === undefined) throw new Error("the JWK caller's token carries no cnf");
  return [line, `cnf.jkt=${cnf.jkt}`];
}

/** The expected refusal of a call, or a failure when the call went through. */
async function expectRefusal(call: Promise<unknown>, reason: string): Promise<string[]> {
  const outcome = await call.then(() => undefined, (error: unknown) => svcErrorInfo(error));
  if (outcome === undefined) throw new Error('the call was accepted');
  const line = `refused: code=${outcome.code} status=${outcome.status} reason=${outcome.reason}`;
  if (outcome.reason !== reason) throw new Error(`${line}, expected reason ${reason}`);
  return [line];
}

/**
 * Starts the deployment: the plane's server first (services need its JWKS URL), then both
 * services, then the plane itself, which discovers them over HTTP.
 */
export async function startDemo(): Promise<DemoDeployment> {
  let planeFetch: ((request: Request, env?: unknown) => Promise<Response>) | undefined;
  const servers: ServedServer[] = [];
  const close = async () => {
    await Promise.all(servers.map((server) => server.close()));
  };
  try {
    const planeServer = await serveNode({
      fetch: (request, env) =>
        planeFetch?.(request, env) ?? new Response('starting', { status: 503 }),
    });
    servers.push(planeServer);
    const planeUrl = planeServer.url;
    const ordersServer = await serveNode(demoService(planeUrl, 'orders', false));
    servers.push(ordersServer);
    const ledgerServer = await serveNode(demoService(planeUrl, 'ledger', true));
    servers.push(ledgerServer);

    const hmacSecret = randomSecret();
    const restBearer = `demo-${randomSecret().slice(0, 24)}`;
    const shippingKey = await generateCallerKey('shipping-key-1');
    const plane = createControlPlane({
      id: PLANE_ID,
      issuer: planeUrl,
      signingKeys: [await generateSigningKeyEntry({ kid: 'demo-signing-1' })],
      authenticateCaller: [
        hmacServiceClientAuth({
          clients: { 'billing-client': { serviceId: 'billing', secret: hmacSecret } },
          log: false,
        }),
        jwkServiceClientAuth({
          clients: { 'shipping-client': { serviceId: 'shipping', keys: [shippingKey.publicJwk] } },
          log: false,
        }),
      ],
      services: [
        httpService({
          id: 'orders',
          url: ordersServer.url,
          // The plane's WebSocket leg for streamed MCP tools and the broker (Node 20 has no
          // global WebSocket).
          createWebSocket: nodeWebSocketFactory(),
          grants: [
            { caller: 'billing', scopes: ['orders.read'] },
            { caller: 'shipping', scopes: ['orders.read', 'orders.write'] },
            // REST calls act as the plane on behalf of the demo user.
            { caller: PLANE_ID, scopes: ['orders.read', 'orders.write'] },
          ],
        }),
        httpService({
          id: 'ledger',
          url: ledgerServer.url,
          grants: [
            { caller: PLANE_ID, scopes: ['ledger.read'] },
            { caller: 'billing', scopes: ['ledger.read'] },
          ],
        }),
      ],
      // The public RPC broker at /rpc; its callers are named by the same middleware.
      rpc: {},
      invocationMiddleware: demoBearerMiddleware(restBearer),
      openapi: {
        title: 'svcplane demo',
        security: [{ demoBearer: [] }],
        securitySchemes: { demoBearer: { type: 'http', scheme: 'bearer' } },
        // The API reference page at /reference, from the installed swagger-ui-dist.
        reference: { assets: swaggerUiAssets() },
      },
      publicOrigin: planeUrl,
      log: false,
    });
    await plane.ready();
    planeFetch = (request, env) => plane.fetch(request, env);

    const billing = controlPlaneHmacTokenRequester({
      clientId: 'billing-client',
      controlPlaneUrl: planeUrl,
      clientSecret: hmacSecret,
    });
    const shipping = controlPlaneJwkTokenRequester({
      clientId: 'shipping-client',
      controlPlaneUrl: planeUrl,
      keyId: shippingKey.kid,
      privateJwk: shippingKey.privateJwk,
      issuer: planeUrl,
    });
    const catalogUrl = `${ordersServer.url}/rpc/orders.catalog`;
    const mcp = { url: `${planeUrl}/mcp`, header: `Authorization: Bearer ${restBearer}` };
    const balanceUrl = `${planeUrl}/ledger/accounts/acme/balance`;
    const curl = `curl -s -H 'Authorization: Bearer ${restBearer}' ${balanceUrl}`;

    const runTour = async (): Promise<TourStep[]> => [
      await step('HMAC caller (billing) requests a token for orders', async () => {
        const token = await billing({
          callerServiceId: 'billing',
          targetServiceId: 'orders',
          abilityId: 'orders.catalog',
          scopes: ['orders.read'],
        });
        return describeClaims(token, false);
      }),
      await step('JWK caller (shipping) requests a key-bound token for orders', async () => {
        const token = await shipping({
          callerServiceId: 'shipping',
          targetServiceId: 'orders',
          abilityId: 'orders.catalog',
          scopes: ['orders.read', 'orders.write'],
        });
        return describeClaims(token, true);
      }),
      await step('billing calls orders.catalog.list over HTTP-batch', async () => {
        using session = abilitySession<{
          list(input: { inStockOnly?: boolean }): { items: unknown[]; caller: string };
        }>({
          abilityId: 'orders.catalog',
          callerServiceId: 'billing',
          targetServiceId: 'orders',
          scopes: ['orders.read'],
          requestToken: billing,
          transport: httpBatchRpc(catalogUrl),
        });
        const result = await session.list({ inStockOnly: true });
        return [`${result.items.length} items in stock, served to ${result.caller}`];
      }),
      await step('shipping reserves and watches over WebSocket (proof of possession)', async () => {
        const session = abilitySession<{
          reserve(input: { sku: string; quantity: number }): { reserved: boolean };
          watch(input: { count: number }): ReadableStream<{ sku: string; stock: number }>;
        }>({
          abilityId: 'orders.catalog',
          callerServiceId: 'shipping',
          targetServiceId: 'orders',
          scopes: ['orders.read', 'orders.write'],
          requestToken: shipping,
          transport: websocketRpc(catalogUrl, { createWebSocket: nodeWebSocketFactory() }),
        });
        try {
          const { reserved } = await session.reserve({ sku: 'tea-01', quantity: 2 });
          const skus: string[] = [];
          const reader = (await session.watch({ count: 3 })).getReader();
          for (let next = await reader.read(); !next.done; next = await reader.read()) {
            skus.push(next.value.sku);
          }
          if (!reserved || skus.length !== 3) throw new Error('unexpected WebSocket results');
          return [`reserved=${reserved}, streamed ${skus.length} updates: ${skus.join(', ')}`];
        } finally {
          disposeAbilitySession(session);
        }
      }),
      await step('the plane calls ledger (ingress) through plane.abilitySession', async () => {
        using session = plane.abilitySession<{
          balance(input: { account: string }): { cents: number; brokeredBy: string | null };
        }>({ abilityId: 'ledger.entries', targetServiceId: 'ledger', scopes: ['ledger.read'] });
        const result = await session.balance({ account: 'acme' });
        if (result.brokeredBy !== PLANE_ID) throw new Error('the token was not brokered');
        return [`balance=${result.cents} cents, token brokered by ${result.brokeredBy}`];
      }),
      await step('REST: GET /ledger/accounts/acme/balance through the plane', async () => {
        const response = await fetch(balanceUrl, {
          headers: { Authorization: `Bearer ${restBearer}` },
        });
        const body = await response.json() as { brokeredBy?: string; onBehalfOf?: string };
        if (response.status !== 200 || body.brokeredBy !== PLANE_ID) {
          throw new Error(`REST answered ${response.status}: ${JSON.stringify(body)}`);
        }
        return [
          `200 ${JSON.stringify(body)}`,
          'try it:  ' + curl,
          `OpenAPI: ${planeUrl}/openapi.json`,
        ];
      }),
      await step('REST: a request without the credential, and one with invalid input', async () => {
        const anonymous = await fetch(balanceUrl);
        await anonymous.body?.cancel();
        const challenge = anonymous.headers.get('WWW-Authenticate');
        if (anonymous.status !== 401 || challenge === null) throw new Error('not a 401');
        const invalid = await fetch(`${planeUrl}/orders/reservations`, {
          method: 'POST',
          headers: { 'Authorization': `Bearer ${restBearer}`, 'Content-Type': 'application/json' },
          body: JSON.stringify({ sku: 'tea-01', quantity: 0 }),
        });
        const problem = await invalid.json() as { code?: string; issues?: unknown[] };
        if (invalid.status !== 422) throw new Error(`expected 422, got ${invalid.status}`);
        return [
          `no credential: 401, WWW-Authenticate: ${challenge}`,
          `quantity 0: ${invalid.status} ${invalid.headers.get('Content-Type')} ` +
          JSON.stringify(problem),
        ];
      }),
      await step('a CLI user calls orders through the broker (no token on its side)', async () => {
        const session = brokerSession<{
          list(input: { inStockOnly?: boolean }): { items: unknown[]; caller: string };
          watch(input: { count: number }): ReadableStream<{ sku: string; stock: number }>;
        }>({
          url: `${planeUrl}/rpc`,
          targetServiceId: 'orders',
          abilityId: 'orders.catalog',
          scopes: ['orders.read'],
          transport: 'websocket',
          createWebSocket: (url) =>
            new WsWebSocket(url, {
              headers: { Authorization: `Bearer ${restBearer}` },
            }) as unknown as WebSocket,
        });
        try {
          const result = await session.list({ inStockOnly: true });
          const skus: string[] = [];
          for await (const update of await session.watch({ count: 2 })) skus.push(update.sku);
          if (skus.length !== 2) throw new Error('unexpected brokered stream');
          return [
            `broker ${planeUrl}/rpc: ${result.items.length} items for ${result.caller}`,
            `streamed ${skus.length} updates through the broker: ${skus.join(', ')}`,
          ];
        } finally {
          disposeAbilitySession(session);
        }
      }),
      await step('billing calls ledger directly: refused, ingress needs a brokered token', () => {
        const session = abilitySession({
          abilityId: 'ledger.entries',
          callerServiceId: 'billing',
          targetServiceId: 'ledger',
          scopes: ['ledger.read'],
          requestToken: billing,
          transport: httpBatchRpc(`${ledgerServer.url}/rpc/ledger.entries`),
        });
        return expectRefusal(session.balance({ account: 'acme' }), 'ingress_required')
          .finally(() => disposeAbilitySession(session));
      }),
      await step(
        'an MCP agent lists and calls tools at POST /mcp (the MCP SDK client)',
        async () => {
          const client = new Client({ name: 'demo-agent', version: '1.0.0' });
          await client.connect(
            new StreamableHTTPClientTransport(new URL(mcp.url), {
              requestInit: { headers: { Authorization: `Bearer ${restBearer}` } },
            }),
          );
          try {
            const { tools } = await client.listTools();
            const listed = await client.callTool({
              name: 'orders_list',
              arguments: { inStockOnly: true },
            });
            const { items, caller } = listed.structuredContent as {
              items: unknown[];
              caller: string;
            };
            let updates = 0;
            const watched = await client.callTool(
              { name: 'orders_watch', arguments: { count: 3 } },
              undefined,
              { onprogress: () => updates++ },
            );
            const streamed = (watched.structuredContent as { items: unknown[] }).items.length;
            if (listed.isError || watched.isError || streamed !== 3) {
              throw new Error('unexpected MCP results');
            }
            return [
              `tools: ${tools.map((tool) => tool.name).join(', ')}`,
              `orders_list: ${items.length} items in stock, served to ${caller}`,
              `orders_watch: ${streamed} items, ${updates} progress notifications`,
            ];
          } finally {
            await client.close();
          }
        },
      ),
      await step('billing calls reserve without orders.write: refused', () => {
        const session = abilitySession({
          abilityId: 'orders.catalog',
          callerServiceId: 'billing',
          targetServiceId: 'orders',
          scopes: ['orders.read'],
          requestToken: billing,
          transport: httpBatchRpc(catalogUrl),
        });
        return expectRefusal(session.reserve({ sku: 'tea-01', quantity: 1 }), 'missing_scope')
          .finally(() => disposeAbilitySession(session));
      }),
    ];

    return {
      urls: {
        plane: planeUrl,
        orders: ordersServer.url,
        ledger: ledgerServer.url,
        openapi: `${planeUrl}/openapi.json`,
        reference: `${planeUrl}/reference`,
      },
      callers: {
        billing: { serviceId: 'billing', clientId: 'billing-client', clientSecret: hmacSecret },
        shipping: {
          serviceId: 'shipping',
          clientId: 'shipping-client',
          keyId: shippingKey.kid,
          privateJwk: shippingKey.privateJwk,
        },
      },
      rest: { bearer: restBearer, curl },
      mcp,
      runTour,
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}
