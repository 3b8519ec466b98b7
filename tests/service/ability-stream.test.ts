import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import {
  AbilityHandlerError,
  AbilityValidationError,
  svcErrorInfo,
} from '../../src/core/errors.ts';
import { defineAbility, type HandlerFactoryInput } from '../../src/service/ability.ts';
import { createAbilityTarget } from '../../src/service/ability-target.ts';
import { abilityMethod } from '../../src/service/method.ts';
import type { StreamSource } from '../../src/service/types.ts';
import {
  callContextWith,
  echoAbility,
  rejectsWithInfo,
  SECRET,
} from '../support/ability-fixtures.ts';

const tick = z.object({ i: z.number().int() });

/** An ability with one streaming method `items({})` whose source `makeSource` builds. */
function streamingAbility(makeSource: (input: HandlerFactoryInput) => unknown) {
  const inputs: HandlerFactoryInput[] = [];
  const ability = defineAbility({
    id: 'svc-s.items',
    rpc: { transports: ['http-batch', 'websocket'] },
    methods: {
      items: abilityMethod({ input: z.object({}), output: tick, stream: true }),
      unary: abilityMethod({ input: z.object({}), output: z.object({ ok: z.boolean() }) }),
    },
    handler: (input) => {
      inputs.push(input);
      return {
        items: () => makeSource(input) as StreamSource<{ i: number }>,
        unary: () => ({ ok: true }),
      };
    },
  });
  return { ability, inputs };
}

async function readAll(stream: ReadableStream<unknown>): Promise<unknown[]> {
  const items: unknown[] = [];
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return items;
    items.push(value);
  }
}

async function readUntilError(
  stream: ReadableStream<unknown>,
): Promise<{ items: unknown[]; error: unknown }> {
  const items: unknown[] = [];
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return { items, error: undefined };
      items.push(value);
    }
  } catch (error) {
    return { items, error };
  }
}

test('a streaming method turns an async iterable into a plain ReadableStream of items', async () => {
  const { ability, record } = echoAbility();
  const stream = await createAbilityTarget(ability, callContextWith().call).ticks({ n: 3 });
  assert.equal(Object.getPrototypeOf(stream), ReadableStream.prototype);
  assert.deepEqual(await readAll(stream), [{ i: 0 }, { i: 1 }, { i: 2 }]);
  assert.equal(record.factoryCalls, 1);
});

test('a sync iterable source streams its items (promises among them are awaited)', async () => {
  const { ability } = streamingAbility(() => [{ i: 1 }, Promise.resolve({ i: 2 }), { i: 3 }]);
  const stream = await createAbilityTarget(ability, callContextWith().call).items({});
  assert.deepEqual(await readAll(stream), [{ i: 1 }, { i: 2 }, { i: 3 }]);
});

test('a ReadableStream source, even a subclass-built one, is re-created as a plain ReadableStream', async () => {
  const { ability } = streamingAbility(() => {
    const { readable, writable } = new TransformStream<{ i: number }, { i: number }>();
    const writer = writable.getWriter();
    void (async () => {
      for (let i = 0; i < 3; i++) await writer.write({ i });
      await writer.close();
    })();
    return readable;
  });
  const stream = await createAbilityTarget(ability, callContextWith().call).items({});
  assert.equal(Object.getPrototypeOf(stream), ReadableStream.prototype);
  assert.deepEqual(await readAll(stream), [{ i: 0 }, { i: 1 }, { i: 2 }]);
});

test('a handler may return a promise of its source', async () => {
  const { ability } = streamingAbility(async () => [{ i: 7 }]);
  const stream = await createAbilityTarget(ability, callContextWith().call).items({});
  assert.deepEqual(await readAll(stream), [{ i: 7 }]);
});

test('each streamed item is validated: an invalid item ends the stream with a 500 and closes the source', async () => {
  let closed = false;
  const { ability } = streamingAbility(async function* () {
    try {
      yield { i: 1 };
      yield { i: SECRET };
      yield { i: 3 };
    } finally {
      closed = true;
    }
  });
  const { call, events } = callContextWith();
  const stream = await createAbilityTarget(ability, call).items({});
  const { items, error } = await readUntilError(stream);
  assert.deepEqual(items, [{ i: 1 }]);
  assert.ok(error instanceof AbilityValidationError);
  assert.deepEqual(svcErrorInfo(error), {
    code: 'ability_validation',
    status: 500,
    retryable: false,
    reason: 'invalid_output',
  });
  assert.equal(JSON.stringify(error.issues).includes('SECRET'), false);
  assert.equal(closed, true);
  assert.equal(events.length, 0);
});

test('ERR-03 a mid-stream throw ends the stream with the opaque error and is logged', async () => {
  const { ability } = streamingAbility(async function* () {
    yield { i: 1 };
    throw new Error(SECRET);
  });
  const { call, events } = callContextWith({ requestId: 'req-s' });
  const stream = await createAbilityTarget(ability, call).items({});
  const { items, error } = await readUntilError(stream);
  assert.deepEqual(items, [{ i: 1 }]);
  assert.ok(error instanceof Error);
  assert.equal(error.message, 'Svc ability handler failed: items');
  assert.equal('cause' in error, false);
  assert.deepEqual(svcErrorInfo(error), {
    code: 'internal',
    status: 500,
    retryable: false,
    reason: 'handler_failed',
  });
  assert.equal(events.length, 1);
  assert.equal(events[0].event, 'svc.ability.handler_failed');
  assert.equal(events[0].method, 'items');
  assert.equal(events[0].requestId, 'req-s');
});

test('a mid-stream AbilityHandlerError passes through unchanged', async () => {
  const shaped = new AbilityHandlerError('Feed paused', { status: 503, reason: 'paused' });
  const { ability } = streamingAbility(function* () {
    yield { i: 1 };
    throw shaped;
  });
  const { call, events } = callContextWith();
  const { error } = await readUntilError(await createAbilityTarget(ability, call).items({}));
  assert.equal(error, shaped);
  assert.equal(events.length, 0);
});

test('backpressure: the source is pulled one item per read, never far ahead', async () => {
  let produced = 0;
  const { ability } = streamingAbility(async function* () {
    for (let i = 0; i < 1_000; i++) {
      produced += 1;
      yield { i };
    }
  });
  const stream = await createAbilityTarget(ability, callContextWith().call).items({});
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(produced, 0, 'nothing is produced before the first read');
  const reader = stream.getReader();
  await reader.read();
  await reader.read();
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.ok(produced <= 3, `produced ${produced} items for 2 reads`);
  await reader.cancel();
});

test('cancel reaches an async iterable source (its finally runs) and aborts the signal', async () => {
  let finalized = false;
  const { ability, inputs } = streamingAbility(async function* () {
    try {
      for (let i = 0;; i++) yield { i };
    } finally {
      finalized = true;
    }
  });
  const stream = await createAbilityTarget(ability, callContextWith().call).items({});
  const reader = stream.getReader();
  await reader.read();
  await reader.cancel('consumer left');
  assert.equal(finalized, true);
  assert.equal(inputs[0].signal.aborted, true);
});

test('cancel reaches a ReadableStream source', async () => {
  let cancelReason: unknown;
  const { ability } = streamingAbility(() =>
    new ReadableStream({
      pull: (controller) => controller.enqueue({ i: 1 }),
      cancel: (reason) => {
        cancelReason = reason;
      },
    })
  );
  const stream = await createAbilityTarget(ability, callContextWith().call).items({});
  const reader = stream.getReader();
  await reader.read();
  await reader.cancel('stop');
  assert.equal(cancelReason, 'stop');
});

test('cancel reaches a sync iterator source via return()', async () => {
  let returned = false;
  const source = {
    [Symbol.iterator]() {
      let i = 0;
      return {
        next: () => ({ done: false, value: { i: i++ } }),
        return: () => {
          returned = true;
          return { done: true, value: undefined };
        },
      };
    },
  };
  const { ability } = streamingAbility(() => source);
  const reader = (await createAbilityTarget(ability, callContextWith().call).items({})).getReader();
  await reader.read();
  await reader.cancel();
  assert.equal(returned, true);
});

test('a streaming handler returning something that is not a source fails opaquely', async () => {
  for (const value of ['abc', 42, null, { not: 'iterable' }]) {
    const { ability } = streamingAbility(() => value);
    const { call, events } = callContextWith();
    const error = await rejectsWithInfo(createAbilityTarget(ability, call).items({}), {
      code: 'internal',
      reason: 'handler_failed',
    });
    assert.equal(error.message, 'Svc ability handler failed: items');
    assert.equal(events.length, 1);
  }
});

test('ERR-07 a streaming method over HTTP-batch fails with 405; a unary method still works', async () => {
  const { ability, inputs } = streamingAbility(() => [{ i: 1 }]);
  const target = createAbilityTarget(ability, callContextWith({ transport: 'http-batch' }).call);
  const error = await rejectsWithInfo(target.items({}), {
    code: 'internal',
    status: 405,
    retryable: false,
    reason: 'stream_requires_session_transport',
  });
  assert.match(error.message, /session transport/);
  assert.equal(inputs.length, 0);
  assert.deepEqual(await target.unary({}), { ok: true });
});

test('the 405 comes before the scope check (the transport can never stream)', async () => {
  const { ability, record } = echoAbility();
  const { call } = callContextWith({ transport: 'http-batch' });
  call.identity.scopes = [];
  await rejectsWithInfo(createAbilityTarget(ability, call).ticks({ n: 1 }), { status: 405 });
  assert.equal(record.factoryCalls, 0);
});

test('streaming over a custom or native binding transport is allowed', async () => {
  for (const transport of ['custom', 'cloudflare-binding-rpc'] as const) {
    const { ability } = echoAbility(['websocket']);
    const stream = await createAbilityTarget(ability, callContextWith({ transport }).call).ticks({
      n: 2,
    });
    assert.deepEqual(await readAll(stream), [{ i: 0 }, { i: 1 }]);
  }
});

test('a stream is never bounded by the method ceiling', async () => {
  const { ability, inputs } = streamingAbility(async function* () {
    for (let i = 0; i < 4; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      yield { i };
    }
  });
  const { call } = callContextWith({ serviceMethodCeilingMs: 10 });
  const stream = await createAbilityTarget(ability, call).items({});
  assert.deepEqual(await readAll(stream), [{ i: 0 }, { i: 1 }, { i: 2 }, { i: 3 }]);
  assert.equal(inputs[0].signal.aborted, false);
  assert.equal(inputs[0].remainingTimeoutMs(), undefined);
});

test('a streaming call is refused like any call: scopes, input, spent caller deadline', async () => {
  const { ability, record } = echoAbility();
  const noScope = callContextWith();
  noScope.call.identity.scopes = [];
  // `ticks` has no method scope; an ability without scopes admits it, so check input and deadline.
  await rejectsWithInfo(createAbilityTarget(ability, noScope.call).ticks({ n: -1 }), {
    code: 'ability_validation',
    status: 422,
  });
  const late = callContextWith({ callerDeadlineEndsAt: Date.now() - 1 });
  await rejectsWithInfo(createAbilityTarget(ability, late.call).ticks({ n: 1 }), {
    code: 'timeout',
  });
  assert.equal(record.factoryCalls, 0);
});

test('a source that fails after the consumer cancelled is not reported', async () => {
  let release: () => void = () => {};
  const { ability } = streamingAbility(() => ({
    [Symbol.asyncIterator]() {
      return {
        next: () =>
          new Promise<IteratorResult<{ i: number }>>((_, reject) => {
            release = () => reject(new Error(SECRET));
          }),
        return: () => Promise.resolve({ done: true as const, value: undefined }),
      };
    },
  }));
  const { call, events } = callContextWith();
  const reader = (await createAbilityTarget(ability, call).items({})).getReader();
  const pending = reader.read();
  await reader.cancel('gone');
  release();
  assert.deepEqual(await pending, { done: true, value: undefined });
  await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(events.length, 0);
});

test('ERR-03 a source step that is no iterator result, or whose fields throw, is a source failure', async () => {
  const steps: (() => unknown)[] = [
    () => null,
    () => 42,
    () => ({
      get done(): boolean {
        throw new Error(SECRET);
      },
    }),
    () => ({
      done: false,
      get value(): unknown {
        throw new Error(SECRET);
      },
    }),
  ];
  for (const [index, step] of steps.entries()) {
    const { ability } = streamingAbility(() => ({
      [Symbol.asyncIterator]: () => ({ next: () => Promise.resolve(step()) }),
    }));
    const { call, events } = callContextWith();
    const stream = await createAbilityTarget(ability, call).items({});
    const { error } = await readUntilError(stream);
    assert.equal((error as Error)?.message, 'Svc ability handler failed: items', `step ${index}`);
    assert.equal(JSON.stringify(svcErrorInfo(error)).includes('SECRET'), false);
    assert.equal(events.filter((event) => event.event === 'svc.ability.handler_failed').length, 1);
  }
});

test('an item schema whose result throws while being read ends the stream with a 500, no secret', async () => {
  const base = z.object({ ok: z.boolean() });
  const output = {
    '~standard': {
      ...base['~standard'],
      validate: () => ({
        issues: {
          [Symbol.iterator]() {
            throw new Error(SECRET);
          },
        },
      }),
    },
  } as unknown as typeof base;
  const ability = defineAbility({
    id: 'svc-s.broken',
    rpc: { transports: ['websocket'] },
    methods: { items: abilityMethod({ input: z.object({}), output, stream: true }) },
    handler: () => ({
      items: async function* () {
        yield { ok: true };
      },
    }),
  });
  const stream = await createAbilityTarget(ability, callContextWith().call).items({});
  const { error } = await readUntilError(stream);
  assert.ok(error instanceof AbilityValidationError);
  assert.equal(error.reason, 'schema_contract_broken');
  assert.equal(error.status, 500);
  assert.equal(error.message.includes('SECRET'), false);
});

/** A Standard Schema that passes every value through as it is, at once or after a turn. */
function passThrough(waits: boolean) {
  const base = z.unknown();
  return {
    '~standard': {
      ...base['~standard'],
      validate: (value: unknown) => waits ? Promise.resolve({ value }) : { value },
    },
  } as unknown as typeof base;
}

function passThroughAbility(waits: boolean, items: () => unknown[]) {
  return defineAbility({
    id: 'svc-s.through',
    rpc: { transports: ['websocket'] },
    methods: {
      items: abilityMethod({ input: z.object({}), output: passThrough(waits), stream: true }),
    },
    handler: () => ({
      items: async function* () {
        yield* items();
      },
    }),
  });
}

test('items an asynchronous item schema answers for stream in order, each once it settled', async () => {
  const ability = passThroughAbility(true, () => [{ i: 0 }, { i: 1 }, { i: 2 }]);
  const stream = await createAbilityTarget(ability, callContextWith().call).items({});
  assert.deepEqual(await readAll(stream), [{ i: 0 }, { i: 1 }, { i: 2 }]);
});

test('an item whose `then` throws when read ends the stream with the opaque failure, no secret', async () => {
  const hostile = {
    get then() {
      throw new Error(SECRET);
    },
  };
  for (const waits of [false, true]) {
    const ability = passThroughAbility(waits, () => [{ i: 0 }, hostile]);
    const { call, events } = callContextWith();
    const stream = await createAbilityTarget(ability, call).items({});
    const { items, error } = await readUntilError(stream);
    assert.deepEqual(items, [{ i: 0 }], `the first item still arrives (waits: ${waits})`);
    assert.ok(error instanceof Error, `the stream failed (waits: ${waits})`);
    assert.equal(svcErrorInfo(error).status, 500);
    assert.equal(error.message.includes(SECRET), false);
    assert.equal(events.length, 1, 'logged once, with the cause');
  }
});
