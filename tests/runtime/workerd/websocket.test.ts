// The fake main behind `workersEntrypoint` in workerd (bundled with esbuild, started by
// Miniflare on a real 127.0.0.1 port), driven from Node over real sockets.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nodeWebSocketFactory } from '../../../src/adapters/node.ts';
import { disposeAbilitySession } from '../../../src/caller/ability-session.ts';
import { httpBatchRpc } from '../../../src/caller/transports/http-batch.ts';
import type { FakeMainRecord } from '../../support/fake-main.ts';
import {
  assertSessionStreams,
  fakeSession,
  fakeWebSocketSession,
  type WebSocketClientRuntime,
} from '../websocket-scenarios.ts';
import { withWorker } from './miniflare-worker.ts';

const BOUND = { timeout: 90_000 };
const CLIENT: WebSocketClientRuntime = {
  requestId: 'req-workerd-ws',
  createWebSocket: nodeWebSocketFactory(),
};

test(
  'workersEntrypoint: a WebSocket session authenticates, calls and streams 10 000 items',
  BOUND,
  async () => {
    await withWorker('websocket-worker.ts', {}, async (url) => {
      assert.equal(url.hostname, '127.0.0.1');
      await assertSessionStreams(
        new URL('/rpc/fake.echo', url),
        CLIENT,
        async () => await (await fetch(new URL('/record', url))).json() as FakeMainRecord,
      );
    });
  },
);

test(
  'workerd: WebSocketPair is detected without a serving helper, and HTTP-batch works too',
  BOUND,
  async () => {
    await withWorker('websocket-worker.ts', {}, async (url) => {
      const detected = fakeWebSocketSession(new URL('/detected/rpc', url), CLIENT);
      const batch = fakeSession(httpBatchRpc(new URL('/rpc/fake.echo', url)), CLIENT.requestId);
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
