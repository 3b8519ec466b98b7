import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  DEFAULT_HTTP_CACHE_MAX_AGE_SECONDS,
  DEFAULT_STALE_WHILE_REVALIDATE_SECONDS,
  httpCacheHeaders,
  NO_STORE_HEADERS,
  resolveHttpCache,
} from '../../src/core/http-cache.ts';
import { SvcConfigurationError } from '../../src/core/errors.ts';

function assertRefused(option: unknown, ...mentions: string[]): void {
  assert.throws(() => resolveHttpCache(option, 'plane jwks'), (error: unknown) => {
    assert.ok(error instanceof SvcConfigurationError, `expected SvcConfigurationError: ${error}`);
    assert.ok(error.message.includes('plane jwks'), error.message);
    for (const mention of mentions) assert.ok(error.message.includes(mention), error.message);
    return true;
  });
}

test('cache defaults match the design', () => {
  assert.equal(DEFAULT_HTTP_CACHE_MAX_AGE_SECONDS, 60);
  assert.equal(DEFAULT_STALE_WHILE_REVALIDATE_SECONDS, 300);
});

test('resolveHttpCache: undefined and false disable, true applies the defaults', () => {
  assert.equal(resolveHttpCache(undefined, 'svc'), undefined);
  assert.equal(resolveHttpCache(false, 'svc'), undefined);
  assert.deepEqual(resolveHttpCache(true, 'svc'), {
    maxAgeSeconds: 60,
    staleWhileRevalidateSeconds: 300,
    tags: [],
  });
  assert.deepEqual(resolveHttpCache({}, 'svc'), {
    maxAgeSeconds: 60,
    staleWhileRevalidateSeconds: 300,
    tags: [],
  });
});

test('resolveHttpCache keeps explicit values including zero', () => {
  assert.deepEqual(
    resolveHttpCache({ maxAgeSeconds: 0, staleWhileRevalidateSeconds: 0, tags: ['team-a'] }, 'svc'),
    { maxAgeSeconds: 0, staleWhileRevalidateSeconds: 0, tags: ['team-a'] },
  );
  assert.deepEqual(resolveHttpCache({ maxAgeSeconds: 5, tags: ['a', 'b', 'a'] }, 'svc'), {
    maxAgeSeconds: 5,
    staleWhileRevalidateSeconds: 300,
    tags: ['a', 'b'],
  });
});

test('resolveHttpCache refuses negative, fractional and non-number durations', () => {
  for (const field of ['maxAgeSeconds', 'staleWhileRevalidateSeconds']) {
    for (const value of [-1, 1.5, NaN, Infinity, '60', null, true, 2 ** 40]) {
      assertRefused({ [field]: value }, field);
    }
  }
});

test('resolveHttpCache refuses malformed tags', () => {
  for (
    const tag of [
      '',
      'a,b',
      'a b',
      'a\tb',
      'a\nb',
      'a\u0000b',
      'a\u007fb',
      't'.repeat(129),
      7,
      'タグ',
      'caf\u00e9',
      'a"b',
      'a;b',
    ]
  ) {
    assertRefused({ tags: [tag] }, 'tags[0]');
  }
  assertRefused({ tags: 'svc:jwks' }, 'tags');
  assert.deepEqual(resolveHttpCache({ tags: ['t'.repeat(128)] }, 'svc')?.tags, ['t'.repeat(128)]);
  // Every accepted tag goes into a header as it is.
  const accepted = ['svc:orders', 'team/a_b-c.d', 'v=2', '~x!'];
  const resolved = resolveHttpCache({ tags: accepted }, 'svc');
  assert.deepEqual(resolved?.tags, accepted);
  assert.equal(
    new Headers({ 'Cache-Tag': accepted.join(',') }).get('Cache-Tag'),
    accepted.join(','),
  );
});

test('resolveHttpCache refuses unknown fields and other option types', () => {
  assertRefused({ maxAge: 0 }, 'maxAge');
  assertRefused({ staleWhileRevalidate: 0 }, 'staleWhileRevalidate');
  for (const option of [null, 0, 1, 'yes', [], new Map()]) assertRefused(option);
});

test('httpCacheHeaders: public max-age and stale-while-revalidate', () => {
  assert.deepEqual(httpCacheHeaders(resolveHttpCache(true, 'svc'), []), {
    'Cache-Control': 'public, max-age=60, stale-while-revalidate=300',
  });
  assert.deepEqual(
    httpCacheHeaders(
      resolveHttpCache({ maxAgeSeconds: 30, staleWhileRevalidateSeconds: 0 }, 'p'),
      [],
    ),
    { 'Cache-Control': 'public, max-age=30' },
  );
});

test('httpCacheHeaders lists built-in tags, then user tags, without duplicates', () => {
  const resolved = resolveHttpCache({ tags: ['team-a', 'svc:jwks', 'blue'] }, 'plane');
  assert.deepEqual(httpCacheHeaders(resolved, ['svc:jwks', 'svc:plane']), {
    'Cache-Control': 'public, max-age=60, stale-while-revalidate=300',
    'Cache-Tag': 'svc:jwks,svc:plane,team-a,blue',
  });
  assert.deepEqual(
    httpCacheHeaders(resolveHttpCache(true, 'p'), ['svc:jwks'])['Cache-Tag'],
    'svc:jwks',
  );
});

test('httpCacheHeaders is empty when caching is not enabled', () => {
  assert.deepEqual(httpCacheHeaders(undefined, ['svc:jwks']), {});
  assert.deepEqual(httpCacheHeaders(resolveHttpCache(false, 'p'), ['svc:jwks']), {});
});

test('NO_STORE_HEADERS forbid caching and cannot be altered', () => {
  assert.deepEqual({ ...NO_STORE_HEADERS }, { 'Cache-Control': 'no-store', Pragma: 'no-cache' });
  assert.ok(Object.isFrozen(NO_STORE_HEADERS));
  const response = new Response('{}', { headers: NO_STORE_HEADERS });
  assert.equal(response.headers.get('cache-control'), 'no-store');
  assert.equal(response.headers.get('pragma'), 'no-cache');
});

test('resolved options are frozen so a shared option cannot drift', () => {
  const resolved = resolveHttpCache({ tags: ['a'] }, 'svc')!;
  assert.ok(Object.isFrozen(resolved));
  assert.ok(Object.isFrozen(resolved.tags));
});
