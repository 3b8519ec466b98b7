// The ability target behind a real Cap'n Web session (a MessageChannel pair): what a remote
// caller can and cannot reach, and what survives the trip.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { newMessagePortRpcSession, type RpcStub } from 'capnweb';
import { z } from 'zod';
import { svcErrorInfo } from '../../src/core/errors.ts';
import { type AbilityDefinition, defineAbility } from '../../src/service/ability.ts';
import { type AbilityCallContext, createAbilityTarget } from '../../src/service/ability-target.ts';
import { abilityMethod } from '../../src/service/method.ts';
import type { AbilityRpc } from '../../src/service/types.ts';
import { callContextWith, echoAbility, identityWith, SECRET } from '../support/ability-fixtures.ts';

type EchoAbility = ReturnType<typeof echoAbility>['ability'];

/** Serves `ability` on one port and returns a stub for the other, plus a cleanup. */
function connect<A extends AbilityDefinition<any>>(ability: A, call: AbilityCallContext) {
  const channel = new MessageChannel();
  newMessagePortRpcSession(channel.port1, createAbilityTarget(ability, call));
  const stub = newMessagePortRpcSession<AbilityRpc<A> & object>(channel.port2);
  const close = () => {
    (stub as unknown as Disposable)[Symbol.dispose]();
    channel.port1.close();
    channel.port2.close();
  };
  return { stub: stub as RpcStub<AbilityRpc<A> & object> & AbilityRpc<A>, close };
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof Error);
    return error;
  }
  assert.fail('expected a rejection');
}

function leaks(error: Error): boolean {
  return error.message.includes('SECRET') || JSON.stringify({ ...error }).includes('SECRET');
}

test("a unary method is called by name over a Cap'n Web session", async () => {
  const { ability, record } = echoAbility();
  const { stub, close } = connect<EchoAbility>(ability, callContextWith().call);
  try {
    assert.deepEqual(await stub.write({ value: 'over rpc' }), { written: 'over rpc' });
    assert.deepEqual(await stub['items.get']({ id: 'x' }), { id: 'x', name: 'item x' });
    assert.equal(record.factoryCalls, 2);
  } finally {
    close();
  }
});

/**
 * Sends raw Cap'n Web messages to a served target, so names a stub would answer locally
 * (`constructor`, `toString`, ...) really reach the server. Returns the reply to each call.
 */
async function rawCalls(
  ability: AbilityDefinition<any>,
  call: AbilityCallContext,
  names: string[],
): Promise<unknown[][]> {
  const channel = new MessageChannel();
  newMessagePortRpcSession(channel.port1, createAbilityTarget(ability, call));
  const replies = new Map<number, unknown[]>();
  const done = new Promise<void>((resolve) => {
    channel.port2.addEventListener('message', (event: MessageEvent) => {
      const message = event.data as unknown[];
      replies.set(message[1] as number, message);
      if (replies.size === names.length) resolve();
    });
  });
  channel.port2.start();
  names.forEach((name, index) => {
    channel.port2.postMessage(['push', ['pipeline', 0, [name], [{}]]]);
    channel.port2.postMessage(['pull', index + 1]);
  });
  await done;
  channel.port1.close();
  channel.port2.close();
  return names.map((_, index) => replies.get(index + 1)!);
}

test('ERR-08 undeclared and prototype names reach nothing over RPC', async () => {
  const { ability, record } = echoAbility();
  const names = [
    'nope',
    'authenticate',
    'constructor',
    '__proto__',
    'toString',
    'hasOwnProperty',
    'valueOf',
    '__defineGetter__',
    'then',
  ];
  const replies = await rawCalls(ability, callContextWith().call, [...names, 'whoami']);
  names.forEach((name, index) => {
    const reply = replies[index];
    assert.equal(reply[0], 'reject', `${name} is refused`);
    const text = JSON.stringify(reply);
    assert.equal(/node_modules|\.ts:|\.js:|at /.test(text), false, `${name}: ${text}`);
  });
  assert.equal(replies[names.length][0], 'resolve', 'a declared method still answers');
  assert.equal(record.factoryCalls, 1, 'only the declared call created a handler');
});

test('taxonomy fields of a refusal survive the trip and read back through svcErrorInfo', async () => {
  const { ability, record } = echoAbility();
  const { stub, close } = connect<EchoAbility>(
    ability,
    callContextWith({ identity: identityWith(['svc-a.read']) }).call,
  );
  try {
    const refused = await rejection(stub.write({ value: 'x' }));
    assert.deepEqual(svcErrorInfo(refused), {
      code: 'capability_auth',
      status: 403,
      retryable: false,
      reason: 'missing_scope',
    });
    const invalid = await rejection(stub.whoami(42 as never));
    assert.equal(svcErrorInfo(invalid).status, 422);
    assert.ok(Array.isArray((invalid as unknown as { issues: unknown[] }).issues));
    assert.equal(record.factoryCalls, 0);
  } finally {
    close();
  }
});

test('ERR-01 the opaque replacement crosses the session without the original', async () => {
  const { ability } = echoAbility();
  const { stub, close } = connect<EchoAbility>(ability, callContextWith().call);
  try {
    for (const kind of ['error', 'aggregate', 'cause'] as const) {
      const error = await rejection(stub.fail({ kind }));
      assert.equal(error.message, 'Svc ability handler failed: fail');
      assert.equal('cause' in error, false, kind);
      assert.equal('errors' in error, false, kind);
      assert.equal(leaks(error), false, kind);
      assert.deepEqual(svcErrorInfo(error), {
        code: 'internal',
        status: 500,
        retryable: false,
        reason: 'handler_failed',
      });
    }
  } finally {
    close();
  }
});

test('ERR-06 an invalid output crosses as ability_validation 500 without the marker', async () => {
  const { ability } = echoAbility();
  const { stub, close } = connect<EchoAbility>(ability, callContextWith().call);
  try {
    const error = await rejection(stub.badOutput({}));
    assert.equal(svcErrorInfo(error).code, 'ability_validation');
    assert.equal(svcErrorInfo(error).status, 500);
    assert.equal(leaks(error), false);
  } finally {
    close();
  }
});

test('a streaming method delivers its items over the session', async () => {
  const { ability } = echoAbility();
  const { stub, close } = connect<EchoAbility>(ability, callContextWith().call);
  try {
    const stream = await stub.ticks({ n: 4 });
    const items: unknown[] = [];
    for await (const item of stream as unknown as AsyncIterable<unknown>) items.push(item);
    assert.deepEqual(items, [{ i: 0 }, { i: 1 }, { i: 2 }, { i: 3 }]);
  } finally {
    close();
  }
});

test('ERR-03 a mid-stream failure reaches the remote reader as the opaque error', async () => {
  const ability = defineAbility({
    id: 'svc-a.feed',
    rpc: { transports: ['websocket'] },
    methods: {
      failMidStream: abilityMethod({
        input: z.object({ after: z.number() }),
        output: z.object({ i: z.number() }),
        stream: true,
      }),
    },
    handler: () => ({
      // Paced so the remote reader keeps up: Cap'n Web pipes ahead of the reader, and on Deno
      // a write still queued at the reader when the stream fails surfaces as an unhandled
      // rejection inside Cap'n Web (reported separately).
      async *failMidStream({ after }) {
        for (let i = 0; i < after; i++) {
          await new Promise((resolve) => setTimeout(resolve, 20));
          yield { i };
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
        throw new Error(SECRET);
      },
    }),
  });
  const { call, events } = callContextWith();
  const { stub, close } = connect(ability, call);
  try {
    const stream = await stub.failMidStream({ after: 2 });
    const reader = (stream as unknown as ReadableStream<unknown>).getReader();
    assert.deepEqual(await reader.read(), { done: false, value: { i: 0 } });
    assert.deepEqual(await reader.read(), { done: false, value: { i: 1 } });
    const error = await rejection(reader.read());
    assert.equal(error.message, 'Svc ability handler failed: failMidStream');
    assert.equal(leaks(error), false);
    assert.equal(svcErrorInfo(error).reason, 'handler_failed');
    assert.equal(events.length, 1);
  } finally {
    close();
  }
});
