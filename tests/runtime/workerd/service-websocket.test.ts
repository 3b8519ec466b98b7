// The WebSocket criterion with the real service in workerd: the zod and arktype
// services run in a Worker (bundled with esbuild, started by Miniflare on a real 127.0.0.1
// port); Node authenticates, calls and reads 10 000 validated items over the socket.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nodeWebSocketFactory } from '../../../src/adapters/node.ts';
import { runtimeSigningKey } from '../service-websocket-fixture.ts';
import {
  assertBothServicesOverWebSocket,
  assertForeignTokenRefused,
  assertHandshakeEchoesRequestId,
} from '../websocket-scenarios.ts';
import { withWorker } from './miniflare-worker.ts';

const BOUND = { timeout: 120_000 };

test(
  'workerd: the real zod and arktype services over a WebSocket on 127.0.0.1',
  BOUND,
  async () => {
    const key = await runtimeSigningKey();
    await withWorker('service-websocket-worker.ts', { JWKS: key.jwks }, async (url) => {
      assert.equal(url.hostname, '127.0.0.1');
      const factory = nodeWebSocketFactory();
      await assertBothServicesOverWebSocket(url.origin, key, factory);
      // A token for another service is refused by the service in the Worker.
      await assertForeignTokenRefused(url.origin, key, factory);
      await assertHandshakeEchoesRequestId(url.origin, 'req-workerd-handshake');
    });
  },
);
