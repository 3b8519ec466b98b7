// Lean by default: a Worker holding a control plane without MCP projections, bundled as this
// project bundles Workers (esbuild, workerd conditions), loads no module of the MCP SDK. The SDK
// is reached only through the endpoint's dynamic import, so it lands in a chunk of its own that
// is loaded on the first MCP request of a catalog that publishes projections.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
// deno-lint-ignore no-sloppy-imports
import { WORKERD_BUNDLE_OPTIONS } from '../../../scripts/workerd/bundle-options.mjs';

const ENTRY = fileURLToPath(new URL('./mcp-lean-plane-worker.ts', import.meta.url));
const SDK = /node_modules\/@modelcontextprotocol\/sdk\//;

type Metafile = esbuild.Metafile;

/** The outputs the entry loads without a dynamic import (its static import closure). */
function staticClosure(metafile: Metafile, entry: string): Set<string> {
  const closure = new Set<string>();
  const pending = [entry];
  while (pending.length > 0) {
    const output = pending.pop()!;
    if (closure.has(output)) continue;
    closure.add(output);
    for (const imported of metafile.outputs[output].imports) {
      if (imported.kind === 'import-statement' && !imported.external) pending.push(imported.path);
    }
  }
  return closure;
}

test('MCP lean by default: a plane bundled for workerd without MCP loads no SDK module', {
  timeout: 120_000,
}, async () => {
  const split = await esbuild.build({
    ...WORKERD_BUNDLE_OPTIONS,
    entryPoints: [ENTRY],
    external: ['cloudflare:*', 'node:*'],
    splitting: true,
    outdir: '/virtual-out',
    metafile: true,
    minify: true,
  });
  const metafile = split.metafile!;
  const entry = Object.keys(metafile.outputs).find((path) =>
    metafile.outputs[path].entryPoint !== undefined
  )!;
  const loaded = staticClosure(metafile, entry);
  const sdkInputs = (outputs: Iterable<string>) =>
    [...outputs].flatMap((output) => Object.keys(metafile.outputs[output].inputs)).filter((input) =>
      SDK.test(input)
    );
  assert.deepEqual(sdkInputs(loaded), [], 'no SDK module is loaded by the plane');
  const lazy = Object.keys(metafile.outputs).filter((output) => !loaded.has(output));
  assert.ok(sdkInputs(lazy).length > 10, 'the SDK sits in the lazily loaded chunk');
  const bytes = (outputs: Iterable<string>) =>
    [...outputs].reduce((sum, output) => sum + metafile.outputs[output].bytes, 0);
  const single = await esbuild.build({
    ...WORKERD_BUNDLE_OPTIONS,
    entryPoints: [ENTRY],
    external: ['cloudflare:*', 'node:*'],
    minify: true,
  });
  console.log(
    `# bundle (minified): plane without MCP loads ${bytes(loaded)} bytes; ` +
      `the MCP chunk adds ${bytes(lazy)} bytes; one-file bundle with both ${
        single.outputFiles![0].contents.byteLength
      } bytes`,
  );
});
