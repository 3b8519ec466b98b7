// The shared invocation path (src/plane/invocation.ts) on its own: catalog authorization before
// any token or service contact, the token each caller kind gets, the metadata forwarded, the
// brokered path for an ingress target, no retry, and streams that close their session.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createEventLog } from '../../src/core/logging.ts';
import { createCatalog } from '../../src/plane/catalog.ts';
import { httpService, localService } from '../../src/plane/endpoints.ts';
import { memoryWebSocketFactory } from '../../src/testing/mod.ts';
import { createInvocation, type InvocationContext } from '../../src/plane/invocation.ts';
import { createIssuer } from '../../src/plane/issuer.ts';
import { resolveDiscoveryCaches } from '../../src/plane/registry-cache.ts';
import { signingAuthorityFromOption } from '../../src/plane/signing-keys.ts';
import {
  assertRefusal,
  createPlaneDeployment,
  decodeJws,
  ISS,
  PLANE_ID,
  type PlaneDeployment,
} from '../conformance/plane-fixture.ts';

type Report = {
  identity: Record<string, unknown>;
  connInfo: unknown;
  idempotencyKey: string | null;
  remainingTimeoutMs: number | null;
  requestId: string | null;
};

/** The invocation path over the fixture's services, signing with the deployed plane's k1. */
function invocationOver(fx: PlaneDeployment) {
  const grants = (id: string) =>
    [PLANE_ID, 'svc-robot'].map((caller) => ({
      caller,
      scopes: id === 'svc-a' ? ['svc-a.read', 'svc-a.write', 'svc-a.internal'] : [`${id}.read`],
    }));
  const catalog = createCatalog({
    services: [
      // svc-a over HTTP with in-memory sockets, so streams have a session transport.
      httpService({
        id: 'svc-a',
        url: 'https://svc-a.test',
        grants: grants('svc-a'),
        fetch: fx.serviceFetch('svc-a'),
        createWebSocket: memoryWebSocketFactory(fx.serviceFetch('svc-a')).createWebSocket,
      }),
      ...(['svc-b', 'svc-c'] as const).map((id) =>
        localService({
          id,
          service: { fetch: fx.serviceFetch(id), discovery: () => fx.services[id].discovery() },
          grants: grants(id),
        })
      ),
    ],
    caches: resolveDiscoveryCaches(false),
    log: false,
  });
  const signingKeys = [{ kid: fx.keys.k1.kid, secret: fx.keys.k1.privateJwk }];
  const issuer = createIssuer({
    planeServiceId: PLANE_ID,
    issuer: ISS,
    defaultTtlSeconds: 120,
    authority: () => signingAuthorityFromOption(signingKeys, undefined),
    catalog,
  });
  return createInvocation({
    planeServiceId: PLANE_ID,
    catalog,
    issuer,
    timeoutPolicy: {},
    log: createEventLog(false),
  });
}

const alice = { id: 'alice', kind: 'user', orgId: 'org-1', principalKind: 'api_key' } as const;
const robot = { id: 'svc-robot', kind: 'service' } as const;

function context(extra: Partial<InvocationContext> = {}): InvocationContext {
  return { caller: alice, requestId: 'req-invocation-1', bindings: undefined, ...extra };
}

const whoami = { serviceId: 'svc-a', abilityId: 'svc-a.echo', method: 'whoami' };

test('invocation: a user caller gets a delegated token (act = the plane, spa plane, spk, spo)', async () => {
  const fx = await createPlaneDeployment();
  const report = await invocationOver(fx).call(whoami, {}, context()) as Report;
  assert.equal(report.identity.serviceId, PLANE_ID);
  assert.equal(report.identity.callerAccess, 'plane');
  assert.deepEqual(report.identity.subject, { id: 'alice', kind: 'api_key', orgId: 'org-1' });
  assert.deepEqual(report.identity.scopes, ['svc-a.read']);
  const [token] = fx.tokensAt('svc-a');
  const { claims } = decodeJws(token);
  assert.deepEqual(claims.act, { sub: PLANE_ID });
  assert.equal(claims.spb, undefined);
});

test('invocation: a service caller gets a service-class token and reaches a service-only ability', async () => {
  const fx = await createPlaneDeployment();
  const report = await invocationOver(fx).call(
    { serviceId: 'svc-a', abilityId: 'svc-a.internal', method: 'whoami' },
    {},
    context({ caller: robot }),
  ) as Report;
  assert.equal(report.identity.serviceId, 'svc-robot');
  assert.equal(report.identity.callerAccess, 'service');
  assert.equal(report.identity.subject, undefined);
  assert.deepEqual(report.identity.scopes, ['svc-a.internal']);
});

test('invocation: a service-only ability refuses a user caller from the catalog, before any token or call', async () => {
  const fx = await createPlaneDeployment();
  const invocation = invocationOver(fx);
  await assertRefusal(
    invocation.call(
      { serviceId: 'svc-a', abilityId: 'svc-a.internal', method: 'whoami' },
      {},
      context({ caller: { id: 'svc-robot', kind: 'user', principalKind: 'service' } }),
    ),
    { code: 'capability_auth', status: 403, reason: 'access_class_mismatch' },
  );
  assert.equal(fx.rpcRequests('svc-a').length, 0);
  assert.equal(fx.count('factories', 'svc-a.internal'), 0);
});

test('invocation: a private ability, an unknown ability and an unknown method are refused like one another', async () => {
  const fx = await createPlaneDeployment();
  const invocation = invocationOver(fx);
  await assertRefusal(
    invocation.call(
      { serviceId: 'svc-a', abilityId: 'svc-a.private', method: 'secret' },
      {},
      context(),
    ),
    { code: 'capability_auth', status: 403, reason: 'unknown_ability' },
  );
  await assertRefusal(
    invocation.call({ serviceId: 'svc-a', abilityId: 'svc-a.nope', method: 'x' }, {}, context()),
    { code: 'capability_auth', status: 403, reason: 'unknown_ability' },
  );
  await assertRefusal(
    invocation.call({ ...whoami, method: 'toString' }, {}, context()),
    { code: 'capability_auth', status: 403, reason: 'unknown_method' },
  );
  assert.equal(fx.rpcRequests('svc-a').length, 0);
  assert.equal(fx.count('factories', 'svc-a.private'), 0);
});

test('invocation: an exhausted budget fails with 504 before discovery, minting or a session', async () => {
  const fx = await createPlaneDeployment();
  const before = fx.requests.length;
  await assertRefusal(
    invocationOver(fx).call(whoami, {}, context({ deadline: Date.now() - 1 })),
    { code: 'timeout', status: 504, reason: 'budget_exhausted' },
  );
  assert.equal(fx.requests.length, before);
});

test('invocation: request id, connection info, budget and idempotency key reach the service', async () => {
  const fx = await createPlaneDeployment();
  const connInfo = {
    remote: { address: '203.0.113.9', addressType: 'IPv4', port: 4431, transport: 'tcp' },
  } as const;
  const report = await invocationOver(fx).call(
    { serviceId: 'svc-b', abilityId: 'svc-b.echo', method: 'whoami' },
    {},
    context({
      connInfo,
      idempotencyKey: 'key-1',
      deadline: Date.now() + 60_000,
      requestId: 'req-forwarded',
    }),
  ) as Report;
  assert.equal(report.requestId, 'req-forwarded');
  assert.equal(report.idempotencyKey, 'key-1');
  assert.deepEqual(report.connInfo, connInfo);
  assert.ok(report.remainingTimeoutMs !== null && report.remainingTimeoutMs <= 60_000);
  assert.ok(report.remainingTimeoutMs > 1000);
  // svc-b requires ingress: the brokered path was chosen, and the token stays free of conn info.
  assert.equal(report.identity.brokerServiceId, PLANE_ID);
  const [token] = fx.tokensAt('svc-b');
  assert.equal(JSON.stringify(decodeJws(token).claims).includes('203.0.113.9'), false);
});

test('invocation: the plane never retries a transient failure', async () => {
  const fx = await createPlaneDeployment();
  const error = await assertRefusal(
    invocationOver(fx).call(
      { serviceId: 'svc-a', abilityId: 'svc-a.echo', method: 'failShaped' },
      { status: 503, retryable: true, reason: 'busy' },
      context(),
    ),
    { code: 'handler', status: 503, retryable: true, reason: 'busy' },
  );
  assert.ok(error);
  assert.equal(fx.count('calls', 'svc-a.echo#failShaped'), 1);
});

test('invocation: a stream delivers its items and its session ends with it', async () => {
  const fx = await createPlaneDeployment();
  const stream = await invocationOver(fx).stream(
    { serviceId: 'svc-a', abilityId: 'svc-a.echo', method: 'ticks' },
    { n: 3 },
    context(),
  );
  const items: unknown[] = [];
  for await (const item of stream as unknown as AsyncIterable<unknown>) items.push(item);
  assert.deepEqual(items, [{ i: 0 }, { i: 1 }, { i: 2 }]);
});

test('invocation: a unary call of a streaming method is refused before the service is contacted', async () => {
  const fx = await createPlaneDeployment();
  await assertRefusal(
    invocationOver(fx).call({ ...whoami, method: 'ticks' }, { n: 1 }, context()),
    { code: 'capability_auth', status: 403, reason: 'unknown_method' },
  );
  assert.equal(fx.rpcRequests('svc-a').length, 0);
});

test('invocation: publishedMethods lists published abilities only, the same for every caller', async () => {
  const fx = await createPlaneDeployment();
  const methods = await invocationOver(fx).publishedMethods(undefined, 'req-list');
  const names = methods.map((entry) => `${entry.ability.id}#${entry.methodName}`);
  assert.ok(names.includes('svc-a.echo#items.update'));
  assert.ok(names.includes('svc-a.internal#whoami'));
  assert.ok(names.includes('svc-b.echo#whoami'));
  assert.equal(names.some((name) => name.startsWith('svc-a.private')), false);
});

test('invocation: a minted token is reused for the same caller, never across callers or subjects', async () => {
  const fx = await createPlaneDeployment();
  const invocation = invocationOver(fx);
  const callers = [
    alice,
    alice,
    { ...alice, orgId: 'org-2' },
    { ...alice, principalKind: 'automation' },
    { id: 'bob', kind: 'user' } as const,
    { id: PLANE_ID, kind: 'service' } as const,
  ];
  for (const caller of callers) await invocation.call(whoami, {}, context({ caller }));
  const tokens = fx.tokensAt('svc-a');
  assert.equal(tokens.length, 6);
  assert.equal(tokens[1], tokens[0], 'the same caller reuses its token');
  assert.equal(new Set(tokens).size, 5, 'every other caller got its own');
  const subjects = tokens.map((token) => decodeJws(token).claims);
  assert.deepEqual(subjects[2].spo, 'org-2');
  assert.deepEqual(subjects[3].spk, 'automation');
  // The plane's own id as a service caller: a service-class token, not the plane's delegated one.
  assert.equal(subjects[5].spa, 'service');
  assert.equal(subjects[5].act, undefined);
});

test('invocation: a token the service refuses with 401 is minted afresh once; the method runs once', async () => {
  const fx = await createPlaneDeployment({ signingOrder: ['k1', 'k2'] });
  const invocation = invocationOver(fx);
  await invocation.call(whoami, {}, context());
  // The services' JWKS cache expires and the plane now publishes only k2: k1 tokens are refused.
  await fx.redeploy(['k2']);
  await new Promise((resolve) => setTimeout(resolve, 400));
  await assertRefusal(invocation.call(whoami, {}, context()), {
    code: 'capability_auth',
    status: 401,
  });
  // Two attempts reached svc-a (the cached token, then a fresh one from the same k1 signer),
  // and neither ran the handler beyond the first call.
  assert.equal(fx.count('calls', 'svc-a.echo#whoami'), 1);
  const tokens = fx.tokensAt('svc-a');
  assert.equal(tokens.length, 3);
  assert.equal(tokens[1], tokens[0]);
  assert.notEqual(tokens[2], tokens[1]);
});
