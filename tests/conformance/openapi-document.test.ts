// Contract "Control-plane routes" (`GET /openapi.json`), "REST rules" r2 and r5, "Catalog
// rules" and "Versioning" r3: the plane's OpenAPI 3.2 document, judged by two outside validators
// (in tests/runtime/<runtime>/openapi-validators.test.ts: workerd cannot run them), identical for every caller, cached as the option says, and failing
// closed when the catalog cannot be built.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ControlPlaneOptions } from '../../src/plane/control-plane-options.ts';
import { memoryRegistryCache, type RegistryCache } from '../../src/plane/registry-cache.ts';
import { createPlaneDeployment, PLANE_URL, readResponse } from './plane-fixture.ts';
import { assertReadResponseMatchesOpenApi } from '../support/openapi-response-check.ts';

// deno-lint-ignore no-explicit-any
type Json = any;

const OPENAPI_URL = `${PLANE_URL}/openapi.json`;
const SECURED = {
  security: [{ fixtureBearer: [] }],
  securitySchemes: {
    fixtureBearer: { type: 'http', scheme: 'bearer', description: 'Invocation credential' },
  },
} as const;

/** The fixture deployment with the REST-rich svc-r, and its document as bytes and JSON. */
async function deployment(plane: Partial<ControlPlaneOptions> = {}) {
  // `openapi: {}`: the fixture's own default declares its bearer middleware.
  const fx = await createPlaneDeployment({ restService: true, plane: { openapi: {}, ...plane } });
  return {
    fx,
    async openapi(headers: HeadersInit = {}) {
      const response = await fx.plane.fetch(new Request(OPENAPI_URL, { headers }));
      const text = await response.text();
      return { response, text, document: JSON.parse(text) as Json };
    },
  };
}

/** A registry cache recording its operations. */
function recordingCache(): RegistryCache & { operations: string[] } {
  const inner = memoryRegistryCache();
  const operations: string[] = [];
  return {
    operations,
    get: (key) => (operations.push(`get ${key}`), inner.get(key)),
    set: (key, value, ttl) => (operations.push(`set ${key} ${ttl}`), inner.set(key, value, ttl)),
    delete: (key) => (operations.push(`delete ${key}`), inner.delete(key)),
  };
}

test('GET /openapi.json serves the OpenAPI 3.2 document of the published REST routes', async () => {
  const { openapi } = await deployment();
  const { response, document } = await openapi();
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('Content-Type'), 'application/json');
  assert.ok(response.headers.get('X-Request-Id'));
  assert.equal(document.openapi, '3.2.0');
  assert.deepEqual(Object.keys(document.paths), [
    '/bad-output',
    '/fail',
    '/fail-shaped',
    '/internal/whoami',
    '/items/search',
    '/items/{id}',
    '/notes',
    '/notes/search',
    '/notes/{noteId}',
    '/notes/{noteId}/outline',
    '/pages/{page}',
    '/sleep',
    '/svc-b/whoami',
    '/svc-c/whoami',
    '/svc-d/whoami',
    '/whoami',
  ]);
  assert.deepEqual(Object.keys(document.paths['/notes/{noteId}']), [
    'get',
    'post',
    'put',
    'patch',
    'delete',
  ]);
  assert.ok(document.paths['/notes/search'].query);
  assert.equal(document.info.title, 'svc-plane API');
});

test('operation ids are unique and every path variable has its required parameter', async () => {
  for (const plane of [{}, { openapi: SECURED }]) {
    const { document } = await (await deployment(plane)).openapi();
    const ids: string[] = [];
    for (const [path, item] of Object.entries(document.paths as Record<string, Json>)) {
      const variables = [...path.matchAll(/\{([^}]+)\}/g)].map((match) => match[1]);
      for (const operation of Object.values(item) as Json[]) {
        ids.push(operation.operationId);
        const declared = (operation.parameters ?? [])
          .filter((parameter: Json) => parameter.in === 'path' && parameter.required === true)
          .map((parameter: Json) => parameter.name);
        assert.deepEqual(declared, variables, operation.operationId);
      }
    }
    assert.equal(new Set(ids).size, ids.length, `duplicate operationId in ${ids}`);
  }
});

test('REST r3: a path variable is a string the field constrains; both answers match the document', async () => {
  const { fx, openapi } = await deployment();
  const { document } = await openapi();
  const found = await fx.rest('GET', '/pages/12', { bearer: 't-alice' });
  assert.equal(found.status, 200);
  assert.deepEqual(found.body, { page: 12, noteIds: [] });
  assertReadResponseMatchesOpenApi(document, 'GET', '/pages/12', found);
  const calls = fx.count('calls', 'svc-r.notes#page');
  const refused = await fx.rest('GET', '/pages/twelve', { bearer: 't-alice' });
  assert.equal(refused.status, 422);
  assert.equal(refused.body.code, 'ability_validation');
  assertReadResponseMatchesOpenApi(document, 'GET', '/pages/twelve', refused);
  assert.equal(fx.count('calls', 'svc-r.notes#page'), calls, 'the handler never ran');
});

test('REST-12 GET /openapi.json: path fields leave the body as required path parameters; no security is invented', async () => {
  const { document, text } = await (await deployment()).openapi();
  const update = document.paths['/items/{id}'].post;
  assert.deepEqual(
    update.parameters.filter((parameter: Json) => parameter.in === 'path'),
    [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
  );
  const body = update.requestBody.content['application/json'].schema;
  assert.equal(Object.hasOwn(body.properties, 'id'), false);
  assert.deepEqual(body.required, ['name']);
  assert.deepEqual(Object.keys(update.responses).filter((status) => status < '300'), ['201']);
  // Without openapi.security: no security requirement, no scheme, no 401, anywhere.
  assert.equal(document.security, undefined);
  assert.equal(document.components.securitySchemes, undefined);
  assert.ok(!text.includes('"security"'));
  assert.ok(!text.includes('"securitySchemes"'));
  assert.ok(!text.includes('"401"'));
  // With it: exactly what was configured, once, at the top.
  const secured = (await (await deployment({ openapi: SECURED })).openapi()).document;
  assert.deepEqual(secured.security, [{ fixtureBearer: [] }]);
  assert.deepEqual(secured.components.securitySchemes, SECURED.securitySchemes);
  assert.ok(secured.paths['/items/{id}'].post.responses['401']);
});

test('REG-05 (OpenAPI) /openapi.json is byte-identical for t-alice, t-bob, t-robot and no caller', async () => {
  const { openapi } = await deployment({ openapi: SECURED });
  const texts = [];
  for (const credential of ['t-alice', 't-bob', 't-robot']) {
    texts.push((await openapi({ Authorization: `Bearer ${credential}` })).text);
  }
  texts.push((await openapi()).text);
  assert.equal(new Set(texts).size, 1);
  // And across replicas that generated it separately (no shared cache).
  const other = await deployment({ openapi: { ...SECURED, cache: false } });
  assert.equal((await other.openapi({ Authorization: 'Bearer t-bob' })).text, texts[0]);
});

test('GET /openapi.json honours httpCache with the svc:openapi tag; without it no cache headers', async () => {
  const cached = await deployment({ httpCache: { maxAgeSeconds: 30, tags: ['fixture'] } });
  const { response } = await cached.openapi();
  assert.equal(
    response.headers.get('Cache-Control'),
    'public, max-age=30, stale-while-revalidate=300',
  );
  assert.equal(response.headers.get('Cache-Tag'), 'svc:openapi,fixture');
  const plain = await (await deployment()).openapi();
  assert.equal(plain.response.headers.get('Cache-Control'), null);
  assert.equal(plain.response.headers.get('Cache-Tag'), null);
});

test('openapi.cache keeps the generated bytes for cacheTtlSeconds; later requests discover nothing', async () => {
  const cache = recordingCache();
  const { fx, openapi } = await deployment({ openapi: { cache, cacheTtlSeconds: 42 } });
  const first = await openapi();
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.deepEqual(cache.operations, ['get svc:openapi:v1', 'set svc:openapi:v1 42']);
  const discovered = fx.discoveryRequests('svc-a').length;
  const second = await openapi();
  assert.equal(second.text, first.text);
  assert.equal(fx.discoveryRequests('svc-a').length, discovered, 'served from the cache');
  // `cache: false`: generated (and discovered) for every request.
  const fresh = await deployment({ openapi: { cache: false } });
  await fresh.openapi();
  const before = fresh.fx.discoveryRequests('svc-a').length;
  await fresh.openapi();
  assert.equal(fresh.fx.discoveryRequests('svc-a').length, before + 1);
});

test('a target whose discovery fails is left out, and that document is not cached', async () => {
  const cache = recordingCache();
  const { fx, openapi } = await deployment({ openapi: { cache } });
  fx.stop('svc-r');
  const partial = await openapi();
  assert.equal(partial.response.status, 200);
  assert.ok(!Object.keys(partial.document.paths).includes('/notes'));
  assert.ok(Object.keys(partial.document.paths).includes('/items/{id}'));
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.deepEqual(cache.operations, ['get svc:openapi:v1']);
  fx.start('svc-r');
  const whole = await openapi();
  assert.ok(Object.keys(whole.document.paths).includes('/notes'));
});

test('a catalog that cannot be built fails closed: 500 problem, nothing generated', async () => {
  const { fx } = await deployment({
    services: () => {
      throw new Error('registry down');
    },
  });
  const read = await readResponse(await fx.plane.fetch(new Request(OPENAPI_URL)));
  assert.equal(read.status, 500);
  assert.equal(read.headers.get('Content-Type'), 'application/problem+json');
  assert.equal(read.body.code, 'internal');
  assert.equal(read.body.reason, 'catalog_unavailable');
  assert.ok(!JSON.stringify(read.body).includes('registry down'));
});

test('openapi: false leaves /openapi.json unmounted', async () => {
  const { fx } = await deployment({ openapi: false });
  const read = await readResponse(await fx.plane.fetch(new Request(OPENAPI_URL)));
  assert.equal(read.status, 404);
  assert.equal(read.headers.get('Content-Type'), 'application/problem+json');
});

test('publicOrigin becomes the document servers, as origins', async () => {
  const { document } = await (await deployment({
    publicOrigin: ['https://API.fixture.test/', 'http://127.0.0.1:8787'],
  })).openapi();
  assert.deepEqual(document.servers, [
    { url: 'https://api.fixture.test' },
    { url: 'http://127.0.0.1:8787' },
  ]);
});
