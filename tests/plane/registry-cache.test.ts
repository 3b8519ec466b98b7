import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SvcConfigurationError } from '../../src/core/errors.ts';
import {
  memoryRegistryCache,
  type RegistryCache,
  resolveDiscoveryCaches,
  synchronousRead,
} from '../../src/plane/registry-cache.ts';

function fakeClock(start = 1_000_000): { now: () => number; advance: (ms: number) => void } {
  let current = start;
  return { now: () => current, advance: (ms) => void (current += ms) };
}

test('memoryRegistryCache returns what was set until the TTL elapses', async () => {
  const clock = fakeClock();
  const cache = memoryRegistryCache({ now: clock.now });
  await cache.set('k', { id: 'svc-a', n: 1 }, 60);
  assert.deepEqual(await cache.get('k'), { id: 'svc-a', n: 1 });
  clock.advance(59_999);
  assert.deepEqual(await cache.get('k'), { id: 'svc-a', n: 1 });
  clock.advance(1);
  assert.equal(await cache.get('k'), undefined);
});

test('synchronousRead reads a memoryRegistryCache like its get; other caches have none', async () => {
  const clock = fakeClock();
  const cache = memoryRegistryCache({ now: clock.now, maxEntries: 2 });
  const read = synchronousRead(cache);
  assert.ok(read !== undefined);
  await cache.set('k', { n: 1 }, 1);
  const first = read('k');
  assert.deepEqual(first, { n: 1 });
  assert.notEqual(first, read('k'), 'a mutable value is read as a fresh copy');
  await cache.set('other', 'o', 60);
  read('k');
  await cache.set('third', 't', 60);
  assert.equal(await cache.get('other'), undefined, 'a synchronous read counts as a use');
  clock.advance(1000);
  assert.equal(read('k'), undefined, 'expired at its TTL');
  assert.throws(() => read(''), TypeError);
  const foreign: RegistryCache = {
    get: () => Promise.resolve(undefined),
    set: () => Promise.resolve(),
    delete: () => Promise.resolve(),
  };
  assert.equal(synchronousRead(foreign), undefined);
});

test('memoryRegistryCache honours fractional TTLs and a missing key reads undefined', async () => {
  const clock = fakeClock();
  const cache = memoryRegistryCache({ now: clock.now });
  assert.equal(await cache.get('absent'), undefined);
  await cache.set('k', 'v', 0.5);
  clock.advance(499);
  assert.equal(await cache.get('k'), 'v');
  clock.advance(1);
  assert.equal(await cache.get('k'), undefined);
});

test('memoryRegistryCache hands out copies: mutating a read or a written object changes nothing cached', async () => {
  const cache = memoryRegistryCache();
  const written = { scopes: ['a'] };
  await cache.set('k', written, 60);
  written.scopes.push('injected');
  const first = (await cache.get('k')) as { scopes: string[] };
  assert.deepEqual(first, { scopes: ['a'] });
  first.scopes.push('mutated');
  assert.deepEqual(await cache.get('k'), { scopes: ['a'] });
  assert.notEqual(await cache.get('k'), await cache.get('k'));
});

test('memoryRegistryCache keeps deeply frozen plain data by reference, anything else as a copy', async () => {
  const cache = memoryRegistryCache();
  const frozen = Object.freeze({ id: 'svc-a', scopes: Object.freeze(['a', 'b']) });
  await cache.set('frozen', frozen, 60);
  assert.equal(await cache.get('frozen'), frozen, 'immutable: no copy needed');

  const shallow = Object.freeze({ id: 'svc-a', scopes: ['a'] });
  await cache.set('shallow', shallow, 60);
  const read = (await cache.get('shallow')) as { scopes: string[] };
  assert.notEqual(read, shallow);
  shallow.scopes.push('later');
  assert.deepEqual(read.scopes, ['a'], 'a nested mutable array was copied at write time');

  const withAccessor = Object.freeze(
    Object.defineProperty({}, 'x', { get: () => 1, enumerable: true }),
  );
  await cache.set('accessor', withAccessor, 60);
  assert.notEqual(await cache.get('accessor'), withAccessor);
  assert.deepEqual(await cache.get('accessor'), { x: 1 });

  const withUndefined = Object.freeze({ a: 1, b: undefined });
  await cache.set('undefined', withUndefined, 60);
  assert.deepEqual(await cache.get('undefined'), { a: 1 }, 'reads back exactly as JSON would');
});

test('memoryRegistryCache is bounded and evicts the least recently used entry', async () => {
  const cache = memoryRegistryCache({ maxEntries: 2 });
  await cache.set('a', 1, 60);
  await cache.set('b', 2, 60);
  assert.equal(await cache.get('a'), 1); // `a` is now the most recently used
  await cache.set('c', 3, 60);
  assert.equal(await cache.get('b'), undefined);
  assert.equal(await cache.get('a'), 1);
  assert.equal(await cache.get('c'), 3);
});

test('memoryRegistryCache evicts like a reference LRU over any mix of reads, writes and deletes', async () => {
  const cache = memoryRegistryCache({ maxEntries: 3 });
  // The reference: keys from least to most recently used.
  const order: string[] = [];
  const values = new Map<string, number>();
  const touch = (key: string) => {
    order.splice(order.indexOf(key), 1);
    order.push(key);
  };
  let seed = 7;
  const next = (n: number) => (seed = (seed * 1103515245 + 12345) % 2147483648) % n;
  for (let step = 0; step < 3000; step++) {
    const key = 'abcde'[next(5)];
    const operation = next(10);
    if (operation < 3) {
      await cache.set(key, step, 600);
      if (values.has(key)) order.splice(order.indexOf(key), 1);
      else if (order.length === 3) values.delete(order.shift()!);
      order.push(key);
      values.set(key, step);
    } else if (operation < 4) {
      await cache.delete(key);
      if (values.delete(key)) order.splice(order.indexOf(key), 1);
    } else {
      assert.equal(await cache.get(key), values.get(key), `step ${step}: ${key}`);
      if (values.has(key)) touch(key);
    }
  }
});

test('memoryRegistryCache evicts expired entries before live ones when full', async () => {
  const clock = fakeClock();
  const cache = memoryRegistryCache({ maxEntries: 2, now: clock.now });
  await cache.set('live', 1, 600);
  await cache.set('short', 2, 1);
  clock.advance(2000);
  await cache.set('new', 3, 600);
  assert.equal(await cache.get('live'), 1);
  assert.equal(await cache.get('new'), 3);
});

test('memoryRegistryCache delete removes an entry and overwriting replaces value and TTL', async () => {
  const clock = fakeClock();
  const cache = memoryRegistryCache({ now: clock.now });
  await cache.set('k', 1, 1);
  await cache.set('k', 2, 100);
  clock.advance(5000);
  assert.equal(await cache.get('k'), 2);
  await cache.delete('k');
  assert.equal(await cache.get('k'), undefined);
  await cache.delete('never-set');
});

test('memoryRegistryCache refuses invalid TTLs, values and keys', async () => {
  const cache = memoryRegistryCache();
  for (const ttl of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, 40_000_000]) {
    await assert.rejects(cache.set('k', 1, ttl), TypeError, `ttl ${ttl}`);
  }
  await assert.rejects(cache.set('k', undefined, 60), TypeError);
  await assert.rejects(cache.set('k', () => 1, 60), TypeError);
  await assert.rejects(cache.get(''), TypeError);
  assert.equal(await cache.get('k'), undefined);
});

test('memoryRegistryCache refuses invalid options with a configuration error naming the field', () => {
  for (const maxEntries of [0, -1, 1.5, Number.NaN, '10']) {
    assert.throws(
      () => memoryRegistryCache({ maxEntries: maxEntries as number }),
      (error: unknown) =>
        error instanceof SvcConfigurationError && /maxEntries/.test(error.message),
    );
  }
  assert.throws(
    () => memoryRegistryCache({ now: 5 as unknown as () => number }),
    SvcConfigurationError,
  );
});

test('resolveDiscoveryCaches: undefined gives one shared process-local cache for every purpose', async () => {
  const caches = resolveDiscoveryCaches(undefined);
  assert.ok(caches.token !== undefined);
  assert.equal(caches.token, caches.openapi);
  assert.equal(caches.token, caches.default);
  await caches.token.set('k', 1, 60);
  assert.equal(await caches.default!.get('k'), 1);
  const other = resolveDiscoveryCaches(undefined);
  assert.equal(await other.default!.get('k'), undefined, 'each resolution builds its own cache');
});

test('resolveDiscoveryCaches: false resolves fresh for every purpose', () => {
  assert.deepEqual(resolveDiscoveryCaches(false), {
    token: undefined,
    openapi: undefined,
    default: undefined,
  });
});

test('resolveDiscoveryCaches: one shared registry cache serves every purpose', () => {
  const shared = memoryRegistryCache();
  const caches = resolveDiscoveryCaches(shared);
  assert.equal(caches.token, shared);
  assert.equal(caches.openapi, shared);
  assert.equal(caches.default, shared);
});

test('resolveDiscoveryCaches: the keyed form routes each purpose to its own cache', () => {
  const token = memoryRegistryCache();
  const openapi = memoryRegistryCache();
  const fallback = memoryRegistryCache();
  const caches = resolveDiscoveryCaches({ token, openapi, default: fallback });
  assert.equal(caches.token, token);
  assert.equal(caches.openapi, openapi);
  assert.equal(caches.default, fallback);
});

test('resolveDiscoveryCaches: keyed form falls back to default, false disables one purpose', () => {
  const fallback = memoryRegistryCache();
  const caches = resolveDiscoveryCaches({ token: false, default: fallback });
  assert.equal(caches.token, undefined);
  assert.equal(caches.openapi, fallback);
  assert.equal(caches.default, fallback);

  const noDefault = resolveDiscoveryCaches({ default: false, openapi: fallback });
  assert.equal(noDefault.default, undefined);
  assert.equal(noDefault.token, undefined);
  assert.equal(noDefault.openapi, fallback);

  const implicit = resolveDiscoveryCaches({ openapi: false });
  assert.ok(implicit.default !== undefined, 'omitted default is a process-local cache');
  assert.equal(implicit.token, implicit.default);
  assert.equal(implicit.openapi, undefined);
});

test('resolveDiscoveryCaches refuses unknown keys and values that are not caches', () => {
  const refuses = (option: unknown, pattern: RegExp) =>
    assert.throws(
      () => resolveDiscoveryCaches(option as RegistryCache),
      (error: unknown) => error instanceof SvcConfigurationError && pattern.test(error.message),
    );
  refuses({ tokens: memoryRegistryCache() }, /tokens/);
  refuses({ token: true }, /token/);
  refuses({ default: { get() {} } }, /default/);
  refuses(true, /discoveryCache/);
  refuses(null, /discoveryCache/);
  refuses([], /discoveryCache/);
});
