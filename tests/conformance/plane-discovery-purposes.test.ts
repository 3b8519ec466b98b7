// Contract "Control-plane options" (`discoveryCache` keyed `token`, `openapi`, `default`): each
// purpose reads and writes only its own cache. A token request uses `token`, `GET /openapi.json`
// uses `openapi`, a call through the plane (in-process session, REST) uses `default`.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { discoveryCacheKey } from '../../src/plane/catalog.ts';
import { memoryRegistryCache, type RegistryCache } from '../../src/plane/registry-cache.ts';
import { createPlaneDeployment, PLANE_URL } from './plane-fixture.ts';

/** A cache that records every operation, by kind and key. */
function recordingCache(): RegistryCache & { operations: string[] } {
  const inner = memoryRegistryCache();
  const operations: string[] = [];
  return {
    operations,
    get(key) {
      operations.push(`get ${key}`);
      return inner.get(key);
    },
    set(key, value, ttlSeconds) {
      operations.push(`set ${key}`);
      return inner.set(key, value, ttlSeconds);
    },
    delete(key) {
      operations.push(`delete ${key}`);
      return inner.delete(key);
    },
  };
}

async function deploymentWithPurposeCaches() {
  const caches = { token: recordingCache(), openapi: recordingCache(), default: recordingCache() };
  const fx = await createPlaneDeployment({ plane: { discoveryCache: caches } });
  const touched = () =>
    Object.fromEntries(
      Object.entries(caches).map(([purpose, cache]) => [purpose, cache.operations.length > 0]),
    );
  const clear = () => Object.values(caches).forEach((cache) => (cache.operations.length = 0));
  // Writes are not awaited by the catalog: let them land before looking.
  const settle = () => new Promise((resolve) => setTimeout(resolve, 0));
  return { fx, caches, touched, clear, settle };
}

test('discoveryCache purposes: a token request reads and writes only the token cache', async () => {
  const { fx, caches, touched, settle } = await deploymentWithPurposeCaches();
  const token = await fx.hmacRequester()({
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    abilityId: 'svc-a.echo',
    scopes: ['svc-a.read'],
  });
  assert.equal(typeof token, 'string');
  await settle();
  assert.deepEqual(touched(), { token: true, openapi: false, default: false });
  const key = discoveryCacheKey('svc-a');
  assert.deepEqual(caches.token.operations, [`get ${key}`, `set ${key}`]);
});

test('discoveryCache purposes: GET /openapi.json reads and writes only the openapi cache', async () => {
  const { fx, caches, touched, settle } = await deploymentWithPurposeCaches();
  const response = await fx.send(new Request(`${PLANE_URL}/openapi.json`));
  assert.equal(response.status, 200);
  await settle();
  assert.deepEqual(touched(), { token: false, openapi: true, default: false });
  // Every target of the catalog, each read once and written once.
  for (const id of ['svc-a', 'svc-b', 'svc-c', 'svc-d']) {
    const key = discoveryCacheKey(id);
    assert.deepEqual(
      caches.openapi.operations.filter((operation) => operation.endsWith(` ${key}`)),
      [`get ${key}`, `set ${key}`],
      id,
    );
  }
});

test('discoveryCache purposes: a call through the plane reads and writes only the default cache', async () => {
  const { fx, caches, touched, settle } = await deploymentWithPurposeCaches();
  {
    using session = fx.plane.abilitySession({
      abilityId: 'svc-a.echo',
      targetServiceId: 'svc-a',
      scopes: ['svc-a.read'],
      caller: { id: 'alice', kind: 'user' },
    });
    await session.whoami({});
  }
  await settle();
  assert.deepEqual(touched(), { token: false, openapi: false, default: true });
  const key = discoveryCacheKey('svc-a');
  assert.deepEqual(caches.default.operations, [`get ${key}`, `set ${key}`]);
});

test('discoveryCache purposes: each purpose keeps its own snapshot (one filled cache serves no other)', async () => {
  const { fx, caches, clear, settle } = await deploymentWithPurposeCaches();
  await fx.send(new Request(`${PLANE_URL}/openapi.json`));
  await settle();
  const discoveredBefore = fx.discoveryRequests('svc-a').length;
  clear();
  {
    using session = fx.plane.abilitySession({
      abilityId: 'svc-a.echo',
      targetServiceId: 'svc-a',
      scopes: ['svc-a.read'],
    });
    await session.whoami({});
  }
  await settle();
  // The openapi snapshot was not used for the call: svc-a was discovered again, for `default`.
  assert.equal(fx.discoveryRequests('svc-a').length, discoveredBefore + 1);
  assert.deepEqual(caches.openapi.operations, []);
  assert.deepEqual(caches.token.operations, []);
});

test('discoveryCache purposes: a REST call reads and writes only the default cache', async () => {
  const { fx, caches, touched, settle } = await deploymentWithPurposeCaches();
  // Sent directly: the fixture's checked REST helper also reads /openapi.json.
  const response = await fx.plane.fetch(
    new Request(`${PLANE_URL}/items/x`, { headers: { Authorization: 'Bearer t-alice' } }),
  );
  assert.equal(response.status, 200, await response.text());
  await settle();
  assert.deepEqual(touched(), { token: false, openapi: false, default: true });
  // Read for the route table, written once, then read again by the call's authorization.
  const key = discoveryCacheKey('svc-a');
  const forSvcA = caches.default.operations.filter((operation) => operation.endsWith(` ${key}`));
  assert.deepEqual(forSvcA.slice(0, 2), [`get ${key}`, `set ${key}`]);
  assert.deepEqual(forSvcA.slice(2).filter((operation) => !operation.startsWith('get ')), []);
});
