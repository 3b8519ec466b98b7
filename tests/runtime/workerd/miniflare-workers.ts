/**
 * Starts several Workers from this folder in one workerd for a host-driven test, wired to each
 * other with service bindings (to a default or a named entrypoint). Each entry is bundled with
 * esbuild for the Workers platform; the first Worker listed answers on a real 127.0.0.1 port.
 * (`withWorker` in miniflare-worker.ts is the one-Worker form.)
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { Miniflare } from 'miniflare';
// The .d.mts beside it types it for tsc; Deno's linter reads that pairing as a sloppy import.
// deno-lint-ignore no-sloppy-imports
import * as workerdBundle from '../../../scripts/workerd/bundle-options.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

/** A service binding: a Worker's default entrypoint by name, or a named entrypoint of it. */
export type WorkerServiceBinding = string | { name: string; entrypoint?: string };

/** One Worker of the deployment. */
export interface WorkerSpec {
  /** The Worker's name, which other Workers' service bindings refer to. */
  name: string;
  /** Its entry module, a file name in this folder. */
  entry: string;
  /** JSON bindings in its `env`. */
  bindings?: Record<string, unknown>;
  /** Service bindings in its `env`. */
  serviceBindings?: Record<string, WorkerServiceBinding>;
}

/** Options shared by every Worker of the deployment. */
export interface WorkersOptions {
  /**
   * Compatibility flags of every Worker. None by default, `nodejs_compat` included: the library
   * must run on a Worker that never enabled Node's APIs.
   */
  compatibilityFlags?: readonly string[];
}

/** The compatibility date of every Worker (enhanced_error_serialization is on from 2026-04-21). */
export const WORKERS_COMPATIBILITY_DATE: string = workerdBundle.WORKERD_COMPATIBILITY_DATE;

// One bundle per entry for the whole test file: several tests start the same Workers.
const bundles = new Map<string, Promise<string>>();

function bundleWorker(entry: string): Promise<string> {
  let bundle = bundles.get(entry);
  if (bundle === undefined) {
    bundle = build({
      ...workerdBundle.WORKERD_BUNDLE_OPTIONS,
      entryPoints: [path.join(here, entry)],
      external: ['cloudflare:*', 'node:*'],
    }).then((result) => result.outputFiles[0].text);
    bundles.set(entry, bundle);
  }
  return bundle;
}

/**
 * Runs `run` with the URL of the first Worker in `workers`, then disposes of them all whatever
 * `run` did.
 */
export async function withWorkers(
  workers: readonly WorkerSpec[],
  run: (url: URL) => Promise<void>,
  options: WorkersOptions = {},
): Promise<void> {
  const flags = [...(options.compatibilityFlags ?? [])];
  const mf = new Miniflare({
    host: '127.0.0.1',
    port: 0,
    workers: await Promise.all(workers.map(async (worker) => ({
      name: worker.name,
      modules: true,
      script: await bundleWorker(worker.entry),
      compatibilityDate: WORKERS_COMPATIBILITY_DATE,
      compatibilityFlags: flags,
      bindings: worker.bindings ?? {},
      serviceBindings: worker.serviceBindings ?? {},
    }))),
  });
  try {
    await run(await mf.ready);
  } finally {
    await mf.dispose();
  }
}
