// Runs test files inside workerd: each file is bundled with esbuild (node:test mapped to a shim),
// loaded into Miniflare with nodejs_compat, and its tests are run by one fetch.
import { build } from 'esbuild';
// The .d.mts beside it types it for tsc; Deno's linter reads that pairing as a sloppy import.
// deno-lint-ignore no-sloppy-imports
import { WORKERD_BUNDLE_OPTIONS, WORKERD_COMPATIBILITY_DATE } from './bundle-options.mjs';
import { Miniflare } from 'miniflare';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const shim = path.join(here, 'node-test-shim.js');
const entry = path.join(here, 'entry.js');

/** Bundles one test file into a single ES module for workerd. */
export async function bundleTestFile(file) {
  const result = await build({
    ...WORKERD_BUNDLE_OPTIONS,
    entryPoints: [entry],
    external: [
      'cloudflare:*',
      'node:assert',
      'node:assert/strict',
      'node:async_hooks',
      'node:buffer',
    ],
    plugins: [{
      name: 'svcplane-workerd-test',
      setup(b) {
        b.onResolve({ filter: /^node:test$/ }, () => ({ path: shim }));
        b.onResolve({ filter: /^__TEST_FILE__$/ }, () => ({ path: path.resolve(file) }));
      },
    }],
  });
  return result.outputFiles[0].text;
}

/** Runs one bundled test file in a fresh workerd and returns its per-test results. */
export async function runInWorkerd(file) {
  let script;
  try {
    script = await bundleTestFile(file);
  } catch (error) {
    return [{ name: `${file} (bundle)`, status: 'failed', error: String(error?.message ?? error) }];
  }
  const mf = new Miniflare({
    modules: true,
    script,
    compatibilityDate: WORKERD_COMPATIBILITY_DATE,
    compatibilityFlags: ['nodejs_compat'],
    log: undefined,
  });
  try {
    const response = await mf.dispatchFetch('http://tests.local/');
    const text = await response.text();
    try {
      return JSON.parse(text);
    } catch {
      return [{ name: `${file} (load)`, status: 'failed', error: text.slice(0, 2000) }];
    }
  } catch (error) {
    return [{ name: `${file} (run)`, status: 'failed', error: String(error?.stack ?? error) }];
  } finally {
    await mf.dispose();
  }
}
