// What a hostile or ordinary peer can make a service log. A peer that closes is no handler
// failure; what a peer sends (its frames, its own abort, its close reason) is never logged
// verbatim, since it may carry a token or forge a line; the logged reason is the service's own.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { memoryWebSocketFactory } from '../../src/testing/mod.ts';
import { closedWithin, rawWebSocketSession } from '../support/raw-rpc-socket.ts';
import { createFixture } from './fixture.ts';

const BATCH_URL = 'https://svc-a.fixture.test/rpc/svc-a.echo';
const SOCKET_URL = 'wss://svc-a.fixture.test/rpc/svc-a.echo';
const FORGED_LINE = 'x\n{"event":"svc.ability.handler_failed","level":"error"}\u001b[2J';

type Fixture = Awaited<ReturnType<typeof createFixture>>;

function settle(ms = 50): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function errorLevelEvents(fx: Fixture) {
  return fx.events.filter((event) => event.level === 'error');
}

function eventsMentioning(fx: Fixture, text: string) {
  return fx.events.filter((event) => JSON.stringify(event).includes(text));
}

async function postBatch(fx: Fixture, body: string): Promise<void> {
  const response = await fx.services['svc-a'].fetch(
    new Request(BATCH_URL, { method: 'POST', body }),
  );
  await response.text();
  await settle();
}

test('Events: a peer that opens a WebSocket and closes it with any reason logs no error, and not its reason', async () => {
  const fx = await createFixture();
  const { client, connection } = await rawWebSocketSession(fx.services['svc-a'], SOCKET_URL);
  client.close(4000, FORGED_LINE.slice(0, 60));
  await closedWithin(connection, 5_000);
  await settle();
  assert.deepEqual(errorLevelEvents(fx), []);
  assert.deepEqual(eventsMentioning(fx, 'svc.ability.handler_failed\\"'), []);
  assert.equal(fx.events.some((event) => event.event === 'svc.ability.handler_failed'), false);
});

test('Events: an ordinary WebSocket session that makes a call and is disposed logs no error', async () => {
  const fx = await createFixture();
  const ws = fx.webSocket('svc-a.echo');
  {
    using session = fx.session<{ whoami(input: object): Promise<unknown> }>('svc-a.echo', {
      transport: ws.transport,
    });
    await session.whoami({});
  }
  await settle(100);
  assert.deepEqual(errorLevelEvents(fx), []);
});

test('Events: a token inside a frame the service cannot read is never logged', async () => {
  const fx = await createFixture();
  const token = await fx.tokenFor('svc-a', ['svc-a.read']);
  await postBatch(fx, `["call",${JSON.stringify(token)}]`);
  const sockets = memoryWebSocketFactory((request, env) =>
    fx.services['svc-a'].fetch(request, env)
  );
  const socket = sockets.createWebSocket(SOCKET_URL);
  await new Promise((resolve) => socket.addEventListener('open', resolve));
  socket.send(`{"push":${JSON.stringify(token)}}`);
  await settle();
  assert.deepEqual(eventsMentioning(fx, token), []);
  const failed = fx.events.filter((event) => event.event === 'svc.request.failed');
  assert.equal(failed.length, 2, JSON.stringify(fx.events));
  for (const event of failed) {
    assert.equal(event.level, 'warn');
    assert.equal(event.reason, 'rpc_protocol_error');
  }
});

test("Events: a peer's own abort cannot choose the logged reason or write text into the log", async () => {
  const fx = await createFixture();
  const text = JSON.stringify(FORGED_LINE);
  await postBatch(
    fx,
    `["abort",["error","Error",${text},null,{"code":"capability_auth","reason":"token_expired"}]]`,
  );
  const failed = fx.events.filter((event) => event.event === 'svc.request.failed');
  assert.equal(failed.length, 1, JSON.stringify(fx.events));
  assert.equal(failed[0].reason, 'rpc_protocol_error');
  assert.deepEqual(eventsMentioning(fx, 'svc.ability.handler_failed\\"'), []);
  assert.deepEqual(errorLevelEvents(fx), []);
});

test('Events: a request path is logged percent-encoded and bounded, never as control characters', async () => {
  const fx = await createFixture();
  const injected = '/%0D%0A%1B%5B31mFAKE%20LOG%20LINE%0A' + 'a'.repeat(5000);
  const response = await fx.services['svc-a'].fetch(
    new Request(`https://svc-a.fixture.test${injected}`),
  );
  await response.body?.cancel();
  const [completed] = fx.events.filter((event) => event.event === 'svc.request.completed');
  const path = String(completed.path);
  assert.equal(/[\r\n]/.test(path) || path.includes('\u001b'), false, path.slice(0, 80));
  assert.ok(path.startsWith('/%0D%0A%1B%5B31mFAKE%20LOG%20LINE%0A'), path.slice(0, 80));
  assert.equal(path.length, 1025, 'cut at 1024 characters, with a mark');
  assert.ok(path.endsWith('…'));
});
