import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { DEFAULT_ABILITY_TIMEOUT_MS } from '../../src/core/deadline.ts';
import { SvcTimeoutError } from '../../src/core/errors.ts';
import type { SvcSchema } from '../../src/core/schema.ts';
import { defineAbility, type HandlerFactoryInput } from '../../src/service/ability.ts';
import { createAbilityTarget } from '../../src/service/ability-target.ts';
import { abilityMethod } from '../../src/service/method.ts';
import { recordFiredTimers } from '../support/wall-clock.ts';
import {
  callContextWith,
  echoAbility,
  rejectsWithInfo,
  sleepUnlessAborted,
} from '../support/ability-fixtures.ts';

/** An ability with one `sleep({ ms })` method whose ceiling is `timeoutMs`. */
function sleeperAbility(timeoutMs?: number) {
  const inputs: HandlerFactoryInput[] = [];
  const ability = defineAbility({
    id: 'svc-d.sleeper',
    methods: {
      sleep: abilityMethod({
        input: z.object({ ms: z.number() }),
        output: z.object({ slept: z.number() }),
        ...(timeoutMs !== undefined ? { timeoutMs } : {}),
      }),
    },
    handler: (input) => {
      inputs.push(input);
      return {
        async sleep({ ms }) {
          await sleepUnlessAborted(ms, input.signal);
          return { slept: ms };
        },
      };
    },
  });
  return { ability, inputs };
}

async function elapsedMs(work: () => Promise<unknown>): Promise<number> {
  const startedAt = Date.now();
  await work();
  return Date.now() - startedAt;
}

test('DL-07 the method ceiling wins when it expires before the caller budget', async () => {
  const { ability, inputs } = sleeperAbility(100);
  const { call } = callContextWith({ callerDeadlineEndsAt: Date.now() + 3_000 });
  const target = createAbilityTarget(ability, call);
  const elapsed = await elapsedMs(() =>
    rejectsWithInfo(target.sleep({ ms: 2_000 }), { code: 'timeout', status: 504, retryable: true })
  );
  assert.ok(elapsed >= 90 && elapsed < 1_500, `failed after ${elapsed} ms`);
  assert.equal(inputs[0].signal.aborted, true);
  assert.ok(inputs[0].signal.reason instanceof SvcTimeoutError);
});

test('DL-07 the caller budget wins when it expires before the method ceiling', async () => {
  const { ability, inputs } = sleeperAbility(2_000);
  const { call } = callContextWith({ callerDeadlineEndsAt: Date.now() + 80 });
  const target = createAbilityTarget(ability, call);
  const elapsed = await elapsedMs(() =>
    rejectsWithInfo(target.sleep({ ms: 1_500 }), { code: 'timeout', status: 504 })
  );
  assert.ok(elapsed >= 60 && elapsed < 1_000, `failed after ${elapsed} ms`);
  assert.equal(inputs[0].signal.aborted, true);
});

test('a timeout does not close the session: the same target serves the next call', async () => {
  const { ability, inputs } = sleeperAbility(50);
  const target = createAbilityTarget(ability, callContextWith().call);
  await rejectsWithInfo(target.sleep({ ms: 1_000 }), { code: 'timeout' });
  assert.deepEqual(await target.sleep({ ms: 1 }), { slept: 1 });
  assert.equal(inputs.length, 2);
  assert.equal(inputs[1].signal.aborted, false);
});

test('the service ceiling bounds methods without their own timeoutMs', async () => {
  const { ability } = sleeperAbility();
  const target = createAbilityTarget(ability, callContextWith({ serviceMethodCeilingMs: 50 }).call);
  await rejectsWithInfo(target.sleep({ ms: 1_000 }), { code: 'timeout', status: 504 });
});

test('timeoutMs 0 opts a method out of the service ceiling', async () => {
  const { ability } = sleeperAbility(0);
  const target = createAbilityTarget(ability, callContextWith({ serviceMethodCeilingMs: 20 }).call);
  assert.deepEqual(await target.sleep({ ms: 80 }), { slept: 80 });
});

test('a method timeoutMs overrides a shorter service ceiling', async () => {
  const { ability } = sleeperAbility(1_000);
  const target = createAbilityTarget(ability, callContextWith({ serviceMethodCeilingMs: 20 }).call);
  assert.deepEqual(await target.sleep({ ms: 60 }), { slept: 60 });
});

test('service ceiling false removes the ceiling: remainingTimeoutMs is undefined', async () => {
  const { ability, inputs } = sleeperAbility();
  const target = createAbilityTarget(
    ability,
    callContextWith({ serviceMethodCeilingMs: false }).call,
  );
  assert.deepEqual(await target.sleep({ ms: 40 }), { slept: 40 });
  assert.equal(inputs[0].remainingTimeoutMs(), undefined);
});

test('without configuration a unary method is bounded by DEFAULT_ABILITY_TIMEOUT_MS', async () => {
  const { ability, inputs } = sleeperAbility();
  const target = createAbilityTarget(ability, callContextWith().call);
  await target.sleep({ ms: 1 });
  const remaining = inputs[0].remainingTimeoutMs();
  assert.equal(typeof remaining, 'number');
  assert.ok(
    remaining! <= DEFAULT_ABILITY_TIMEOUT_MS && remaining! > DEFAULT_ABILITY_TIMEOUT_MS - 5_000,
  );
});

test('remainingTimeoutMs reports the earlier deadline and 0 once it is gone', async () => {
  const { ability, inputs } = sleeperAbility(5_000);
  const { call } = callContextWith({ callerDeadlineEndsAt: Date.now() + 60 });
  const target = createAbilityTarget(ability, call);
  await rejectsWithInfo(target.sleep({ ms: 1_000 }), { code: 'timeout' });
  assert.equal(inputs[0].remainingTimeoutMs(), 0);
});

test('remainingTimeoutMs follows the caller budget when it is shorter than the ceiling', async () => {
  const { ability, record } = echoAbility();
  const { call } = callContextWith({ callerDeadlineEndsAt: Date.now() + 3_000 });
  const result = await createAbilityTarget(ability, call).whoami({});
  assert.ok(result.remainingTimeoutMs! <= 3_000 && result.remainingTimeoutMs! > 0);
  assert.equal(record.factoryCalls, 1);
});

test('a caller deadline already passed fails at once without creating a handler', async () => {
  const { ability, inputs } = sleeperAbility();
  const { call } = callContextWith({ callerDeadlineEndsAt: Date.now() - 1 });
  const target = createAbilityTarget(ability, call);
  // A handler would sleep 10 s; the refusal takes a few ms, with ≥10× slack either way.
  const elapsed = await elapsedMs(() =>
    rejectsWithInfo(target.sleep({ ms: 10_000 }), { code: 'timeout', status: 504, retryable: true })
  );
  assert.ok(elapsed < 1_000, `failed after ${elapsed} ms`);
  assert.equal(inputs.length, 0);
});

test('a scope refusal still wins over a spent caller deadline', async () => {
  const { ability, record } = echoAbility();
  const { call } = callContextWith({ callerDeadlineEndsAt: Date.now() - 1 });
  call.identity.scopes = [];
  await rejectsWithInfo(createAbilityTarget(ability, call).whoami({}), {
    code: 'capability_auth',
  });
  assert.equal(record.factoryCalls, 0);
});

function slowSchema(delayMs: number): SvcSchema {
  const jsonSchema = () => ({ type: 'object' });
  return {
    '~standard': {
      version: 1,
      vendor: 'slow',
      validate: (value: unknown) =>
        new Promise((resolve) => setTimeout(() => resolve({ value }), delayMs)),
      jsonSchema: { input: jsonSchema, output: jsonSchema },
    },
  } as unknown as SvcSchema;
}

test('a deadline that passes during input validation never creates the handler', async () => {
  let factoryCalls = 0;
  const ability = defineAbility({
    id: 'svc-d.slowinput',
    methods: {
      go: abilityMethod({ input: slowSchema(120), output: z.object({}), timeoutMs: 30 }),
    },
    handler: () => {
      factoryCalls += 1;
      return { go: () => ({}) };
    },
  });
  await rejectsWithInfo(createAbilityTarget(ability, callContextWith().call).go({}), {
    code: 'timeout',
  });
  // Let the slow validation finish: the handler must still not be created afterwards.
  await new Promise((resolve) => setTimeout(resolve, 150));
  assert.equal(factoryCalls, 0);
});

test('a handler that ignores its signal still has its call failed at the deadline', async () => {
  const ability = defineAbility({
    id: 'svc-d.stubborn',
    methods: { go: abilityMethod({ input: z.object({}), output: z.object({}), timeoutMs: 40 }) },
    handler: () => ({
      go: () => new Promise<Record<string, never>>((resolve) => setTimeout(() => resolve({}), 150)),
    }),
  });
  const { call, events } = callContextWith();
  // Whether the call waited for the handler is read from the timers that had fired when it was
  // refused, not from the clock: timers fire in deadline order however late a busy machine runs.
  const timers = recordFiredTimers();
  let firedAtRefusal: number[];
  try {
    await rejectsWithInfo(
      createAbilityTarget(ability, call).go({}).finally(
        () => (firedAtRefusal = [...timers.delays]),
      ),
      { code: 'timeout' },
    );
  } finally {
    timers.restore();
  }
  // The 40 ms deadline ended it; the handler's 150 ms timer had not fired.
  assert.ok(Math.max(0, ...firedAtRefusal!) <= 40, `fired: ${firedAtRefusal!.join(', ')}`);
  await new Promise((resolve) => setTimeout(resolve, 150));
  assert.equal(events.length, 0, 'a late result is dropped silently');
});

test('what a handler throws after its deadline aborted it is not logged as a handler failure', async () => {
  const ability = defineAbility({
    id: 'svc-d.aborting',
    methods: { go: abilityMethod({ input: z.object({}), output: z.object({}), timeoutMs: 30 }) },
    handler: ({ signal }) => ({
      go: () =>
        new Promise<Record<string, never>>((_, reject) => {
          // Like fetch with a signal: rejects with an AbortError of its own once aborted.
          signal.addEventListener('abort', () => {
            reject(new DOMException('The operation was aborted', 'AbortError'));
          });
        }),
    }),
  });
  const { call, events } = callContextWith();
  await rejectsWithInfo(createAbilityTarget(ability, call).go({}), { code: 'timeout' });
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(events.length, 0);
});
