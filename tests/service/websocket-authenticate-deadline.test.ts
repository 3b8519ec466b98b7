// A WebSocket session that never presents an acceptable token is closed after its deadline, so
// an unauthenticated peer cannot hold connections (and their memory) open indefinitely; a session
// that authenticated stays open past it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { serveRpc, WEBSOCKET_AUTHENTICATE_TIMEOUT_MS } from '../../src/service/rpc-serve.ts';
import {
  FAKE_TOKEN,
  fakeMainFactory,
  fakeRpcEndpoint,
  newFakeRecord,
} from '../support/fake-main.ts';
import { closedWithin, rawWebSocketSession } from '../support/raw-rpc-socket.ts';

const DEADLINE_MS = 100;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function deadlineEndpoint() {
  const record = newFakeRecord();
  const aborts: unknown[] = [];
  const endpoint = fakeRpcEndpoint(record, {
    authenticateTimeoutMs: DEADLINE_MS,
    onSessionAborted: (reason) => aborts.push(reason),
  });
  return { endpoint, record, aborts };
}

test('a WebSocket session that never authenticates is closed at its deadline, with the reason', async () => {
  const { endpoint, record, aborts } = deadlineEndpoint();
  const { connection, received } = await rawWebSocketSession(endpoint);
  assert.equal(await closedWithin(connection, 5_000), 3000);
  const abort = received.map((line) => JSON.parse(line)).find((line) => line[0] === 'abort');
  assert.match(JSON.stringify(abort), /authentication_timeout/);
  assert.equal(aborts.length, 1);
  assert.equal((aborts[0] as { reason?: string }).reason, 'authentication_timeout');
  assert.deepEqual(record.calls, [], 'nothing ran');
});

test('refused tokens do not extend the deadline', async () => {
  const { endpoint, record } = deadlineEndpoint();
  const { client, connection } = await rawWebSocketSession(endpoint);
  for (let i = 0; i < 5 && client.readyState === 1; i++) {
    client.send(`["push",["pipeline",0,["authenticate"],["forged-${i}"]]]`);
    client.send(`["pull",${i + 1}]`);
    await sleep(DEADLINE_MS / 4);
  }
  assert.equal(await closedWithin(connection, 5_000), 3000);
  assert.deepEqual(record.authenticated, []);
});

test('a session that authenticated stays open past the deadline', async () => {
  const { endpoint, record, aborts } = deadlineEndpoint();
  const { client, connection } = await rawWebSocketSession(endpoint);
  client.send(`["push",["pipeline",0,["authenticate"],[${JSON.stringify(FAKE_TOKEN)}]]]`);
  client.send('["push",["pipeline",1,["echo"],[{"value":"a"}]]]');
  client.send('["pull",2]');
  await sleep(DEADLINE_MS * 3);
  assert.equal(connection.state, 'open', 'still open');
  assert.equal(record.authenticated.length, 1);
  assert.deepEqual(aborts, []);
  client.close(1000, 'done');
});

test('the deadline defaults to WEBSOCKET_AUTHENTICATE_TIMEOUT_MS and must be a positive integer', async () => {
  assert.equal(WEBSOCKET_AUTHENTICATE_TIMEOUT_MS, 10_000);
  const upgrades: unknown[] = [];
  for (const authenticateTimeoutMs of [0, -1, 1.5, Number.NaN]) {
    await assert.rejects(
      serveRpc(
        new Request('https://fake.internal/rpc/fake.echo', { headers: { Upgrade: 'websocket' } }),
        {
          transports: ['websocket'],
          createMain: fakeMainFactory(newFakeRecord()),
          upgrader: { upgrade: (request) => (upgrades.push(request), new Response(null)) },
          authenticateTimeoutMs,
        },
      ),
      /serveRpc: authenticateTimeoutMs must be a positive integer/,
      String(authenticateTimeoutMs),
    );
  }
  assert.deepEqual(upgrades, [], 'refused before any upgrade');
});
