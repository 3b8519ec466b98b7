// The WebSocket criterion with the real service in workerd: the zod and arktype
// services run in a Worker (bundled with esbuild, started by Miniflare on a real 127.0.0.1
// port); Node authenticates, calls and reads 10 000 validated items over the socket.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { Miniflare } from 'miniflare';
import { nodeWebSocketFactory } from '../../../src/adapters/node.ts';
import { assertServiceOverWebSocket, runtimeSigningKey } from '../service-websocket-fixture.ts';

const BOUND = { timeout: 120_000 };
const here = path.dirname(fileURLToPath(import.meta.url));

async function bundleWorker(): Promise<string> {
  const result = await build({
    entryPoints: [path.join(here, 'service-websocket-worker.ts')],
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

async function withWorker(
  jwks: { keys: unknown[] },
  run: (url: URL) => Promise<void>,
): Promise<void> {
  const mf = new Miniflare({
    modules: true,
    script: await bundleWorker(),
    compatibilityDate: '2026-07-01',
    compatibilityFlags: ['nodejs_compat'],
    bindings: { JWKS: jwks },
    host: '127.0.0.1',
    port: 0,
  });
  try {
    await run(await mf.ready);
  } finally {
    await mf.dispose();
  }
}

test(
  'workerd: the real zod and arktype services over a WebSocket on 127.0.0.1',
  BOUND,
  async () => {
    const key = await runtimeSigningKey();
    await withWorker(key.jwks, async (url) => {
      assert.equal(url.hostname, '127.0.0.1');
      const base = url.origin;
      const factory = nodeWebSocketFactory();
      await assertServiceOverWebSocket(base, 'svc-zod', key.token, factory);
      await assertServiceOverWebSocket(base, 'svc-ark', key.token, factory);
      // A token for another service is refused by the service in the Worker.
      await assert.rejects(
        assertServiceOverWebSocket(base, 'svc-zod', () => key.token('svc-ark'), factory),
        (error: unknown) => (error as { code?: string }).code === 'capability_auth',
      );
    });
  },
);
