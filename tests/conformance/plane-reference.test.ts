// The plane's API reference page (`openapi.reference`): the page, its start script and Swagger
// UI's files from an in-memory asset source, under a strict CSP with `nosniff`; the script loads
// the plane's own document; only GET and HEAD; unknown paths the plane's 404; its paths are the
// plane's (no REST route or broker takes them); and every misconfiguration refused at
// construction. The page in a real browser: tests/runtime/node/reference-browser.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createControlPlane } from '../../src/plane/control-plane.ts';
import type { ControlPlaneOptions } from '../../src/plane/control-plane-options.ts';
import type { ReferenceAssetFiles, ReferenceAssets } from '../../src/plane/mod.ts';
import { refusedNaming } from '../support/configuration-refusals.ts';
import { testKeys } from '../support/keys.ts';
import { createPlaneDeployment, PLANE_URL } from './plane-fixture.ts';

const BUNDLE = 'window.SwaggerUIBundle = function () { /* \u00e9 */ };\n';
const CSS = '.swagger-ui { color: #3b4151; }\n';

/** An asset record as Workers text imports give one, with the bundle as bytes to cover both. */
function assetRecord(): ReferenceAssetFiles {
  return { 'swagger-ui-bundle.js': new TextEncoder().encode(BUNDLE), 'swagger-ui.css': CSS };
}

/** The fixture plane with the REST-rich service and a reference page. */
async function deployment(reference: Record<string, unknown> = {}, plane: object = {}) {
  return await createPlaneDeployment({
    restService: true,
    plane: {
      openapi: { title: 'Notes <&> API', reference: { assets: assetRecord(), ...reference } },
      publicOrigin: 'https://api.example.com',
      ...plane,
    } as Partial<ControlPlaneOptions>,
  });
}

async function get(
  fx: { plane: { fetch(request: Request): Promise<Response> } },
  path: string,
  init: RequestInit = {},
): Promise<{ response: Response; text: string }> {
  const response = await fx.plane.fetch(new Request(`${PLANE_URL}${path}`, init));
  return { response, text: await response.text() };
}

function directives(policy: string | null): Map<string, string[]> {
  assert.ok(policy !== null, 'a Content-Security-Policy header');
  return new Map(
    policy.split(';').map((part) => {
      const [name, ...values] = part.trim().split(/\s+/);
      return [name, values];
    }),
  );
}

function assertPageHeaders(response: Response, label: string): void {
  const csp = directives(response.headers.get('Content-Security-Policy'));
  assert.deepEqual(csp.get('default-src'), ["'none'"], label);
  assert.deepEqual(csp.get('script-src'), ["'self'"], label);
  assert.deepEqual(csp.get('style-src'), ["'self'"], label);
  assert.deepEqual(csp.get('img-src'), ["'self'", 'data:'], label);
  assert.deepEqual(csp.get('connect-src'), ["'self'", 'https://api.example.com'], label);
  assert.deepEqual(csp.get('frame-ancestors'), ["'none'"], label);
  assert.deepEqual(csp.get('base-uri'), ["'none'"], label);
  assert.equal(response.headers.get('X-Content-Type-Options'), 'nosniff', label);
  assert.ok(response.headers.get('X-Request-Id'), label);
}

function assertProblem(response: Response, text: string, status: number, reason: string): void {
  assert.equal(response.status, status);
  assert.equal(response.headers.get('Content-Type'), 'application/problem+json');
  const body = JSON.parse(text);
  assert.equal(body.status, status);
  assert.equal(body.reason, reason);
  assert.equal(body.requestId, response.headers.get('X-Request-Id'));
}

/** The document URL the start script hands Swagger UI, resolved as the browser would. */
function documentUrlOf(script: string, pageUrl: string): string {
  const match = /url: new URL\(("[^"]*"), document\.baseURI\)\.href/.exec(script);
  assert.ok(match !== null, script);
  return new URL(JSON.parse(match[1]), pageUrl).href;
}

test('reference: GET /reference serves the HTML page under a strict CSP, with no inline script', async () => {
  const fx = await deployment();
  const { response, text } = await get(fx, '/reference');
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('Content-Type'), 'text/html; charset=utf-8');
  assert.equal(response.headers.get('Cache-Control'), 'no-cache');
  assertPageHeaders(response, 'page');
  assert.match(text, /^<!doctype html>/);
  assert.match(text, /<title>Notes &lt;&amp;&gt; API: API reference<\/title>/);
  assert.match(text, /<link rel="stylesheet" href="reference\/swagger-ui\.css">/);
  const scripts = [...text.matchAll(/<script([^>]*)>([^<]*)<\/script>/g)];
  assert.deepEqual(scripts.map((script) => script[1]), [
    ' src="reference/swagger-ui-bundle.js"',
    ' src="reference/init.js"',
  ]);
  assert.ok(scripts.every((script) => script[2] === ''), 'no inline script');
  assert.doesNotMatch(text, /https?:\/\//, 'nothing fetched from elsewhere');
  assert.doesNotMatch(text, /\sstyle=/, 'no inline style');
});

test("reference: init.js starts Swagger UI on the plane's own OpenAPI document, without the validator", async () => {
  const fx = await deployment();
  const { response, text } = await get(fx, '/reference/init.js');
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('Content-Type'), 'text/javascript; charset=utf-8');
  assertPageHeaders(response, 'init.js');
  assert.match(text, /validatorUrl: null/);
  assert.match(text, /queryConfigEnabled: false/);
  assert.doesNotMatch(text, /https?:\/\//);
  const documentUrl = documentUrlOf(text, `${PLANE_URL}/reference`);
  assert.equal(documentUrl, `${PLANE_URL}/openapi.json`);
  const document = await fx.plane.fetch(new Request(documentUrl));
  assert.equal(document.status, 200);
  assert.equal((await document.json()).info.title, 'Notes <&> API');
});

test('reference: a page below a prefix names its files and the document relative to itself', async () => {
  const fx = await deployment({ path: '/docs/api/ref' });
  const page = await get(fx, '/docs/api/ref');
  assert.equal(page.response.status, 200);
  const sources = [...page.text.matchAll(/(?:src|href)="([^"]+)"/g)]
    .map((match) => match[1])
    .filter((source) => source !== 'data:,')
    .map((source) => new URL(source, `${PLANE_URL}/docs/api/ref`).pathname);
  assert.deepEqual(sources, [
    '/docs/api/ref/swagger-ui.css',
    '/docs/api/ref/swagger-ui-bundle.js',
    '/docs/api/ref/init.js',
  ]);
  const init = await get(fx, '/docs/api/ref/init.js');
  assert.equal(documentUrlOf(init.text, `${PLANE_URL}/docs/api/ref`), `${PLANE_URL}/openapi.json`);
  // The plane mounted below a prefix of a larger app: the same relative URLs still land on it.
  assert.equal(
    documentUrlOf(init.text, 'https://host.example/plane/docs/api/ref'),
    'https://host.example/plane/openapi.json',
  );
  assert.equal(
    (await get(fx, '/reference')).response.status,
    404,
    'the default path is not served',
  );
});

test("reference: Swagger UI's files are served from the asset record with their media types, cached by ETag", async () => {
  const fx = await deployment();
  const bundle = await get(fx, '/reference/swagger-ui-bundle.js');
  assert.equal(bundle.response.status, 200);
  assert.equal(bundle.response.headers.get('Content-Type'), 'text/javascript; charset=utf-8');
  assert.equal(bundle.text, BUNDLE);
  assertPageHeaders(bundle.response, 'bundle');
  const css = await get(fx, '/reference/swagger-ui.css');
  assert.equal(css.response.headers.get('Content-Type'), 'text/css; charset=utf-8');
  assert.equal(css.text, CSS);
  assert.equal(css.response.headers.get('Cache-Control'), 'public, max-age=3600');
  const etag = css.response.headers.get('ETag');
  assert.match(etag ?? '', /^"[0-9a-f]{32}"$/);
  assert.notEqual(bundle.response.headers.get('ETag'), etag, 'one tag per file');
  // Served again, the same bytes (a body is never consumed by the first answer).
  assert.equal((await get(fx, '/reference/swagger-ui.css')).text, CSS);
  const revalidated = await get(fx, '/reference/swagger-ui.css', {
    headers: { 'If-None-Match': `"other", ${etag}` },
  });
  assert.equal(revalidated.response.status, 304);
  assert.equal(revalidated.text, '');
  assert.equal(revalidated.response.headers.get('ETag'), etag);
  const changed = await get(fx, '/reference/swagger-ui.css', {
    headers: { 'If-None-Match': '"other"' },
  });
  assert.equal(changed.response.status, 200);
  assert.equal(changed.text, CSS);
});

test('reference: HEAD answers the headers of GET with no body', async () => {
  const fx = await deployment();
  for (const path of ['/reference', '/reference/init.js', '/reference/swagger-ui.css']) {
    const head = await get(fx, path, { method: 'HEAD' });
    const full = await get(fx, path);
    assert.equal(head.response.status, 200, path);
    assert.equal(head.text, '', path);
    assert.equal(
      head.response.headers.get('Content-Type'),
      full.response.headers.get('Content-Type'),
      path,
    );
    assertPageHeaders(head.response, path);
  }
});

test("reference: other methods are 405 with Allow, unknown paths below the page the plane's 404", async () => {
  const fx = await deployment();
  for (const [method, path] of [['POST', '/reference'], ['PUT', '/reference/swagger-ui.css']]) {
    const { response, text } = await get(fx, path, { method, body: 'x' });
    assertProblem(response, text, 405, 'method_not_allowed');
    assert.equal(response.headers.get('Allow'), 'GET, HEAD');
  }
  for (
    const path of [
      '/reference/',
      '/reference/index.html',
      '/reference/swagger-ui-bundle.js.map',
      '/reference/init.js/x',
    ]
  ) {
    const { response, text } = await get(fx, path);
    assertProblem(response, text, 404, 'not_found');
  }
});

test('reference: no page is served unless configured', async () => {
  const fx = await createPlaneDeployment({ restService: true });
  for (const path of ['/reference', '/reference/init.js', '/reference/swagger-ui.css']) {
    const { response, text } = await get(fx, path);
    assertProblem(response, text, 404, 'not_found');
  }
});

test('reference: an asset getter is called once, and again after it failed', async () => {
  let calls = 0;
  const assets: ReferenceAssets = () => {
    calls++;
    return calls === 1
      ? Promise.reject(new Error('disk not ready'))
      : Promise.resolve(assetRecord());
  };
  const fx = await deployment({ assets });
  assert.equal((await get(fx, '/reference')).response.status, 200);
  assert.equal(calls, 0, 'the page itself needs no asset');
  const failed = await get(fx, '/reference/swagger-ui.css');
  assert.equal(failed.response.status, 500);
  assert.equal(JSON.parse(failed.text).code, 'internal');
  assert.doesNotMatch(failed.text, /disk not ready/, 'the cause goes to the log, not the page');
  assert.equal((await get(fx, '/reference/swagger-ui.css')).text, CSS);
  assert.equal((await get(fx, '/reference/swagger-ui-bundle.js')).text, BUNDLE);
  assert.equal(calls, 2);
  assert.ok(
    fx.events.some((event) => event.level === 'error' && JSON.stringify(event).includes('disk')),
    'the failure is logged',
  );
});

test('reference: a getter resolving to something else than the two files is a 500', async () => {
  const fx = await deployment({
    assets: () => Promise.resolve({ 'swagger-ui.css': CSS } as ReferenceAssetFiles),
  });
  const { response, text } = await get(fx, '/reference/swagger-ui.css');
  assert.equal(response.status, 500, text);
});

test("reference: its paths are the plane's: REST routes there are left out, others still served", async () => {
  // svc-r declares GET /notes, GET /notes/{noteId} and GET /pages/{page}.
  const fx = await deployment({ path: '/notes' });
  const document = await fx.openapi();
  assert.equal(document.paths?.['/notes']?.get, undefined, 'GET /notes is the page now');
  assert.ok(document.paths?.['/notes/{noteId}'], 'the rest of svc-r is still described');
  const page = await get(fx, '/notes');
  assert.equal(page.response.headers.get('Content-Type'), 'text/html; charset=utf-8');
  const init = await get(fx, '/notes/init.js');
  assert.match(init.text, /SwaggerUIBundle/, '/notes/{noteId} does not answer init.js');
  const note = await fx.rest('GET', '/notes/n-1', { bearer: 't-alice' });
  assert.notEqual(note.status, 404, 'a REST route beside the page still answers');
  assert.equal(note.headers.get('Content-Security-Policy'), null);
});

test('reference: reference: true and a missing asset source are refused with the line to write', async () => {
  const { k1 } = await testKeys();
  const base = { signingKeys: [k1.entry], services: [] };
  for (const reference of [true, {}, { path: '/docs' }, { assets: true }, { assets: 'bundle' }]) {
    const error = refusedNaming(
      () => createControlPlane({ ...base, openapi: { reference: reference as never } }),
      '`openapi.reference',
      'reference: { assets: swaggerUiAssets() }',
      '`svcplane/node`',
      'text modules',
    );
    assert.equal(error.reason, 'invalid_openapi', JSON.stringify(reference));
  }
});

test('reference: malformed asset records and paths, and paths of the plane, are refused at construction', async () => {
  const { k1 } = await testKeys();
  const base = { signingKeys: [k1.entry], services: [] };
  const plane = (reference: unknown, more: object = {}) =>
    createControlPlane({ ...base, ...more, openapi: { reference: reference as never } });
  const assets = assetRecord();
  refusedNaming(
    () => plane({ assets: { 'swagger-ui.css': CSS } }),
    "assets['swagger-ui-bundle.js']",
  );
  refusedNaming(
    () => plane({ assets: { ...assets, 'swagger-ui.css': '' } }),
    "assets['swagger-ui.css']",
  );
  refusedNaming(
    () => plane({ assets: { ...assets, 'swagger-ui.css': 42 } }),
    "assets['swagger-ui.css']",
  );
  refusedNaming(
    () => plane({ assets: { ...assets, 'index.html': '<p>' } }),
    'unknown option',
    'index.html',
  );
  refusedNaming(() => plane({ assets, title: 'x' }), 'unknown option `title`');
  for (
    const path of ['reference', '/reference/', '/', '/a//b', '/a/../b', '/a b', '/:id', '/a/*', 7]
  ) {
    refusedNaming(() => plane({ assets, path }), '`openapi.reference.path`', 'literal path');
  }
  for (const path of ['/openapi.json', '/mcp', '/rpc', '/.well-known/svc/jwks.json']) {
    refusedNaming(() => plane({ assets, path }), '`openapi.reference.path`', path);
  }
  refusedNaming(
    () => plane({ assets }, { rpc: { path: '/reference/init.js' } }),
    '`rpc`',
    '/reference/init.js',
  );
  // Beside the page, elsewhere, is fine.
  assert.ok(plane({ assets, path: '/api/mcp' }));
  assert.ok(plane({ assets }, { rpc: { path: '/reference-rpc' } }));
});
