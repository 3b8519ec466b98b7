/**
 * The screen every received Cap'n Web message passes: a peer's promises, stubs, maps and
 * streams are refused before Cap'n Web reads them. Sent from the attacker's side, unauthenticated
 * and authenticated, over HTTP-batch and WebSocket; and a hostile service's answer to a caller.
 * Before the screen, one such message ended the process with an unhandled rejection, hung a
 * batch forever, or let a call escape its deadline.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { svcErrorInfo } from '../../src/core/errors.ts';
import { disposeAbilitySession } from '../../src/caller/ability-session.ts';
import { customRpcTransport } from '../../src/caller/transports/custom.ts';
import { httpBatchRpc } from '../../src/caller/transports/http-batch.ts';
import type { RpcTransportFactory } from '../../src/caller/transports/outbound-metadata.ts';
import {
  PEER_VALUE_REFUSED_REASON,
  peerMessageRefusal,
} from '../../src/service/peer-message-screen.ts';
import {
  FAKE_TOKEN,
  fakeAbilitySession,
  fakeRpcEndpoint,
  newFakeRecord,
} from '../support/fake-main.ts';
import { closedWithin, rawWebSocketSession } from '../support/raw-rpc-socket.ts';

const RPC_URL = 'https://fake.internal/rpc/fake.echo';
const AUTHENTICATE = `["push",["pipeline",0,["authenticate"],[${JSON.stringify(FAKE_TOKEN)}]]]`;

/** Hostile lines a caller may send, each holding something only a peer's own objects carry. */
const HOSTILE_FROM_CALLER: [string, string][] = [
  [
    'a promise as authenticate argument',
    '["push",["pipeline",0,["authenticate"],[["promise",-5],["bogus"]]]]',
  ],
  ['a bare promise', '["push",["promise",-5]]'],
  ['a promise in a method input', '["push",["pipeline",1,["echo"],[{"value":["promise",-5]}]]]'],
  ['a promise in an array literal', '["push",["pipeline",1,["echo"],[[[1,["promise",-5]]]]]]'],
  ['a promise behind a \\u escape', '["push",["pipeline",1,["echo"],[["\\u0070romise",-5]]]]'],
  [
    'a promise in error properties',
    '["push",["pipeline",1,["echo"],[["error","Error","m",null,{"x":["promise",-5]}]]]]',
  ],
  ['a stub', '["push",["pipeline",1,["echo"],[["export",-3]]]]'],
  ['a map over a remote value', '["push",["remap",0,[],[["import",0]],[]]]'],
  ['a writable stream', '["push",["pipeline",1,["echo"],[["writable",-2]]]]'],
  ['a readable stream', '["push",["pipeline",1,["echo"],[["readable",1]]]]'],
  ['a pipe message', '["pipe"]'],
  ['a stream message', '["stream",["pipeline",1,["echo"],[1]]]'],
  ['a promise in a resolve', '["resolve",-1,["promise",-5]]'],
];

/** Records unhandled rejections while `run` runs, on whichever mechanism the runtime has. */
async function unhandledRejectionsDuring(run: () => Promise<void>): Promise<unknown[]> {
  const seen: unknown[] = [];
  const onNode = (reason: unknown) => seen.push(reason);
  const onWeb = (event: Event) => {
    seen.push((event as PromiseRejectionEvent).reason);
    event.preventDefault();
  };
  const nodeProcess = (globalThis as {
    process?: { on?: (...args: unknown[]) => void; off?: (...args: unknown[]) => void };
  }).process;
  const useNode = typeof nodeProcess?.on === 'function' && typeof nodeProcess.off === 'function';
  if (useNode) nodeProcess!.on!('unhandledRejection', onNode);
  else globalThis.addEventListener?.('unhandledrejection', onWeb);
  try {
    await run();
    // Unhandled rejections are reported after the microtask queue drains.
    await new Promise((resolve) => setTimeout(resolve, 50));
  } finally {
    if (useNode) nodeProcess!.off!('unhandledRejection', onNode);
    else globalThis.removeEventListener?.('unhandledrejection', onWeb);
  }
  return seen;
}

function abortOf(body: string): unknown[] {
  const lines = body.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line));
  const abort = lines.find((line) => line[0] === 'abort');
  assert.ok(abort, `expected an abort message, got ${body.slice(0, 200)}`);
  return abort[1];
}

test('the screen refuses what a caller never sends, and passes the same names as data', () => {
  for (const [what, line] of HOSTILE_FROM_CALLER) {
    const refusal = peerMessageRefusal(line, 'service');
    assert.ok(refusal !== undefined, what);
    assert.deepEqual(svcErrorInfo(refusal), {
      code: 'internal',
      status: 400,
      retryable: false,
      reason: PEER_VALUE_REFUSED_REASON,
    }, what);
  }
  const harmless = [
    // The names as strings in an input, as object keys, and as a method name.
    '["push",["pipeline",1,["echo"],[{"value":"promise","export":"stream","pipe":[["remap"]]}]]]',
    '["push",["pipeline",1,["promise"],[{"value":"x"}]]]',
    // An array literal whose first element is such a name is data, not a special value.
    '["push",["pipeline",1,["echo"],[[["promise",-5]]]]]',
    '["pull",2]',
    '["release",1,1]',
    'not json "promise"',
  ];
  for (const line of harmless) assert.equal(peerMessageRefusal(line, 'service'), undefined, line);
  // A caller receives the ability stub and streamed results from a service: those pass there.
  for (const line of ['["resolve",1,["export",-1]]', '["pipe"]', '["resolve",2,["readable",-2]]']) {
    assert.equal(peerMessageRefusal(line, 'caller'), undefined, line);
  }
  const fromHostileService = [
    '["resolve",1,["promise",-1]]',
    '["resolve",1,["writable",-1]]',
    // A stub anywhere but as the whole answer: as `then`, the caller's own code would call it.
    '["resolve",1,{"then":["export",-1]}]',
    '["resolve",1,[[1,["export",-1]]]]',
    '["reject",1,["export",-1]]',
  ];
  for (const line of fromHostileService) {
    assert.ok(peerMessageRefusal(line, 'caller') !== undefined, line);
  }
  // A structured-clone transport hands over the parsed message.
  assert.ok(peerMessageRefusal(['push', ['promise', -5]], 'service') !== undefined);
});

test('a hostile HTTP batch is refused with rpc_value_refused, runs nothing, and the process stays up', async () => {
  for (const [what, line] of HOSTILE_FROM_CALLER) {
    for (const authenticated of [false, true]) {
      const record = newFakeRecord();
      const endpoint = fakeRpcEndpoint(record);
      const body = authenticated ? `${AUTHENTICATE}\n${line}\n["pull",2]` : `${line}\n["pull",1]`;
      const unhandled = await unhandledRejectionsDuring(async () => {
        const response = await endpoint.fetch(
          new Request(RPC_URL, { method: 'POST', body }),
        );
        assert.equal(response.status, 200, what);
        const abort = abortOf(await response.text());
        assert.equal(abort[0], 'error', what);
        assert.deepEqual(abort[4], {
          code: 'internal',
          status: 400,
          retryable: false,
          reason: PEER_VALUE_REFUSED_REASON,
        }, what);
      });
      assert.deepEqual(unhandled, [], `${what}: no unhandled rejection`);
      assert.deepEqual(record.calls, [], `${what}: no method ran`);
    }
  }
  const session = fakeAbilitySession<{ echo(input: { value: string }): { value: string } }>(
    httpBatchRpc(fakeRpcEndpoint().fetch),
  );
  try {
    assert.deepEqual(await session.echo({ value: 'still serving' }), { value: 'still serving' });
  } finally {
    disposeAbilitySession(session);
  }
});

test('a hostile WebSocket message aborts that session only, runs nothing, and the process stays up', async () => {
  const record = newFakeRecord();
  const endpoint = fakeRpcEndpoint(record);
  for (const [what, line] of HOSTILE_FROM_CALLER) {
    const unhandled = await unhandledRejectionsDuring(async () => {
      const { client, connection, received } = await rawWebSocketSession(endpoint);
      client.send(AUTHENTICATE);
      client.send(line);
      assert.equal(await closedWithin(connection, 5_000), 3000, what);
      // Messages arrive in order: the abort the service sent lands before its close.
      const abort = received.map((text) => JSON.parse(text)).find((message) =>
        message[0] === 'abort'
      );
      assert.ok(abort, `${what}: the abort reached the caller`);
      assert.equal(abort[1][4].reason, PEER_VALUE_REFUSED_REASON, what);
    });
    assert.deepEqual(unhandled, [], `${what}: no unhandled rejection`);
  }
  assert.deepEqual(record.calls, []);
  const { client, received } = await rawWebSocketSession(endpoint);
  client.send(AUTHENTICATE);
  client.send('["push",["pipeline",1,["echo"],[{"value":"after"}]]]');
  client.send('["pull",2]');
  const started = Date.now();
  while (!received.some((text) => text.includes('after'))) {
    if (Date.now() - started > 5_000) assert.fail('a fresh session was not served');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  client.close();
});

/**
 * Calls `echo` once over `transport` and checks the call is refused with rpc_value_refused and
 * that no rejection went unhandled.
 */
async function assertCallRefusedCleanly(transport: RpcTransportFactory): Promise<void> {
  const session = fakeAbilitySession<{ echo(input: { value: string }): { value: string } }>(
    transport,
  );
  try {
    let refusal: unknown;
    const unhandled = await unhandledRejectionsDuring(async () => {
      refusal = await session.echo({ value: 'x' }).then(() => undefined, (error) => error);
    });
    assert.equal(svcErrorInfo(refusal).reason, PEER_VALUE_REFUSED_REASON);
    assert.deepEqual(unhandled, []);
  } finally {
    disposeAbilitySession(session);
  }
}

/** A hostile HTTP-batch service: `authenticate` gets a stub, the `echo` call `echoAnswer`. */
function hostileBatchService(echoAnswer: string): RpcTransportFactory {
  return httpBatchRpc(async (request) => {
    const calls = (await request.text()).includes('"echo"');
    return new Response(calls ? `["resolve",-1,["export",-1]]\n["resolve",-2,${echoAnswer}]` : '');
  });
}

test('a service answering a caller with its own promise fails that call, not the caller process', async () => {
  await assertCallRefusedCleanly(hostileBatchService('["promise",-7]'));
});

test('a result shaped like a promise around a service stub fails the call at once instead of hanging it', async () => {
  // As `then`, the caller's own promise machinery would call the stub with its resolve and reject.
  await assertCallRefusedCleanly(hostileBatchService('{"then":["export",-2]}'));
});

test('a custom transport handing over non-string messages is screened on the text its session parses', async () => {
  // A hand-written MessagePort transport passing `event.data` through: a one-element array holding
  // JSON text becomes that text in Cap'n Web's `JSON.parse`.
  const incoming: unknown[] = [['["resolve",99,["promise",7]]']];
  const transport = {
    send() {},
    receive: () => {
      const message = incoming.shift();
      return message === undefined ? new Promise(() => {}) : Promise.resolve(message);
    },
  };
  await assertCallRefusedCleanly(customRpcTransport(transport as never));
});
