import assert from 'node:assert/strict';
import { test } from 'node:test';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { Miniflare } from 'miniflare';
import { nodeWebSocketFactory } from '../../../src/adapters/node.ts';
import { abilitySession, disposeAbilitySession } from '../../../src/service/ability-session.ts';
import { httpBatchRpc } from '../../../src/service/transports/http-batch.ts';
import { websocketRpc } from '../../../src/service/transports/websocket.ts';
import type { RpcTransportFactory } from '../../../src/service/transports/outbound-metadata.ts';
import { FAKE_TOKEN, type FakeMainRecord } from '../../support/fake-main.ts';

interface FakeApi {
  echo(input: { value: string }): { value: string };
  whoami(input: Record<string, never>): { transport: string };
  ticks(input: { n: number }): ReadableStream<{ i: number }>;
}

const BOUND = { timeout: 90_000 };
const here = path.dirname(fileURLToPath(import.meta.url));

async function bundleWorker(): Promise<string> {
  const result = await build({
    entryPoints: [path.join(here, 'websocket-worker.ts')],
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

async function withWorker(run: (url: URL) => Promise<void>): Promise<void> {
  const mf = new Miniflare({
    modules: true,
    script: await bundleWorker(),
    compatibilityDate: '2026-07-01',
    compatibilityFlags: ['nodejs_compat'],
    host: '127.0.0.1',
    port: 0,
  });
  try {
    await run(await mf.ready);
  } finally {
    await mf.dispose();
  }
}

function sessionOver(transport: RpcTransportFactory) {
  return abilitySession<FakeApi>({
    abilityId: 'fake.echo',
    callerServiceId: 'caller',
    targetServiceId: 'fake',
    scopes: [],
    requestToken: () => Promise.resolve(FAKE_TOKEN),
    transport,
    requestId: 'req-workerd-ws',
  });
}

async function readAll(stream: ReadableStream<{ i: number }>): Promise<number> {
  const reader = stream.getReader();
  let expected = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return expected;
    assert.equal(value.i, expected);
    expected++;
  }
}

test(
  'workersEntrypoint: a WebSocket session authenticates, calls and streams 10 000 items',
  BOUND,
  async () => {
    await withWorker(async (url) => {
      assert.equal(url.hostname, '127.0.0.1');
      const session = sessionOver(websocketRpc(new URL('/rpc/fake.echo', url), {
        createWebSocket: nodeWebSocketFactory(),
      }));
      try {
        assert.deepEqual(await session.echo({ value: 'workerd' }), { value: 'workerd' });
        assert.deepEqual(await session.whoami({}), { transport: 'websocket' });
        assert.equal(await readAll(await session.ticks({ n: 10_000 })), 10_000);
      } finally {
        disposeAbilitySession(session);
      }
      const record = await (await fetch(new URL('/record', url))).json() as FakeMainRecord;
      assert.equal(record.authenticated.length, 1);
      assert.equal(record.sessions[0].query.request_id, 'req-workerd-ws');
    });
  },
);

test(
  'workerd: WebSocketPair is detected without a serving helper, and HTTP-batch works too',
  BOUND,
  async () => {
    await withWorker(async (url) => {
      const detected = sessionOver(websocketRpc(new URL('/detected/rpc', url), {
        createWebSocket: nodeWebSocketFactory(),
      }));
      const batch = sessionOver(httpBatchRpc(new URL('/rpc/fake.echo', url)));
      try {
        assert.deepEqual(await detected.whoami({}), { transport: 'websocket' });
        assert.deepEqual(await batch.whoami({}), { transport: 'http-batch' });
      } finally {
        disposeAbilitySession(detected);
        disposeAbilitySession(batch);
      }
    });
  },
);
