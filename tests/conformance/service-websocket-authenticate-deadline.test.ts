// A service ends a WebSocket session on which no token was accepted within
// WEBSOCKET_AUTHENTICATE_TIMEOUT_MS, so unauthenticated peers cannot hold connections open; an
// accepted token stops that deadline. The deadline's timer is captured rather than waited for.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WEBSOCKET_AUTHENTICATE_TIMEOUT_MS } from '../../src/service/rpc-serve.ts';
import { closedWithin, rawWebSocketSession } from '../support/raw-rpc-socket.ts';
import { createFixture } from './fixture.ts';

const RPC_URL = 'wss://svc-a.fixture.test/rpc/svc-a.echo';

type Timer = ReturnType<typeof setTimeout>;

/**
 * Runs `work` while recording every timer set for exactly `delayMs` and every timer cleared;
 * the real timers still run.
 */
async function withTimersOf<T>(
  delayMs: number,
  work: (timers: { set: { handle: Timer; fire: () => void }[]; cleared: Set<Timer> }) => Promise<T>,
): Promise<T> {
  const timers = { set: [] as { handle: Timer; fire: () => void }[], cleared: new Set<Timer>() };
  const realSet = globalThis.setTimeout;
  const realClear = globalThis.clearTimeout;
  globalThis.setTimeout = ((callback: () => void, ms?: number, ...rest: unknown[]) => {
    const handle = realSet(callback, ms, ...rest) as unknown as Timer;
    if (ms === delayMs) timers.set.push({ handle, fire: callback });
    return handle;
  }) as typeof setTimeout;
  globalThis.clearTimeout = ((handle: Timer) => {
    timers.cleared.add(handle);
    realClear(handle);
  }) as typeof clearTimeout;
  try {
    return await work(timers);
  } finally {
    globalThis.setTimeout = realSet;
    globalThis.clearTimeout = realClear;
  }
}

function abortOf(sent: string[]): unknown {
  return sent.map((line) => JSON.parse(line)).find((line) => line[0] === 'abort');
}

test('a WebSocket session with no accepted token is ended at its deadline: 401 authentication_timeout', async () => {
  const fx = await createFixture();
  await withTimersOf(WEBSOCKET_AUTHENTICATE_TIMEOUT_MS, async (timers) => {
    const { client, connection, received } = await rawWebSocketSession(
      fx.services['svc-a'],
      RPC_URL,
    );
    client.send('["push",["pipeline",0,["authenticate"],["not-a-token"]]]');
    client.send('["pull",1]');
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(timers.set.length, 1, 'one authentication deadline');
    const [deadline] = timers.set;
    assert.equal(timers.cleared.has(deadline.handle), false, 'a refused token does not stop it');
    timers.cleared.add(deadline.handle);
    clearTimeout(deadline.handle);
    deadline.fire();
    assert.equal(await closedWithin(connection, 5_000), 3000);
    assert.match(JSON.stringify(abortOf(received)), /authentication_timeout/);
  });
  assert.equal(fx.count('factories', 'svc-a.echo'), 0, 'no handler was created');
  const failed = fx.events.filter((event) => event.event === 'svc.request.failed');
  assert.equal(failed.at(-1)?.reason, 'authentication_timeout');
  assert.equal(failed.at(-1)?.level, 'warn');
});

test('an accepted token stops the authentication deadline', async () => {
  const fx = await createFixture();
  const token = await fx.tokenFor('svc-a', ['svc-a.read']);
  await withTimersOf(WEBSOCKET_AUTHENTICATE_TIMEOUT_MS, async (timers) => {
    const { client, connection, received } = await rawWebSocketSession(
      fx.services['svc-a'],
      RPC_URL,
    );
    client.send(`["push",["pipeline",0,["authenticate"],[${JSON.stringify(token)}]]]`);
    client.send('["pull",1]');
    const started = Date.now();
    while (!received.some((line) => line.startsWith('["resolve",1,'))) {
      if (Date.now() - started > 5_000) throw new Error(`not authenticated: ${received}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    assert.equal(timers.set.length, 1);
    assert.equal(timers.cleared.has(timers.set[0].handle), true, 'the deadline was stopped');
    assert.equal(connection.state, 'open');
    client.close(1000, 'done');
  });
});
