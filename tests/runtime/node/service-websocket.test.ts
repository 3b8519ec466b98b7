// The WebSocket criterion with the real service on Node: `serveNode` on 127.0.0.1,
// authenticate, unary calls and 10 000 streamed items validated by the wrapper, for a zod
// service and an arktype service.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nodeWebSocketFactory, serveNode } from '../../../src/adapters/node.ts';
import {
  assertServiceOverWebSocket,
  runtimeServices,
  runtimeSigningKey,
} from '../service-websocket-fixture.ts';

const BOUND = { timeout: 90_000 };

test(
  'serveNode: the real zod and arktype services over a WebSocket on 127.0.0.1',
  BOUND,
  async () => {
    const key = await runtimeSigningKey();
    const server = await serveNode(runtimeServices(key.jwks));
    try {
      assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/);
      const factory = nodeWebSocketFactory();
      await assertServiceOverWebSocket(server.url, 'svc-zod', key.token, factory);
      await assertServiceOverWebSocket(server.url, 'svc-ark', key.token, factory);
    } finally {
      await server.close();
    }
  },
);

test('serveNode: a token for another service is refused over the real socket', BOUND, async () => {
  const key = await runtimeSigningKey();
  const server = await serveNode(runtimeServices(key.jwks));
  try {
    await assert.rejects(
      assertServiceOverWebSocket(
        server.url,
        'svc-zod',
        () => key.token('svc-ark'),
        nodeWebSocketFactory(),
      ),
      (error: unknown) => (error as { code?: string }).code === 'capability_auth',
    );
  } finally {
    await server.close();
  }
});
