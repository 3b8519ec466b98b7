/**
 * Starts one Worker from this folder in workerd for a host-driven test: the entry is bundled with
 * esbuild for the Workers platform and served by Miniflare on a real 127.0.0.1 port, with
 * `nodejs_compat` (these Workers share fixtures that assert with `node:assert`).
 */
import { withWorkers } from './miniflare-workers.ts';

/**
 * Runs `run` with the URL of the Worker bundled from `entry` (JSON `bindings` in its env), then
 * disposes of the Worker whatever `run` did.
 */
export async function withWorker(
  entry: string,
  bindings: Record<string, unknown>,
  run: (url: URL) => Promise<void>,
): Promise<void> {
  await withWorkers([{ name: 'main', entry, bindings }], run, {
    compatibilityFlags: ['nodejs_compat'],
  });
}
