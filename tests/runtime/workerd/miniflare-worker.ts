/**
 * Starts a Worker from this folder in workerd for a host-driven test: the entry is bundled with
 * esbuild for the Workers platform and served by Miniflare on a real 127.0.0.1 port.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { Miniflare } from 'miniflare';

const here = path.dirname(fileURLToPath(import.meta.url));

/** Bundles `entry` (a file name in this folder) into one ES module for workerd. */
async function bundleWorker(entry: string): Promise<string> {
  const result = await build({
    entryPoints: [path.join(here, entry)],
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'neutral',
    target: 'es2022',
    conditions: ['workerd', 'worker', 'browser', 'import'],
    mainFields: ['module', 'main'],
    external: ['cloudflare:*', 'node:*'],
    logLevel: 'silent',
  });
  return result.outputFiles[0].text;
}

/**
 * Runs `run` with the URL of the Worker bundled from `entry` (JSON `bindings` in its env), then
 * disposes of the Worker whatever `run` did.
 */
export async function withWorker(
  entry: string,
  bindings: Record<string, unknown>,
  run: (url: URL) => Promise<void>,
): Promise<void> {
  const mf = new Miniflare({
    modules: true,
    script: await bundleWorker(entry),
    compatibilityDate: '2026-07-01',
    compatibilityFlags: ['nodejs_compat'],
    bindings,
    host: '127.0.0.1',
    port: 0,
  });
  try {
    await run(await mf.ready);
  } finally {
    await mf.dispose();
  }
}
