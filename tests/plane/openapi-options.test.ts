// The `openapi` and `publicOrigin` options of createControlPlane: what is accepted, what it
// resolves to, and every refusal naming the option at fault.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createControlPlane } from '../../src/plane/control-plane.ts';
import {
  DEFAULT_OPENAPI_CACHE_TTL_SECONDS,
  resolveOpenApiOptions,
} from '../../src/plane/openapi-options.ts';
import { resolvePublicOrigins } from '../../src/plane/public-origin.ts';
import { memoryRegistryCache } from '../../src/plane/registry-cache.ts';
import { refusedNaming } from '../support/configuration-refusals.ts';
import { testKeys } from '../support/keys.ts';

const BEARER = { bearer: { type: 'http', scheme: 'bearer' } };

test('openapi: false mounts nothing; undefined and {} take the defaults', () => {
  assert.equal(resolveOpenApiOptions(false, 'plane'), undefined);
  for (const option of [undefined, {}]) {
    const resolved = resolveOpenApiOptions(option, 'plane')!;
    assert.equal(resolved.title, 'plane API');
    assert.equal(resolved.cacheTtlSeconds, DEFAULT_OPENAPI_CACHE_TTL_SECONDS);
    assert.ok(resolved.cache, 'a process-local cache by default');
    assert.equal(resolved.security, undefined);
    assert.equal(resolved.securitySchemes, undefined);
    assert.equal(resolved.version, undefined);
  }
  assert.equal(resolveOpenApiOptions({ cache: false }, 'plane')!.cache, undefined);
});

test('openapi: every option is kept as given, as JSON data', () => {
  const cache = memoryRegistryCache();
  const scopes = ['read'];
  const resolved = resolveOpenApiOptions({
    security: [{ bearer: [] }, { oauth: scopes }],
    securitySchemes: {
      ...BEARER,
      oauth: {
        type: 'oauth2',
        flows: {
          clientCredentials: { tokenUrl: 'https://id.example/token', scopes: { read: 'r' } },
        },
      },
    },
    cache,
    cacheTtlSeconds: 5,
    title: 'Orders API',
    version: '3.1.4',
  }, 'plane')!;
  scopes.push('later');
  assert.deepEqual(resolved.security, [{ bearer: [] }, { oauth: ['read'] }]);
  assert.equal(resolved.cache, cache);
  assert.equal(resolved.cacheTtlSeconds, 5);
  assert.equal(resolved.title, 'Orders API');
  assert.equal(resolved.version, '3.1.4');
});

test('openapi: unknown keys and malformed values are refused, naming the field', () => {
  const refused = (option: unknown, ...mentions: string[]) => {
    const error = refusedNaming(() => resolveOpenApiOptions(option, 'plane'), ...mentions);
    assert.match(error.reason ?? '', /invalid_openapi|configuration/);
  };
  refused({ secuirty: [] }, 'unknown option `secuirty`', 'securitySchemes');
  refused('yes', '`openapi`', 'false or an object');
  refused({ security: [{ bearer: [] }] }, '`openapi.security[0]`', 'not in securitySchemes');
  refused({ security: [{ other: [] }], securitySchemes: BEARER }, '"other"');
  refused({ security: { bearer: [] }, securitySchemes: BEARER }, '`openapi.security`');
  refused({ security: [{ bearer: 'read' }], securitySchemes: BEARER }, 'security[0].bearer');
  refused({ securitySchemes: { bearer: { type: 'password' } } }, 'securitySchemes.bearer');
  refused({ securitySchemes: { 'a b': { type: 'http' } } }, '"a b"');
  refused({ cache: {} }, '`openapi.cache`');
  for (const ttl of [0, -1, Infinity, '60']) refused({ cacheTtlSeconds: ttl }, 'cacheTtlSeconds');
  refused({ title: '' }, '`openapi.title`');
  refused({ version: 3 }, '`openapi.version`');
});

test('publicOrigin: origins resolve to a list of distinct URL origins', () => {
  assert.deepEqual(resolvePublicOrigins(undefined), []);
  assert.deepEqual(resolvePublicOrigins('https://api.example.com'), ['https://api.example.com']);
  assert.deepEqual(
    resolvePublicOrigins([
      'HTTPS://API.example.com/',
      'http://localhost:8787',
      'https://api.example.com:443',
    ]),
    ['https://api.example.com', 'http://localhost:8787'],
  );
});

test('publicOrigin: anything but scheme://host[:port] is refused', () => {
  for (
    const value of [
      'https://api.example.com/v1',
      'https://api.example.com?x',
      'https://api.example.com#top',
      'https://api.example.com?',
      'https://api.example.com#',
      'https://api.example.com//',
      'https://user:pw@api.example.com',
      'ftp://api.example.com',
      'api.example.com',
      '',
      42,
      [],
      ['https://ok.example', 'https://bad.example/path'],
    ]
  ) {
    const error = refusedNaming(() => resolvePublicOrigins(value), '`publicOrigin`');
    assert.equal(error.reason, 'invalid_public_origin', String(value));
  }
});

test('createControlPlane refuses a bad openapi or publicOrigin at construction', async () => {
  const { k1 } = await testKeys();
  const base = { signingKeys: [k1.entry], services: [] };
  refusedNaming(
    () => createControlPlane({ ...base, openapi: { cacheTTL: 5 } as never }),
    'unknown option `cacheTTL`',
  );
  refusedNaming(
    () => createControlPlane({ ...base, publicOrigin: 'https://plane.example/api' }),
    '`publicOrigin`',
  );
});
