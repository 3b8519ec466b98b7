// The WebSocket criterion with the real service on Deno: `serveDeno` on 127.0.0.1,
// authenticate, unary calls and 10 000 streamed items validated by the wrapper, for a zod
// service and an arktype service.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { serveDeno } from '../../../src/adapters/deno.ts';
import {
  assertServiceOverWebSocket,
  runtimeServices,
  runtimeSigningKey,
} from '../service-websocket-fixture.ts';

const BOUND = { timeout: 90_000 };

test(
  'serveDeno: the real zod and arktype services over a WebSocket on 127.0.0.1',
  BOUND,
  async () => {
    const key = await runtimeSigningKey();
    const server = await serveDeno(runtimeServices(key.jwks));
    try {
      assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/);
      await assertServiceOverWebSocket(server.url, 'svc-zod', key.token);
      await assertServiceOverWebSocket(server.url, 'svc-ark', key.token);
    } finally {
      await server.close();
    }
  },
);

test('serveDeno: a token for another service is refused over the real socket', BOUND, async () => {
  const key = await runtimeSigningKey();
  const server = await serveDeno(runtimeServices(key.jwks));
  try {
    await assert.rejects(
      assertServiceOverWebSocket(server.url, 'svc-zod', () => key.token('svc-ark')),
      (error: unknown) => (error as { code?: string }).code === 'capability_auth',
    );
  } finally {
    await server.close();
  }
});
