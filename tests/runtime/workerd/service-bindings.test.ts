// The Workers binding story on real workerd bindings: a plane Worker, the orders service Worker
// and the billing caller Worker in one workerd (bundled with esbuild, started by Miniflare on
// 127.0.0.1), wired with service bindings. Billing gets tokens from the plane's TokenIssuer
// entrypoint over JS RPC and calls orders over its binding's fetch; the plane resolves orders'
// discovery and orders reads the plane's JWKS, each through a binding. No Worker enables
// nodejs_compat: plane, service and caller run on the Workers platform's own APIs alone.
//
// Workers RPC keeps a thrown error's own properties (code, status, reason...) only when both
// Workers enable enhanced_error_serialization (compatibility date 2026-04-21 or later); the
// tests run with it and with legacy_error_serialization, which every older Worker has.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { importJWK, jwtVerify } from 'jose';
import { generateSigningKeyEntry } from '../../../src/plane/signing-keys.ts';
import {
  BILLING_SERVICE_ID,
  BINDINGS_ISSUER,
  type CallOutcome,
  type CallRequest,
  type CatalogEvent,
  type IssueOutcome,
  type SeenError,
  type SocketRecord,
  STREAMED_MOVEMENTS,
  type StreamOutcome,
  type StreamRequest,
} from './bindings-deployment.ts';
import { withWorkers, type WorkersOptions } from './miniflare-workers.ts';

const BOUND = { timeout: 120_000 };
const REQUEST_TIMEOUT_MS = 30_000;
const LEGACY_ERRORS: WorkersOptions = { compatibilityFlags: ['legacy_error_serialization'] };

/** The plane's signing key, generated per test file and handed to the plane as a JSON binding. */
const signingKey = await generateSigningKeyEntry({ kid: 'bindings-k1' });

/** Starts billing (answering on the URL), the plane and orders, wired as in a deployment. */
function withDeployment(run: (url: URL) => Promise<void>, options: WorkersOptions = {}) {
  return withWorkers(
    [
      {
        name: 'billing',
        entry: 'bindings-caller-worker.ts',
        serviceBindings: {
          PLANE_TOKENS: { name: 'plane', entrypoint: 'TokenIssuer' },
          PLANE_THROWING: { name: 'plane', entrypoint: 'ThrowingTokenIssuer' },
          PLANE_EVENTS: { name: 'plane', entrypoint: 'PlaneEvents' },
          PLANE_SESSIONS: { name: 'plane', entrypoint: 'PlaneSessions' },
          ORDERS: 'orders',
          ORDERS_RPC: { name: 'orders', entrypoint: 'OrdersAbilities' },
          PLANE_BROKER: { name: 'plane', entrypoint: 'PlaneBroker' },
        },
      },
      {
        name: 'plane',
        entry: 'bindings-plane-worker.ts',
        bindings: { SIGNING_KEY: signingKey },
        serviceBindings: {
          ORDERS: 'orders',
          LEDGER: 'orders',
          ORDERS_RPC: { name: 'orders', entrypoint: 'OrdersAbilities' },
        },
      },
      {
        name: 'orders',
        entry: 'bindings-orders-worker.ts',
        serviceBindings: { PLANE: 'plane' },
      },
    ],
    run,
    options,
  );
}

async function postJson<T>(url: URL, path: string, body: unknown): Promise<T> {
  const response = await fetch(new URL(path, url), {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  assert.equal(response.status, 200, `${path}: ${response.status}`);
  return await response.json() as T;
}

async function getJson<T>(url: URL, path: string): Promise<T> {
  const response = await fetch(new URL(path, url), {
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  assert.equal(response.status, 200, `${path}: ${response.status}`);
  return await response.json() as T;
}

const callThrough = (url: URL, request: CallRequest) =>
  postJson<CallOutcome>(url, '/call', request);

const streamThrough = (url: URL, request: StreamRequest) =>
  postJson<StreamOutcome>(url, '/stream', request);

/** How long a socket's close may take to reach orders once the caller disposed its session. */
const CLOSE_ARRIVAL_MS = 5_000;

/** Orders' socket record once it saw `closes` sockets end; fails past {@link CLOSE_ARRIVAL_MS}. */
async function socketsOnceClosed(url: URL, closes: number): Promise<SocketRecord> {
  const deadline = Date.now() + CLOSE_ARRIVAL_MS;
  for (;;) {
    const record = await getJson<SocketRecord>(url, '/sockets');
    if (record.closed.length >= closes) return record;
    if (Date.now() > deadline) assert.fail(`orders saw no close: ${JSON.stringify(record)}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** A streaming session went through: orders' lookup for billing and every movement read. */
function assertStreamed(outcome: StreamOutcome): void {
  assert.equal(outcome.ok, true, JSON.stringify(outcome));
  assert.deepEqual(outcome, {
    ok: true,
    lookup: { sku: 'tea-01', stock: 12, caller: BILLING_SERVICE_ID, callerAccess: 'service' },
    movements: STREAMED_MOVEMENTS,
  });
}

/** The session's socket was accepted once, and orders saw the disposal close it normally. */
async function assertClosedByDisposal(url: URL): Promise<void> {
  assert.deepEqual(await socketsOnceClosed(url, 1), {
    opened: 1,
    closed: [{ code: 1000, reason: 'session disposed' }],
  });
}

const LOOKUP: CallRequest = {
  targetServiceId: 'orders',
  abilityId: 'orders.catalog',
  scopes: ['orders.read'],
  method: 'lookup',
  input: { sku: 'tea-01' },
};

/** The error a call failed with; fails when the call went through. */
function failedWith(outcome: CallOutcome | StreamOutcome): SeenError {
  assert.equal(outcome.ok, false, `expected a refusal, got ${JSON.stringify(outcome)}`);
  return (outcome as { error: SeenError }).error;
}

/** The error's taxonomy fields, for comparing whole. */
function taxonomyOf(error: SeenError) {
  const { code, status, retryable, reason } = error;
  return { code, status, retryable, reason };
}

/**
 * Input the service's schema refuses reached the caller Worker as an ability_validation refusal
 * whose issues it read typed: one, at `field`.
 */
function assertInvalidInputRefused(
  outcome: CallOutcome | StreamOutcome,
  field: string,
  label: string,
): void {
  const error = failedWith(outcome);
  assert.deepEqual(taxonomyOf(error), {
    code: 'ability_validation',
    status: 422,
    retryable: false,
    reason: 'invalid_input',
  }, label);
  const issues = error.issues as { message: unknown; path?: unknown }[];
  assert.equal(issues.length, 1, `${label}: ${JSON.stringify(issues)}`);
  assert.equal(typeof issues[0].message, 'string', label);
  assert.deepEqual(issues[0].path, [field], label);
}

/** Verifies a token against the plane's public key, as any service would. */
async function verifiedClaims(token: string) {
  const { d: _private, ...publicJwk } = JSON.parse(signingKey.secret) as Record<string, string>;
  const key = await importJWK({ ...publicJwk, alg: 'ES256' }, 'ES256');
  const { payload, protectedHeader } = await jwtVerify(token, key, {
    issuer: BINDINGS_ISSUER,
    audience: 'orders',
  });
  assert.equal(protectedHeader.kid, signingKey.kid);
  return payload;
}

/** The error the ThrowingTokenIssuer's rejection became on billing's side, as JSON keeps it. */
async function thrownByThrowingIssuer(url: URL): Promise<unknown> {
  const outcome = await postJson<IssueOutcome>(url, '/issue?issuer=throwing', {
    callerServiceId: BILLING_SERVICE_ID,
    targetServiceId: 'orders',
    scopes: ['orders.write'],
  });
  assert.ok('thrown' in outcome, JSON.stringify(outcome));
  return outcome.thrown;
}

/** Refusals by the plane reach billing typed: grant denied, and an unknown target. */
async function assertPlaneRefusalsKeepTheirType(url: URL): Promise<void> {
  const ungranted = failedWith(
    await callThrough(url, { ...LOOKUP, scopes: ['orders.read', 'orders.write'] }),
  );
  assert.deepEqual(taxonomyOf(ungranted), {
    code: 'capability_auth',
    status: 403,
    retryable: false,
    reason: 'grant_denied',
  });
  assert.equal(ungranted.name, 'CapabilityTokenRequestError');
  assert.match(String(ungranted.message), /orders\.write/);

  const unknown = failedWith(
    await callThrough(url, {
      ...LOOKUP,
      targetServiceId: 'inventory',
      abilityId: 'inventory.stock',
      scopes: ['inventory.read'],
    }),
  );
  assert.deepEqual(taxonomyOf(unknown), {
    code: 'capability_auth',
    status: 403,
    retryable: false,
    reason: 'unknown_target',
  });
  assert.match(String(unknown.message), /inventory/);
}

test(
  'workerd bindings: billing calls orders with a token from the plane entrypoint, verified at orders',
  BOUND,
  async () => {
    await withDeployment(async (url) => {
      assert.equal(url.hostname, '127.0.0.1');
      assert.deepEqual(await getJson(url, '/discovery-hits'), { discoveryHits: 0 });

      const outcome = await callThrough(url, LOOKUP);
      assert.equal(outcome.ok, true, JSON.stringify(outcome));
      const { result, tokens } = outcome as Extract<CallOutcome, { ok: true }>;
      // Orders verified the token with keys read from the plane over its binding: the handler
      // saw billing as a service-class caller.
      assert.deepEqual(result, {
        sku: 'tea-01',
        stock: 12,
        caller: BILLING_SERVICE_ID,
        callerAccess: 'service',
      });
      assert.equal(tokens.length, 1);
      const claims = await verifiedClaims(tokens[0]);
      assert.equal(claims.sub, BILLING_SERVICE_ID);
      assert.deepEqual(claims.scp, ['orders.read']);
      assert.equal(claims.spa, 'service');

      // The plane resolved orders through ORDERS.fetch before it minted.
      assert.deepEqual(await getJson(url, '/discovery-hits'), { discoveryHits: 1 });

      // A second call reuses the cached token: same token, no second issuance or discovery.
      const again = await callThrough(url, { ...LOOKUP, input: { sku: 'mug-02' } });
      assert.equal(again.ok, true, JSON.stringify(again));
      assert.deepEqual((again as { tokens: string[] }).tokens, tokens);
      // Orders' own scope check runs on the verified token: reserve needs orders.write.
      const reserve = failedWith(await callThrough(url, { ...LOOKUP, method: 'reserve' }));
      assert.equal(reserve.code, 'capability_auth');
      assert.equal(reserve.status, 403);
      // Input orders' schema refuses, over the binding's HTTP-batch.
      assertInvalidInputRefused(
        await callThrough(url, { ...LOOKUP, input: { sku: '' } }),
        'sku',
        'http-batch',
      );
    });
  },
);

test(
  'workerd bindings: plane refusals cross the binding typed (403, its reason, not retryable)',
  BOUND,
  async () => {
    await withDeployment(async (url) => {
      await assertPlaneRefusalsKeepTheirType(url);
      // With enhanced_error_serialization a thrown refusal keeps its fields across too.
      const thrown = failedWith(await callThrough(url, { ...LOOKUP, issuer: 'throwing' }));
      assert.deepEqual(taxonomyOf(thrown), {
        code: 'capability_auth',
        status: 403,
        retryable: false,
        reason: 'grant_denied',
      });
      assert.deepEqual(await thrownByThrowingIssuer(url), {
        name: 'CapabilityAuthError',
        code: 'capability_auth',
        status: 403,
        retryable: false,
        reason: 'grant_denied',
        message: 'billing is not granted orders.write on orders',
      });
    });
  },
);

test(
  'workerd bindings: with legacy error serialisation refusals still arrive typed; a thrown one does not',
  BOUND,
  async () => {
    await withDeployment(async (url) => {
      // The entrypoint answers refusals as data, which every binding carries intact.
      await assertPlaneRefusalsKeepTheirType(url);
      // A refusal thrown across the binding loses its fields on the way: the caller can only
      // read it as the plane being unreachable.
      const thrown = failedWith(await callThrough(url, { ...LOOKUP, issuer: 'throwing' }));
      assert.deepEqual(taxonomyOf(thrown), {
        code: 'internal',
        status: 503,
        retryable: true,
        reason: 'control_plane_unreachable',
      });
      // What the runtime delivered instead: a bare Error, the class name folded into the message.
      assert.deepEqual(await thrownByThrowingIssuer(url), {
        name: 'Error',
        message: 'CapabilityAuthError: billing is not granted orders.write on orders',
      });
    }, LEGACY_ERRORS);
  },
);

test(
  'workerd bindings: a subject or another caller sent over the binding is refused with 403',
  BOUND,
  async () => {
    await withDeployment(async (url) => {
      const base = {
        callerServiceId: BILLING_SERVICE_ID,
        targetServiceId: 'orders',
        scopes: ['orders.read'],
      };
      const withSubject = await postJson<IssueOutcome>(url, '/issue', {
        ...base,
        subject: { id: 'user-1', kind: 'user' },
      });
      assert.deepEqual(withSubject, {
        answer: {
          error: {
            code: 'capability_auth',
            status: 403,
            retryable: false,
            reason: 'subject_not_allowed',
            message: 'A caller may not assert a delegated subject',
          },
        },
      });
      const otherCaller = await postJson<IssueOutcome>(url, '/issue', {
        ...base,
        callerServiceId: 'shipping',
      });
      assert.deepEqual(otherCaller, {
        answer: {
          error: {
            code: 'capability_auth',
            status: 403,
            retryable: false,
            reason: 'caller_mismatch',
            message: `This entrypoint issues tokens for ${BILLING_SERVICE_ID} only`,
          },
        },
      });
      // Neither refusal needed the catalog; the same request without them is minted.
      assert.deepEqual(await getJson(url, '/discovery-hits'), { discoveryHits: 0 });
      const minted = await postJson<IssueOutcome>(url, '/issue', base);
      const answer = (minted as { answer: Record<string, unknown> }).answer;
      assert.equal(answer.error, undefined, JSON.stringify(minted));
      assert.equal(answer.tokenType, 'svc-capability');
      const claims = await verifiedClaims(answer.token as string);
      assert.equal(claims.sub, BILLING_SERVICE_ID);
    });
  },
);

test(
  'workerd bindings: a binding whose Worker claims another id in discovery is refused as unknown',
  BOUND,
  async () => {
    await withDeployment(async (url) => {
      // LEDGER is bound to the orders Worker, whose discovery document says `orders`.
      const refused = failedWith(
        await callThrough(url, {
          targetServiceId: 'ledger',
          abilityId: 'ledger.entries',
          scopes: ['ledger.read'],
          method: 'balance',
          input: {},
        }),
      );
      assert.deepEqual(taxonomyOf(refused), {
        code: 'capability_auth',
        status: 403,
        retryable: false,
        reason: 'unknown_target',
      });
      assert.deepEqual(await getJson(url, '/discovery-hits'), { discoveryHits: 1 });
      const events = await getJson<CatalogEvent[]>(url, '/catalog-events');
      assert.deepEqual(events, [{
        event: 'svc.catalog.target_failed',
        target: 'ledger',
        reason: 'unknown_target',
        detail: 'document id "orders" differs from the endpoint id',
      }]);
    });
  },
);

test(
  'workerd bindings: billing streams 1 000 validated items from orders over a WebSocket upgraded through its binding',
  BOUND,
  async () => {
    await withDeployment(async (url) => {
      assert.deepEqual(await getJson(url, '/sockets'), { opened: 0, closed: [] });
      // The unary call and the stream share one session: one socket, closed when disposed.
      assertStreamed(await streamThrough(url, { count: STREAMED_MOVEMENTS }));
      await assertClosedByDisposal(url);
    });
  },
);

test(
  "workerd bindings: the plane's abilitySession streams from orders over its cloudflareServiceBinding",
  BOUND,
  async () => {
    await withDeployment(async (url) => {
      // orders.catalog streams, so the plane picks WebSocket, dialled through the ORDERS binding
      // by the endpoint's createWebSocket (HTTP-batch would refuse the stream with 405).
      const outcome = await postJson<StreamOutcome>(url, '/plane-stream', {
        count: STREAMED_MOVEMENTS,
      });
      assertStreamed(outcome);
      await assertClosedByDisposal(url);
      assert.deepEqual(await getJson(url, '/discovery-hits'), { discoveryHits: 1 });
    });
  },
);

test(
  'workerd bindings: a refused upgrade or token over the binding socket fails typed, without waiting',
  BOUND,
  async () => {
    await withDeployment(async (url) => {
      // No RPC route there: orders answers the upgrade with 404, the socket fails as a refused
      // handshake with that status, and the call fails as refused (a wrong path: not retryable)
      // long before the 10 s open timeout.
      const started = Date.now();
      const noRoute = await streamThrough(url, { count: 1, path: '/rpc/orders.nowhere' });
      assert.ok(Date.now() - started < 8_000, `refusal took ${Date.now() - started} ms`);
      assert.equal(noRoute.ok, false, JSON.stringify(noRoute));
      const lost = (noRoute as { error: SeenError }).error;
      assert.deepEqual(taxonomyOf(lost), {
        code: 'internal',
        status: 404,
        retryable: false,
        reason: 'rpc_upgrade_refused',
      });
      assert.deepEqual(await getJson(url, '/sockets'), { opened: 0, closed: [] });

      // An unsigned token: the upgrade succeeds, the token travels inside the session and orders
      // refuses it with 401, typed, as over any other WebSocket.
      const unsigned = await streamThrough(url, { count: 1, token: 'unsigned' });
      assert.equal(unsigned.ok, false, JSON.stringify(unsigned));
      const refused = (unsigned as { error: SeenError }).error;
      assert.equal(refused.code, 'capability_auth');
      assert.equal(refused.status, 401);
      assert.equal(refused.retryable, false);
      const record = await socketsOnceClosed(url, 1);
      assert.equal(record.opened, 1);
      assert.equal(record.closed.length, 1);
    });
  },
);

for (const [label, options] of [['enhanced', {}], ['legacy', LEGACY_ERRORS]] as const) {
  test(
    `workerd bindings (${label} error serialisation): billing streams 1 000 validated items from orders over native binding RPC; a refused token fails typed`,
    BOUND,
    async () => {
      await withDeployment(async (url) => {
        assertStreamed(
          await postJson<StreamOutcome>(url, '/native-stream', {
            count: STREAMED_MOVEMENTS,
          }),
        );
        // No socket: the session rode connectAbility's byte streams.
        assert.deepEqual(await getJson(url, '/sockets'), { opened: 0, closed: [] });
        assertInvalidInputRefused(
          await postJson<StreamOutcome>(url, '/native-stream', { count: -1 }),
          'count',
          'native',
        );
        const refused = await postJson<StreamOutcome>(url, '/native-stream', {
          count: 1,
          token: 'unsigned',
        });
        assert.equal(refused.ok, false, JSON.stringify(refused));
        const error = (refused as { error: SeenError }).error;
        // The refusal crossed as data: its taxonomy survives either serialisation.
        assert.equal(error.code, 'capability_auth');
        assert.equal(error.status, 401);
        assert.equal(error.retryable, false);
      }, options);
    },
  );
}

for (const [label, options] of [['enhanced', {}], ['legacy', LEGACY_ERRORS]] as const) {
  test(
    `workerd bindings (${label} error serialisation): billing → the plane's broker → orders over native binding RPC, a unary call and 1 000 validated items; refusals typed`,
    BOUND,
    async () => {
      await withDeployment(async (url) => {
        const outcome = await postJson<StreamOutcome>(url, '/broker-stream', {
          count: STREAMED_MOVEMENTS,
        });
        assertStreamed(outcome);
        // The plane's leg was the native binding: orders accepted no socket.
        assert.deepEqual(await getJson(url, '/sockets'), { opened: 0, closed: [] });
        assertInvalidInputRefused(
          await postJson<StreamOutcome>(url, '/broker-stream', { count: -1 }),
          'count',
          'broker',
        );
        // A scope the grants do not allow is refused at connect, typed, through both hops.
        const refused = await postJson<StreamOutcome>(url, '/broker-stream', {
          count: 1,
          scopes: ['orders.read', 'orders.write'],
        });
        assert.equal(refused.ok, false, JSON.stringify(refused));
        assert.deepEqual(taxonomyOf((refused as { error: SeenError }).error), {
          code: 'capability_auth',
          status: 403,
          retryable: false,
          reason: 'grant_denied',
        });
      }, options);
    },
  );
}
