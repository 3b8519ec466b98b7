/**
 * `swaggerUiAssets()` on a runtime with `node:fs` (Node, Deno, Bun): it reads the installed
 * `swagger-ui-dist` files whole, and a plane given it serves exactly those bytes.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createControlPlane } from '../../src/plane/control-plane.ts';
import type { ReferenceAssetFiles } from '../../src/plane/mod.ts';
import { testKeys } from '../support/keys.ts';

const PACKAGE = new URL('../../node_modules/swagger-ui-dist/', import.meta.url);

function packageFile(name: string): Uint8Array {
  return new Uint8Array(readFileSync(new URL(name, PACKAGE)));
}

/** Checks one runtime adapter's `swaggerUiAssets` against the installed package. */
export async function assertSwaggerUiAssetsRead(
  swaggerUiAssets: () => () => Promise<ReferenceAssetFiles>,
): Promise<void> {
  const version = JSON.parse(new TextDecoder().decode(packageFile('package.json'))).version;
  assert.equal(version, '5.35.0', 'the dependency svcplane pins');
  const files = await swaggerUiAssets()();
  assert.deepEqual(Object.keys(files).sort(), ['swagger-ui-bundle.js', 'swagger-ui.css']);
  for (const name of ['swagger-ui-bundle.js', 'swagger-ui.css'] as const) {
    const expected = packageFile(name);
    assert.ok(expected.byteLength > 10_000, `${name} is the real file`);
    assert.deepEqual(new Uint8Array(files[name] as Uint8Array), expected, name);
  }
  const { k1 } = await testKeys();
  const plane = createControlPlane({
    signingKeys: [k1.entry],
    services: [],
    openapi: { reference: { assets: swaggerUiAssets() } },
  });
  const served = await plane.fetch(new Request('http://plane.test/reference/swagger-ui-bundle.js'));
  assert.equal(served.status, 200);
  assert.equal(served.headers.get('Content-Type'), 'text/javascript; charset=utf-8');
  const text = await served.text();
  assert.equal(text, new TextDecoder().decode(packageFile('swagger-ui-bundle.js')));
  assert.match(text, /SwaggerUIBundle/);
  const css = await plane.fetch(new Request('http://plane.test/reference/swagger-ui.css'));
  assert.equal(css.headers.get('Content-Type'), 'text/css; charset=utf-8');
  assert.equal((await css.arrayBuffer()).byteLength, packageFile('swagger-ui.css').byteLength);
}
