// Contract "Catalog rules": `services(context)` resolves one logical catalog (not keyed by
// caller); the JWKS route needs none; the token endpoint (and the in-process session, the other
// front door built so far) need it and fail closed when it cannot be built; a failing target
// refuses only itself. Plus `discoveryCache` (false, default, shared registry cache).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { localService } from '../../src/plane/endpoints.ts';
import { memoryRegistryCache } from '../../src/plane/registry-cache.ts';
import {
  assertRefusal,
  createPlaneDeployment,
  hmacTokenRequest,
  JWKS_URL,
  jwkTokenRequest,
  readResponse,
  tokenBody,
} from './plane-fixture.ts';
import { fetchOnlyService } from '../support/fetch-only-service.ts';

test('Catalog: services(context) receives the runtime context of the request', async () => {
  const fx = await createPlaneDeployment();
  const seen: unknown[] = [];
  const endpoints = [
    localService({
      id: 'svc-a',
      service: fetchOnlyService(fx.serviceFetch('svc-a')),
      grants: [{ caller: 'svc-caller', scopes: ['svc-a.read'] }],
    }),
  ];
  await fx.activate(fx.replica(['k1'], {
    services: (context) => {
      seen.push((context as { env?: unknown })?.env ?? context);
      return endpoints;
    },
  }));
  const env = { CATALOG: 'binding' };
  assert.equal((await fx.send(await hmacTokenRequest(tokenBody()), env)).status, 200);
  assert.deepEqual(seen, [env]);
});

test('Catalog: one logical catalog, shared by every caller', async () => {
  const fx = await createPlaneDeployment({ plane: { discoveryCache: undefined } });
  const hmac = await fx.send(await hmacTokenRequest(tokenBody()));
  const jwk = await fx.send(
    await jwkTokenRequest(tokenBody({ callerServiceId: 'svc-jwk' })),
  );
  assert.equal(hmac.status, 200);
  assert.equal(jwk.status, 200);
  for (
    const caller of [{ id: 'alice', kind: 'user' as const }, { id: 'bob', kind: 'user' as const }]
  ) {
    using session = fx.plane.abilitySession({
      abilityId: 'svc-a.echo',
      targetServiceId: 'svc-a',
      scopes: ['svc-a.read'],
      caller,
    });
    await session.whoami({});
  }
  assert.equal(fx.discoveryRequests('svc-a').length, 1, 'one snapshot served four callers');
});

test('Catalog: the token endpoint and sessions fail closed when the catalog cannot be built', async () => {
  const fx = await createPlaneDeployment({ countSigningKeyLookups: true });
  const broken: [string, () => unknown][] = [
    ['throws', () => {
      throw new Error('registry down');
    }],
    ['rejects', () => Promise.reject(new Error('registry down'))],
    ['not a list', () => ({ 'svc-a': 'https://svc-a.internal' })],
    ['a malformed endpoint', () => [{ id: 'svc-a' }]],
    ['duplicate ids', () => {
      const endpoint = localService({
        id: 'svc-a',
        service: fetchOnlyService(fx.serviceFetch('svc-a')),
        grants: [],
      });
      return [endpoint, endpoint];
    }],
  ];
  for (const [label, services] of broken) {
    const plane = await fx.activate(fx.replica(['k1'], { services: services as never }));
    const lookups = fx.counters.signingKeyLookups;
    const token = await fx.send(await hmacTokenRequest(tokenBody()));
    assert.equal(token.status, 500, label);
    assert.equal(token.body.reason, 'catalog_unavailable', label);
    assert.equal(token.body.token, undefined, label);
    using session = plane.abilitySession({
      abilityId: 'svc-a.echo',
      targetServiceId: 'svc-a',
      scopes: ['svc-a.read'],
    });
    await assertRefusal(session.whoami({}), { status: 500, reason: 'catalog_unavailable' }, label);
    assert.equal(fx.counters.signingKeyLookups, lookups, `${label}: nothing was signed`);
    const jwks = await readResponse(await plane.fetch(new Request(JWKS_URL)));
    assert.equal(jwks.status, 200, `${label}: JWKS still served`);
  }
  assert.equal(fx.rpcRequests('svc-a').length, 0);
  assert.ok(fx.eventsNamed('svc.catalog.unavailable').length >= broken.length);
});

test('Catalog: a target whose discovery fails refuses only that target, and is not remembered', async () => {
  const fx = await createPlaneDeployment();
  const svcD = tokenBody({ targetServiceId: 'svc-d', scopes: ['svc-d.read'] });
  fx.stop('svc-d');
  const down = await fx.send(await hmacTokenRequest(svcD));
  assert.equal(down.status, 500);
  assert.equal(down.body.reason, 'target_unreachable');
  assert.match(down.body.detail, /svc-d/);
  assert.doesNotMatch(down.body.detail, /connection refused/, 'the network error stays in the log');
  assert.equal((await fx.send(await hmacTokenRequest(tokenBody()))).status, 200);
  fx.start('svc-d');
  assert.equal((await fx.send(await hmacTokenRequest(svcD))).status, 200);
  const failed = fx.eventsNamed('svc.catalog.target_failed');
  assert.equal(failed.length, 1);
  assert.equal(failed[0].target, 'svc-d');
});

test('Catalog: discoveryCache false resolves fresh; a shared registry cache serves replicas', async () => {
  const fresh = await createPlaneDeployment();
  await fresh.send(await hmacTokenRequest(tokenBody()));
  await fresh.send(await hmacTokenRequest(tokenBody()));
  assert.equal(fresh.discoveryRequests('svc-a').length, 2);
  const shared = memoryRegistryCache();
  const fx = await createPlaneDeployment({ plane: { discoveryCache: shared } });
  await fx.send(await hmacTokenRequest(tokenBody()));
  await fx.activate(fx.replica(['k2', 'k1']));
  assert.equal((await fx.send(await hmacTokenRequest(tokenBody()))).status, 200);
  assert.equal(fx.discoveryRequests('svc-a').length, 1, 'the second replica read the cache');
});

test('Catalog rules: a token request forwards its request id to the discovery it triggers', async () => {
  const fx = await createPlaneDeployment({ plane: { discoveryCache: false } });
  const request = await hmacTokenRequest(tokenBody());
  const sentId = request.headers.get('X-Request-Id');
  assert.ok(sentId !== null && sentId.length > 0);
  const response = await fx.send(request);
  assert.equal(response.status, 200);
  const discovery = fx.discoveryRequests('svc-a');
  assert.equal(discovery.length, 1);
  assert.equal(discovery[0]!.headers.get('X-Request-Id'), sentId);
});
