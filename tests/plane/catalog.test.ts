import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SvcConfigurationError } from '../../src/core/errors.ts';
import type { SvcLogEvent } from '../../src/core/logging.ts';
import { createService } from '../../src/service/service.ts';
import {
  type CatalogOptions,
  createCatalog,
  discoveryCacheKey,
  MAX_DISCOVERY_DOCUMENT_BYTES,
} from '../../src/plane/catalog.ts';
import { localService, type ServiceEndpoint } from '../../src/plane/endpoints.ts';
import {
  memoryRegistryCache,
  type RegistryCache,
  resolveDiscoveryCaches,
} from '../../src/plane/registry-cache.ts';
import { rejectsWithInfo } from '../support/ability-fixtures.ts';
import { testKeys } from '../support/keys.ts';
import {
  capabilitiesFor,
  discoveryDocumentFor,
  fakeService,
  mainAbility,
} from './discovery-fixtures.ts';
import { fetchOnlyService } from '../support/fetch-only-service.ts';

function catalogOf(
  services: CatalogOptions['services'],
  options: Partial<CatalogOptions> & { events?: SvcLogEvent[] } = {},
) {
  const events = options.events ?? [];
  return createCatalog({
    services,
    caches: options.caches ?? resolveDiscoveryCaches(undefined),
    log: (event) => void events.push(event),
    ...(options.discoveryTimeoutMs !== undefined
      ? { discoveryTimeoutMs: options.discoveryTimeoutMs }
      : {}),
    ...(options.cacheTtlSeconds !== undefined ? { cacheTtlSeconds: options.cacheTtlSeconds } : {}),
  });
}

/** A registry cache that counts reads and writes and can be told to fail. */
function countingCache(inner: RegistryCache = memoryRegistryCache()) {
  const counts = { get: 0, set: 0, delete: 0 };
  let failing = false;
  const cache: RegistryCache = {
    get: (key) => {
      counts.get += 1;
      return failing ? Promise.reject(new Error('cache down')) : inner.get(key);
    },
    set: (key, value, ttl) => {
      counts.set += 1;
      return failing ? Promise.reject(new Error('cache down')) : inner.set(key, value, ttl);
    },
    delete: (key) => {
      counts.delete += 1;
      return inner.delete(key);
    },
  };
  return { cache, counts, inner, fail: (value: boolean) => void (failing = value) };
}

/** Lets pending microtasks and a macrotask run (fire-and-forget cache writes land). */
const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

test('target resolves the configured endpoint and its accepted, frozen document', async () => {
  const a = fakeService('svc-a');
  const catalog = catalogOf([a.endpoint]);
  const resolved = await catalog.target('svc-a', {}, 'token');
  assert.equal(resolved.endpoint, a.endpoint);
  assert.equal(resolved.document.id, 'svc-a');
  assert.equal(resolved.document.abilities[0].id, 'svc-a.main');
  assert.ok(Object.isFrozen(resolved.document));
  assert.ok(Object.isFrozen(resolved.document.abilities[0].methods.read.scopes));
  assert.equal(a.requests.length, 1);
  assert.equal(new URL(a.requests[0].url).pathname, '/.well-known/svc/service.json');
  assert.equal(a.requests[0].method, 'GET');
});

test('endpoints returns the configured endpoints by id, as a fresh map each time', async () => {
  const a = fakeService('svc-a');
  const b = fakeService('svc-b');
  const catalog = catalogOf([a.endpoint, b.endpoint]);
  const first = await catalog.endpoints({});
  assert.deepEqual([...first.keys()], ['svc-a', 'svc-b']);
  first.delete('svc-a');
  assert.ok((await catalog.endpoints({})).has('svc-a'));
  assert.equal(a.requests.length, 0, 'listing endpoints resolves no discovery');
});

test('an unknown target id is refused with 403 unknown_target and nothing is fetched', async () => {
  const a = fakeService('svc-a');
  const catalog = catalogOf([a.endpoint]);
  const error = await rejectsWithInfo(catalog.target('svc-zz', {}, 'token'), {
    code: 'capability_auth',
    status: 403,
    reason: 'unknown_target',
  });
  assert.match(error.message, /svc-zz/);
  assert.equal(a.requests.length, 0);
});

test('successes are cached for the TTL: one fetch until it elapses, then one more', async () => {
  let now = 5_000_000;
  const cache = memoryRegistryCache({ now: () => now });
  const a = fakeService('svc-a');
  const catalog = catalogOf([a.endpoint], {
    caches: resolveDiscoveryCaches(cache),
    cacheTtlSeconds: 30,
  });
  await catalog.target('svc-a', {}, 'token');
  await settle();
  await catalog.target('svc-a', {}, 'token');
  await catalog.target('svc-a', {}, 'default');
  assert.equal(a.requests.length, 1);
  now += 29_000;
  await catalog.target('svc-a', {}, 'token');
  assert.equal(a.requests.length, 1);
  now += 1_000;
  await catalog.target('svc-a', {}, 'token');
  assert.equal(a.requests.length, 2);
});

test('peek reads only what a process-local cache holds now, with the same expiry as target', async () => {
  let now = 5_000_000;
  const cache = memoryRegistryCache({ now: () => now });
  const a = fakeService('svc-a');
  const catalog = catalogOf([a.endpoint], {
    caches: resolveDiscoveryCaches(cache),
    cacheTtlSeconds: 30,
  });
  assert.equal(catalog.peek('svc-a', 'token'), undefined, 'nothing resolved yet');
  assert.equal(a.requests.length, 0, 'peek never fetches');
  const resolved = await catalog.target('svc-a', {}, 'token');
  await settle();
  const peeked = catalog.peek('svc-a', 'token');
  assert.equal(peeked?.endpoint, a.endpoint);
  assert.equal(peeked?.document, resolved.document);
  assert.equal(catalog.peek('svc-zz', 'token'), undefined, 'an unknown id is left to target');
  now += 30_000;
  assert.equal(catalog.peek('svc-a', 'token'), undefined, 'an expired snapshot is not served');
  assert.equal(a.requests.length, 1);
});

test('peek leaves shared caches, disabled caches and services functions to target', async () => {
  const a = fakeService('svc-a');
  const shared = countingCache();
  const viaShared = catalogOf([a.endpoint], { caches: resolveDiscoveryCaches(shared.cache) });
  await viaShared.target('svc-a', {}, 'token');
  await settle();
  assert.equal(viaShared.peek('svc-a', 'token'), undefined, 'a shared cache is read with get');
  const uncached = catalogOf([a.endpoint], { caches: resolveDiscoveryCaches(false) });
  await uncached.target('svc-a', {}, 'token');
  assert.equal(uncached.peek('svc-a', 'token'), undefined);
  const dynamic = catalogOf(() => [a.endpoint]);
  await dynamic.target('svc-a', {}, 'token');
  await settle();
  assert.equal(dynamic.peek('svc-a', 'token'), undefined, 'services(context) runs per request');
});

test('peek does not serve a value another writer put in a process-local cache', async () => {
  const cache = memoryRegistryCache();
  const a = fakeService('svc-a');
  const catalog = catalogOf([a.endpoint], { caches: resolveDiscoveryCaches(cache) });
  await cache.set(discoveryCacheKey('svc-a'), discoveryDocumentFor('svc-a'), 60);
  assert.equal(catalog.peek('svc-a', 'token'), undefined, 'not a document this catalog accepted');
});

test('the cache default TTL is 60 seconds and the snapshot is stored under the discovery key', async () => {
  const recorded: number[] = [];
  const inner = memoryRegistryCache();
  const cache: RegistryCache = {
    get: (key) => inner.get(key),
    set: (key, value, ttl) => {
      recorded.push(ttl);
      return inner.set(key, value, ttl);
    },
    delete: (key) => inner.delete(key),
  };
  const catalog = catalogOf([fakeService('svc-a').endpoint], {
    caches: resolveDiscoveryCaches(cache),
  });
  await catalog.target('svc-a', {}, 'token');
  await settle();
  assert.deepEqual(recorded, [60]);
  const stored = (await inner.get(discoveryCacheKey('svc-a'))) as { id: string };
  assert.equal(stored.id, 'svc-a');
});

test('failures are never cached: the next resolution fetches again and then succeeds', async () => {
  const a = fakeService('svc-a', { behaviour: { kind: 'throw' } });
  const { cache, counts } = countingCache();
  const catalog = catalogOf([a.endpoint], { caches: resolveDiscoveryCaches(cache) });
  await rejectsWithInfo(catalog.target('svc-a', {}, 'token'), { reason: 'target_unreachable' });
  await rejectsWithInfo(catalog.target('svc-a', {}, 'token'), { reason: 'target_unreachable' });
  await settle();
  assert.equal(a.requests.length, 2);
  assert.equal(counts.set, 0);
  a.behave({ kind: 'document' });
  const resolved = await catalog.target('svc-a', {}, 'token');
  assert.equal(resolved.document.id, 'svc-a');
  assert.equal(a.requests.length, 3);
  await settle();
  assert.equal(counts.set, 1);
});

test('concurrent resolutions of one target share one fetch, across purposes too', async () => {
  const a = fakeService('svc-a', { behaviour: { kind: 'document', delayMs: 30 } });
  const catalog = catalogOf([a.endpoint]);
  const results = await Promise.all([
    catalog.target('svc-a', {}, 'token'),
    catalog.target('svc-a', {}, 'token'),
    catalog.target('svc-a', { other: true }, 'default'),
    catalog.target('svc-a', {}, 'openapi'),
    catalog.all({}, 'default'),
  ]);
  assert.equal(a.requests.length, 1);
  assert.equal(results[0].document.id, 'svc-a');
  assert.equal(results[4].targets.length, 1);
});

test('concurrent failures are shared too, and the failed flight is forgotten', async () => {
  const a = fakeService('svc-a', { behaviour: { kind: 'status', status: 503 } });
  const catalog = catalogOf([a.endpoint], { caches: resolveDiscoveryCaches(false) });
  const outcomes = await Promise.allSettled([
    catalog.target('svc-a', {}, 'token'),
    catalog.target('svc-a', {}, 'token'),
  ]);
  assert.deepEqual(outcomes.map((outcome) => outcome.status), ['rejected', 'rejected']);
  assert.equal(a.requests.length, 1);
  a.behave({ kind: 'document' });
  await catalog.target('svc-a', {}, 'token');
  assert.equal(a.requests.length, 2);
});

test('discoveryCache false resolves fresh every time', async () => {
  const a = fakeService('svc-a');
  const catalog = catalogOf([a.endpoint], { caches: resolveDiscoveryCaches(false) });
  for (let i = 0; i < 3; i++) await catalog.target('svc-a', {}, 'token');
  await catalog.all({}, 'openapi');
  assert.equal(a.requests.length, 4);
});

test('the keyed discoveryCache form routes each purpose to its own cache', async () => {
  const token = countingCache();
  const fallback = countingCache();
  const a = fakeService('svc-a');
  const catalog = catalogOf([a.endpoint], {
    caches: resolveDiscoveryCaches({ token: token.cache, openapi: false, default: fallback.cache }),
  });
  await catalog.target('svc-a', {}, 'token');
  await settle();
  assert.equal(token.counts.set, 1);
  assert.equal(fallback.counts.set, 0);
  assert.ok(await token.inner.get(discoveryCacheKey('svc-a')));
  assert.equal(await fallback.inner.get(discoveryCacheKey('svc-a')), undefined);

  await catalog.target('svc-a', {}, 'openapi');
  await catalog.target('svc-a', {}, 'openapi');
  assert.equal(a.requests.length, 3, 'openapi: false resolves fresh');

  await catalog.target('svc-a', {}, 'default');
  await settle();
  assert.equal(fallback.counts.set, 1);
  await catalog.target('svc-a', {}, 'default');
  assert.equal(a.requests.length, 4, 'default cache serves the second default resolution');
  await catalog.target('svc-a', {}, 'token');
  assert.equal(a.requests.length, 4, 'token cache still serves token resolutions');
});

test('HMAC-19 (catalog): a hung target does not delay another; it fails alone with 500', async () => {
  const a = fakeService('svc-a');
  const d = fakeService('svc-d', { behaviour: { kind: 'hang' } });
  const catalog = catalogOf([d.endpoint, a.endpoint], { discoveryTimeoutMs: 400 });
  let hungSettled = false;
  const hung = catalog.target('svc-d', {}, 'token');
  hung.then(() => (hungSettled = true), () => (hungSettled = true));
  const resolved = await catalog.target('svc-a', {}, 'token');
  assert.equal(resolved.document.id, 'svc-a');
  assert.equal(hungSettled, false, 'svc-a resolved while svc-d was still pending');
  const error = await rejectsWithInfo(hung, {
    code: 'internal',
    status: 500,
    retryable: false,
    reason: 'target_unreachable',
  });
  assert.match(error.message, /svc-d/);
  assert.equal(d.requests[0].signal.aborted, true, 'the hung request was aborted');
  // svc-d keeps failing alone; svc-a keeps working.
  await rejectsWithInfo(catalog.target('svc-d', {}, 'token'), { reason: 'target_unreachable' });
  assert.equal((await catalog.target('svc-a', {}, 'token')).document.id, 'svc-a');
  d.release();
});

test('HMAC-19 (catalog): a failed target refuses only itself', async () => {
  const a = fakeService('svc-a');
  const d = fakeService('svc-d', { behaviour: { kind: 'throw' } });
  const catalog = catalogOf([a.endpoint, d.endpoint]);
  await rejectsWithInfo(catalog.target('svc-d', {}, 'token'), {
    status: 500,
    reason: 'target_unreachable',
  });
  assert.equal((await catalog.target('svc-a', {}, 'token')).document.id, 'svc-a');
});

test('all resolves every target in parallel, each with its own timeout, failures isolated', async () => {
  const a = fakeService('svc-a', { behaviour: { kind: 'document', delayMs: 20 } });
  const b = fakeService('svc-b');
  const d = fakeService('svc-d', { behaviour: { kind: 'hang' } });
  const e = fakeService('svc-e', { behaviour: { kind: 'text', body: '{not json' } });
  const catalog = catalogOf([a.endpoint, d.endpoint, b.endpoint, e.endpoint], {
    discoveryTimeoutMs: 200,
  });
  const started = Date.now();
  const { targets, failures } = await catalog.all({}, 'default');
  const elapsed = Date.now() - started;
  assert.deepEqual(targets.map((target) => target.endpoint.id), ['svc-a', 'svc-b']);
  assert.deepEqual(failures.map((failure) => failure.id), ['svc-d', 'svc-e']);
  assert.equal((failures[0].error as { reason?: string }).reason, 'target_unreachable');
  assert.equal((failures[1].error as { reason?: string }).reason, 'unknown_target');
  // Parallel: bounded by one timeout, not the sum of them.
  assert.ok(elapsed < 2_000, `all() took ${elapsed} ms`);
  d.release();
});

test('a timeout bounds a target whose fetch ignores its abort signal', async () => {
  const d = fakeService('svc-d', { behaviour: { kind: 'hang' } });
  const catalog = catalogOf([d.endpoint], { discoveryTimeoutMs: 50 });
  const started = Date.now();
  await rejectsWithInfo(catalog.target('svc-d', {}, 'token'), { reason: 'target_unreachable' });
  assert.ok(Date.now() - started < 2_000);
  d.release();
});

test('non-200 answers are unreachable (500); invalid JSON, non-UTF-8 and oversized bodies make an unknown target (403)', async () => {
  const cases: [Parameters<ReturnType<typeof fakeService>['behave']>[0], string][] = [
    [{ kind: 'status', status: 404 }, 'target_unreachable'],
    [{ kind: 'status', status: 302 }, 'target_unreachable'],
    [{ kind: 'status', status: 500 }, 'target_unreachable'],
    [{ kind: 'text', body: '{"id": "svc-a",' }, 'unknown_target'],
    [{ kind: 'text', body: '' }, 'unknown_target'],
    [{ kind: 'document', body: ['not', 'an', 'object'] }, 'unknown_target'],
    [{ kind: 'document', body: { id: 'svc-a' } }, 'unknown_target'],
    [
      { kind: 'text', body: ' '.repeat(MAX_DISCOVERY_DOCUMENT_BYTES + 1) },
      'unknown_target',
    ],
    // A valid document padded past the limit: refused for its size alone.
    [
      {
        kind: 'text',
        body: JSON.stringify(discoveryDocumentFor('svc-a')) +
          ' '.repeat(MAX_DISCOVERY_DOCUMENT_BYTES),
      },
      'unknown_target',
    ],
  ];
  const a = fakeService('svc-a');
  const catalog = catalogOf([a.endpoint]);
  for (const [behaviour, reason] of cases) {
    a.behave(behaviour);
    await rejectsWithInfo(
      catalog.target('svc-a', {}, 'token'),
      reason === 'unknown_target'
        ? { code: 'capability_auth', status: 403, reason }
        : { code: 'internal', status: 500, reason },
    );
  }
  const bytes = new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]);
  const binary = createCatalog({
    services: [localService({
      id: 'svc-a',
      grants: [],
      service: fetchOnlyService(() => Promise.resolve(new Response(bytes))),
    })],
    caches: resolveDiscoveryCaches(false),
    log: false,
  });
  await rejectsWithInfo(binary.target('svc-a', {}, 'token'), {
    reason: 'unknown_target',
  });
});

test('refusals never carry the network error; the log event does', async () => {
  const events: SvcLogEvent[] = [];
  const d = fakeService('svc-d', { behaviour: { kind: 'throw' } });
  const catalog = catalogOf([d.endpoint], { events });
  const error = await rejectsWithInfo(
    catalog.target('svc-d', {}, 'token', { requestId: 'req-7' }),
    {
      reason: 'target_unreachable',
    },
  );
  assert.doesNotMatch(error.message, /10\.1\.2\.3|ECONNREFUSED/);
  const event = events.find((entry) => entry.event === 'svc.catalog.target_failed');
  assert.ok(event);
  assert.equal(event.target, 'svc-d');
  assert.equal(event.requestId, 'req-7');
  assert.equal(event.reason, 'target_unreachable');
  assert.match(String(event.detail), /ECONNREFUSED/);
});

test('the request id travels on the discovery request', async () => {
  const a = fakeService('svc-a');
  const catalog = catalogOf([a.endpoint], { caches: resolveDiscoveryCaches(false) });
  await catalog.target('svc-a', {}, 'token', { requestId: 'req-42' });
  assert.equal(a.requests[0].headers.get('x-request-id'), 'req-42');
  await catalog.target('svc-a', {}, 'token');
  assert.equal(a.requests[1].headers.get('x-request-id'), null);
});

test('REG-01 a discovery id differing from the endpoint id is not accepted: unknown_target', async () => {
  const impostor = fakeService('svc-x', {
    behaviour: { kind: 'document', body: discoveryDocumentFor('svc-a') },
  });
  const b = fakeService('svc-b');
  const { cache, counts } = countingCache();
  const catalog = catalogOf([impostor.endpoint, b.endpoint], {
    caches: resolveDiscoveryCaches(cache),
  });
  const error = await rejectsWithInfo(catalog.target('svc-x', {}, 'token'), {
    code: 'capability_auth',
    status: 403,
    reason: 'unknown_target',
  });
  assert.match(error.message, /svc-x/);
  // Other targets are unaffected, and the refusal was not cached.
  assert.equal((await catalog.target('svc-b', {}, 'token')).document.id, 'svc-b');
  await rejectsWithInfo(catalog.target('svc-x', {}, 'token'), { reason: 'unknown_target' });
  assert.equal(impostor.requests.length, 2);
  await settle();
  assert.equal(counts.set, 1, 'only svc-b was cached');
  const all = await catalog.all({}, 'default');
  assert.deepEqual(all.targets.map((target) => target.endpoint.id), ['svc-b']);
  assert.deepEqual(all.failures.map((failure) => failure.id), ['svc-x']);
});

test('REG-02 a capabilities.serviceId differing from the endpoint id is not accepted', async () => {
  const document = discoveryDocumentFor('svc-a') as unknown as Record<string, unknown>;
  const forged = { ...document, capabilities: { ...capabilitiesFor('svc-a'), serviceId: 'svc-b' } };
  const a = fakeService('svc-a', { behaviour: { kind: 'document', body: forged } });
  const catalog = catalogOf([a.endpoint]);
  await rejectsWithInfo(catalog.target('svc-a', {}, 'token'), {
    code: 'capability_auth',
    status: 403,
    reason: 'unknown_target',
  });
});

test('REG-03 a document whose REST path names a variable that is not an input field is rejected', async () => {
  const document = discoveryDocumentFor('svc-a');
  const broken = JSON.parse(JSON.stringify(document));
  broken.abilities[0].methods.read.rest.path = '/items/{missing}';
  const a = fakeService('svc-a', { behaviour: { kind: 'document', body: broken } });
  const b = fakeService('svc-b');
  const catalog = catalogOf([a.endpoint, b.endpoint]);
  await rejectsWithInfo(catalog.target('svc-a', {}, 'openapi'), {
    code: 'capability_auth',
    status: 403,
    reason: 'unknown_target',
  });
  const all = await catalog.all({}, 'openapi');
  assert.deepEqual(all.targets.map((target) => target.endpoint.id), ['svc-b']);
  assert.equal(all.failures[0].id, 'svc-a');
});

test('a poisoned shared-cache entry is not trusted: it is refetched and replaced', async () => {
  const inner = memoryRegistryCache();
  await inner.set(discoveryCacheKey('svc-a'), discoveryDocumentFor('svc-evil'), 60);
  const a = fakeService('svc-a');
  const events: SvcLogEvent[] = [];
  const catalog = catalogOf([a.endpoint], { caches: resolveDiscoveryCaches(inner), events });
  const resolved = await catalog.target('svc-a', {}, 'token');
  assert.equal(resolved.document.id, 'svc-a');
  assert.equal(a.requests.length, 1);
  assert.ok(events.some((event) => event.event === 'svc.catalog.cache_rejected'));
  await settle();
  assert.equal(((await inner.get(discoveryCacheKey('svc-a'))) as { id: string }).id, 'svc-a');
});

test('a rejected shared-cache entry is refetched even when the cache cannot delete it', async () => {
  let deletes = 0;
  const rejecting: RegistryCache = {
    // Another writer's entry, which the acceptance rule refuses.
    get: () => Promise.resolve({ id: 'svc-a', bogus: true }),
    set: () => Promise.resolve(),
    // A client that throws at once instead of rejecting.
    delete: (() => {
      deletes++;
      throw new Error('cache client is closed');
    }) as unknown as RegistryCache['delete'],
  };
  const a = fakeService('svc-a');
  const catalog = catalogOf([a.endpoint], { caches: resolveDiscoveryCaches(rejecting) });
  const resolved = await catalog.target('svc-a', {}, 'token');
  assert.equal(resolved.document.id, 'svc-a');
  await settle();
  assert.equal(deletes, 1);
  assert.equal(a.requests.length, 1);
});

test('REG-01 (cache): a document accepted for another target, stored under this key, is not served', async () => {
  const inner = memoryRegistryCache();
  const a = fakeService('svc-a');
  const b = fakeService('svc-b');
  const catalog = catalogOf([a.endpoint, b.endpoint], { caches: resolveDiscoveryCaches(inner) });
  // svc-b's document, accepted and frozen by this process, put under svc-a's key (a shared
  // cache written by another replica, or a key mix-up): the very object, not a copy.
  const bDocument = (await catalog.target('svc-b', {}, 'token')).document;
  await inner.set(discoveryCacheKey('svc-a'), bDocument, 60);
  assert.equal(catalog.peek('svc-a', 'token'), undefined);
  const resolved = await catalog.target('svc-a', {}, 'token');
  assert.equal(resolved.document.id, 'svc-a');
  assert.equal(a.requests.length, 1, 'svc-a was asked for its own document');
});

test('a failing registry cache costs a fetch, never a refusal', async () => {
  const { cache, fail } = countingCache();
  fail(true);
  const a = fakeService('svc-a');
  const events: SvcLogEvent[] = [];
  const catalog = catalogOf([a.endpoint], { caches: resolveDiscoveryCaches(cache), events });
  assert.equal((await catalog.target('svc-a', {}, 'token')).document.id, 'svc-a');
  assert.equal((await catalog.target('svc-a', {}, 'token')).document.id, 'svc-a');
  await settle();
  assert.equal(a.requests.length, 2);
  assert.ok(events.some((event) => event.event === 'svc.catalog.cache_failed'));
});

test('a registry cache that never answers is bounded by the discovery timeout', async () => {
  const hanging: RegistryCache = {
    get: () => new Promise(() => {}),
    set: () => Promise.resolve(),
    delete: () => Promise.resolve(),
  };
  const a = fakeService('svc-a');
  const catalog = catalogOf([a.endpoint], {
    caches: resolveDiscoveryCaches(hanging),
    discoveryTimeoutMs: 50,
  });
  assert.equal((await catalog.target('svc-a', {}, 'token')).document.id, 'svc-a');
  assert.equal(a.requests.length, 1);
});

test('one logical catalog: the snapshot is shared by every context', async () => {
  const a = fakeService('svc-a');
  const contexts: unknown[] = [];
  const catalog = catalogOf((context) => {
    contexts.push(context);
    return [a.endpoint];
  });
  const alice = { caller: 'alice' };
  const bob = { caller: 'bob' };
  const forAlice = await catalog.target('svc-a', alice, 'token');
  await settle();
  const forBob = await catalog.target('svc-a', bob, 'token');
  assert.deepEqual(forAlice.document, forBob.document);
  assert.equal(a.requests.length, 1);
  assert.deepEqual(contexts, [alice, bob], 'services(context) receives the runtime context');
});

test('JWKS-06 (catalog fails closed): services(context) throwing refuses with 500 catalog_unavailable', async () => {
  const events: SvcLogEvent[] = [];
  const catalog = catalogOf(() => {
    throw new Error('binding missing: SECRET-env');
  }, { events });
  for (
    const attempt of [
      () => catalog.endpoints({}),
      () => catalog.target('svc-a', {}, 'token'),
      () => catalog.all({}, 'openapi'),
    ]
  ) {
    const error = await rejectsWithInfo(attempt(), {
      code: 'internal',
      status: 500,
      retryable: false,
      reason: 'catalog_unavailable',
    });
    assert.doesNotMatch(error.message, /SECRET/);
  }
  assert.ok(events.some((event) => event.event === 'svc.catalog.unavailable'));
});

test('JWKS-06 (catalog fails closed): rejected, hung or invalid services(context) results', async () => {
  const a = fakeService('svc-a');
  const bad: CatalogOptions['services'][] = [
    () => Promise.reject(new Error('kv down')),
    () => new Promise<ServiceEndpoint[]>(() => {}),
    () => [a.endpoint, a.endpoint],
    () => 'svc-a' as unknown as ServiceEndpoint[],
    () => [{ id: 'svc-a' } as unknown as ServiceEndpoint],
    () => [{ ...a.endpoint, grants: [{ caller: 'x', scopes: ['*'] }] }],
  ];
  for (const services of bad) {
    const catalog = catalogOf(services, { discoveryTimeoutMs: 50 });
    await rejectsWithInfo(catalog.target('svc-a', {}, 'token'), { reason: 'catalog_unavailable' });
  }
  assert.equal(a.requests.length, 0);
});

test('an async services(context) is supported and every target it lists resolves', async () => {
  const a = fakeService('svc-a');
  const catalog = catalogOf(async () => [a.endpoint]);
  assert.equal((await catalog.target('svc-a', {}, 'token')).document.id, 'svc-a');
});

test('a fixed endpoint list with a duplicate id or an invalid option refuses construction', () => {
  const a = fakeService('svc-a');
  const refuses = (build: () => unknown, pattern: RegExp) =>
    assert.throws(
      build,
      (error: unknown) => error instanceof SvcConfigurationError && pattern.test(error.message),
    );
  refuses(() => catalogOf([a.endpoint, fakeService('svc-a').endpoint]), /svc-a/);
  refuses(() => catalogOf('nope' as unknown as ServiceEndpoint[]), /services/);
  refuses(() => catalogOf([a.endpoint], { discoveryTimeoutMs: 0 }), /discoveryTimeoutMs/);
  refuses(() => catalogOf([a.endpoint], { discoveryTimeoutMs: 1.5 }), /discoveryTimeoutMs/);
  refuses(() => catalogOf([a.endpoint], { cacheTtlSeconds: -1 }), /cacheTtlSeconds/);
});

test('an unknown purpose is refused rather than resolved without a cache', async () => {
  const catalog = catalogOf([fakeService('svc-a').endpoint]);
  await rejectsWithInfo(catalog.target('svc-a', {}, 'tokens' as 'token'), {
    code: 'internal',
    reason: 'invalid_catalog_purpose',
  });
});

test('a real createService behind localService resolves through its own fetch', async () => {
  const keys = await testKeys();
  const service = createService({
    id: 'svc-real',
    title: 'Real',
    version: '2.0.0',
    auth: { jwks: { keys: [keys.k1.publicJwk] }, issuer: 'https://plane.test' },
    capabilities: capabilitiesFor('svc-real'),
    abilities: [mainAbility('svc-real')],
    logger: false,
  });
  const endpoint = localService({
    id: 'svc-real',
    service,
    grants: [{ caller: 'caller-1', scopes: ['svc-real.read'] }],
  });
  const catalog = catalogOf([endpoint]);
  const resolved = await catalog.target('svc-real', {}, 'token');
  assert.equal(resolved.document.version, '2.0.0');
  assert.deepEqual(resolved.document, JSON.parse(JSON.stringify(service.discovery())));
});
