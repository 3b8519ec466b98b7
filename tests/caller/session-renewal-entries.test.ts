// A session transport authenticates again with each renewed token; every authentication leaves
// an ability stub on the service, which counts against the session's entry limit (DOS-05) until
// the caller releases it. A long-lived session renewing its token must release the old stubs.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { disposeAbilitySession } from '../../src/caller/ability-session.ts';
import { websocketRpc } from '../../src/caller/transports/websocket.ts';
import { memoryWebSocketFactory } from '../../src/testing/mod.ts';
import {
  fakeAbilitySession,
  fakeRpcEndpoint,
  newFakeRecord,
  renewableFakeJwt,
} from '../support/fake-main.ts';

test('a WebSocket session renewing its token far more often than its entry limit stays open', async () => {
  const record = newFakeRecord();
  const endpoint = fakeRpcEndpoint(record, { maxSessionEntries: 20 });
  const sockets = memoryWebSocketFactory(endpoint.fetch);
  let issued = 0;
  // The wall clock stands still: every token is due for renewal at once but none expires however
  // long a busy machine takes over the 300 calls (an expired token would make a call wait).
  const realNow = Date.now;
  const frozenAt = realNow();
  Date.now = () => frozenAt;
  const session = fakeAbilitySession<{ echo(input: unknown): unknown }>(
    websocketRpc('ws://fake.internal/rpc/fake.echo', { createWebSocket: sockets.createWebSocket }),
    // Due for renewal as soon as issued (the session renews 5 s before expiry).
    () =>
      Promise.resolve(
        renewableFakeJwt({ exp: Math.floor(Date.now() / 1000) + 4, jti: `t${++issued}` }),
      ),
  );
  try {
    for (let i = 0; i < 300; i++) assert.equal(await session.echo(i), i);
    // Every token is due at once: each call starts a renewal in the background, and the next
    // call authenticates with the token it brought (the last one is not used yet).
    assert.equal(issued, 300, 'every call renewed the token');
    assert.equal(record.authenticated.length, 299, 'and every renewed token authenticated');
    assert.equal(sockets.connections.length, 1, 'on one connection');
    assert.equal(sockets.connections[0].state, 'open', 'which the entry limit never closed');
  } finally {
    Date.now = realNow;
    disposeAbilitySession(session);
  }
});
