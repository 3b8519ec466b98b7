// The API reference page on Workers: Swagger UI's files imported as text modules (what a
// wrangler `Text` rule produces: the files become modules of their own beside the bundle), in a
// Worker without nodejs_compat, serve the page and exactly the installed package's bytes.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { Miniflare } from 'miniflare';
// deno-lint-ignore no-sloppy-imports
import * as workerdBundle from '../../../scripts/workerd/bundle-options.mjs';
import { generateSigningKeyEntry } from '../../../src/plane/signing-keys.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const PACKAGE = path.resolve(here, '../../../node_modules/swagger-ui-dist');
const FILES = ['swagger-ui-bundle.js', 'swagger-ui.css'] as const;

/** The Worker, its `swagger-ui-dist/<file>` imports left as modules named `./<file>`. */
async function bundleWorker(): Promise<string> {
  const result = await build({
    ...workerdBundle.WORKERD_BUNDLE_OPTIONS,
    entryPoints: [path.join(here, 'reference-plane-worker.ts')],
    external: ['cloudflare:*', 'node:*'],
    plugins: [{
      name: 'swagger-ui-text-modules',
      setup(b) {
        b.onResolve({ filter: /^swagger-ui-dist\// }, (args) => ({
          path: `./${args.path.slice('swagger-ui-dist/'.length)}`,
          external: true,
        }));
      },
    }],
  });
  return result.outputFiles[0].text;
}

test("reference page on workerd: Swagger UI's files as text modules, served as installed", {
  timeout: 120_000,
}, async () => {
  const root = '/worker';
  const mf = new Miniflare({
    host: '127.0.0.1',
    port: 0,
    modulesRoot: root,
    modules: [
      { type: 'ESModule', path: `${root}/worker.js`, contents: await bundleWorker() },
      ...FILES.map((name) => ({
        type: 'Text' as const,
        path: `${root}/${name}`,
        contents: readFileSync(path.join(PACKAGE, name), 'utf8'),
      })),
    ],
    compatibilityDate: workerdBundle.WORKERD_COMPATIBILITY_DATE,
    bindings: { SIGNING_KEY: await generateSigningKeyEntry({ kid: 'reference-k1' }) },
  });
  try {
    const page = await mf.dispatchFetch('http://plane.test/reference');
    assert.equal(page.status, 200);
    assert.equal(page.headers.get('Content-Type'), 'text/html; charset=utf-8');
    assert.match(page.headers.get('Content-Security-Policy') ?? '', /default-src 'none'/);
    assert.match(await page.text(), /src="reference\/swagger-ui-bundle\.js"/);
    for (const name of FILES) {
      const served = await mf.dispatchFetch(`http://plane.test/reference/${name}`);
      assert.equal(served.status, 200, name);
      assert.equal(
        Buffer.from(await served.arrayBuffer()).equals(readFileSync(path.join(PACKAGE, name))),
        true,
        `${name}: the installed file's bytes`,
      );
    }
    const document = await mf.dispatchFetch('http://plane.test/openapi.json');
    assert.equal(document.status, 200);
  } finally {
    await mf.dispose();
  }
});
