import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type } from 'arktype';
import { z } from 'zod';
import {
  AbilityValidationError,
  CapabilityAuthError,
  handlerFailureCause,
  SvcConfigurationError,
  svcErrorInfo,
} from '../../src/core/errors.ts';
import type { SvcSchema } from '../../src/core/schema.ts';
import { defineAbility } from '../../src/service/ability.ts';
import { createAbilityTarget } from '../../src/service/ability-target.ts';
import { abilityMethod } from '../../src/service/method.ts';
import {
  callContextWith,
  echoAbility,
  FAIL_KINDS,
  identityWith,
  rejectsWithInfo,
  SECRET,
} from '../support/ability-fixtures.ts';

// workerd permits code generation only at startup, where arktype compiles its validators, so
// arktype schemas are declared at module scope.
const pickSchema = type({ k: "'a' | 'b'" });
const summarySchema = type({ label: 'string', double: 'number' });
const textSchema = type({ text: 'string' });
const lengthSchema = type({ length: 'number' });

test('a declared method runs the handler with the validated input and returns the validated output', async () => {
  const { ability, record } = echoAbility();
  const { call } = callContextWith();
  const target = createAbilityTarget(ability, call);
  assert.deepEqual(await target.write({ value: 'hello' }), { written: 'hello' });
  assert.equal(record.factoryCalls, 1);
});

test('methods whose names contain dots are reachable by name', async () => {
  const { ability } = echoAbility();
  const target = createAbilityTarget(ability, callContextWith().call);
  assert.deepEqual(await target['items.get']({ id: 'a1' }), { id: 'a1', name: 'item a1' });
});

test('the factory receives context, identity, signal, deadline, idempotency key and request id', async () => {
  const { ability, record } = echoAbility();
  const { call } = callContextWith({ idempotencyKey: 'key-1', requestId: 'req-1' });
  const target = createAbilityTarget(ability, call);
  const result = await target.whoami({});
  assert.equal(result.serviceId, 'svc-caller');
  assert.equal(result.idempotencyKey, 'key-1');
  assert.equal(result.requestId, 'req-1');
  const input = record.inputs[0];
  assert.equal(input.context, call.context);
  // A frozen copy: the handler cannot reach the object the session was created with.
  assert.deepEqual(input.identity, call.identity);
  assert.ok(Object.isFrozen(input.identity) && Object.isFrozen(input.identity.scopes));
  assert.ok(input.signal instanceof AbortSignal);
  assert.equal(input.signal.aborted, false);
  assert.equal('connInfo' in input, false);
});

test('connInfo reaches the factory only when the session carries it', async () => {
  const { ability, record } = echoAbility();
  const connInfo = { remote: { address: '203.0.113.9', addressType: 'IPv4' as const } };
  const target = createAbilityTarget(ability, callContextWith({ connInfo }).call);
  await target.whoami({});
  assert.deepEqual(record.inputs[0].connInfo, connInfo);
});

test('CLM-09 a missing method scope is refused with 403 capability_auth and no handler is created', async () => {
  const { ability, record } = echoAbility();
  const { call } = callContextWith({ identity: identityWith(['svc-a.read']) });
  const target = createAbilityTarget(ability, call);
  const error = await rejectsWithInfo(target.write({ value: 'x' }), {
    code: 'capability_auth',
    status: 403,
    retryable: false,
    reason: 'missing_scope',
  });
  assert.ok(error instanceof CapabilityAuthError);
  assert.match(error.message, /svc-a\.write/);
  assert.equal(record.factoryCalls, 0);
});

test('CLM-10 scopes match exactly: wildcards, case, whitespace and prefixes grant nothing', async () => {
  for (const granted of [['*'], ['svc-a.*'], ['SVC-A.WRITE'], ['svc-a.write '], ['svc-a.writ']]) {
    const { ability, record } = echoAbility();
    const target = createAbilityTarget(
      ability,
      callContextWith({ identity: identityWith(granted) }).call,
    );
    await rejectsWithInfo(target.write({ value: 'x' }), { code: 'capability_auth', status: 403 });
    assert.equal(record.factoryCalls, 0, `granted ${JSON.stringify(granted)}`);
  }
});

test('a scope refusal comes before input validation', async () => {
  const { ability, record } = echoAbility();
  const target = createAbilityTarget(ability, callContextWith({ identity: identityWith([]) }).call);
  // The input is invalid too; the caller learns only that it lacks the scope.
  await rejectsWithInfo(target.write({ value: 42 } as never), { code: 'capability_auth' });
  assert.equal(record.factoryCalls, 0);
});

test('ability-level scopes are required for every method', async () => {
  let factoryCalls = 0;
  const ability = defineAbility({
    id: 'svc-a.admin',
    scopes: ['svc-a.admin'],
    methods: { ping: abilityMethod({ input: z.object({}), output: z.literal('pong') }) },
    handler: () => {
      factoryCalls += 1;
      return { ping: () => 'pong' as const };
    },
  });
  const refused = createAbilityTarget(ability, callContextWith().call);
  await rejectsWithInfo(refused.ping({}), { code: 'capability_auth', reason: 'missing_scope' });
  assert.equal(factoryCalls, 0);
  const allowed = createAbilityTarget(
    ability,
    callContextWith({ identity: identityWith(['svc-a.admin']) }).call,
  );
  assert.equal(await allowed.ping({}), 'pong');
  assert.equal(factoryCalls, 1);
});

test('invalid input is refused with 422 and issues carrying message and path; no handler is created', async () => {
  const { ability, record } = echoAbility();
  const target = createAbilityTarget(ability, callContextWith().call);
  const error = await rejectsWithInfo(target.write({ value: 42 } as never), {
    code: 'ability_validation',
    status: 422,
    retryable: false,
  });
  assert.ok(error instanceof AbilityValidationError);
  assert.equal(error.issues.length, 1);
  assert.deepEqual(error.issues[0].path, ['value']);
  assert.equal(typeof error.issues[0].message, 'string');
  assert.ok(error.issues[0].message.length > 0);
  assert.equal(record.factoryCalls, 0);
});

test('a call with more than one argument is refused as invalid input', async () => {
  const { ability, record } = echoAbility();
  const target = createAbilityTarget(ability, callContextWith().call);
  const write = target.write as unknown as (...args: unknown[]) => Promise<unknown>;
  await rejectsWithInfo(write.call(target, { value: 'a' }, { value: 'b' }), {
    code: 'ability_validation',
    status: 422,
  });
  assert.equal(record.factoryCalls, 0);
});

test('ERR-06 invalid output is ability_validation 500, not retryable, without the offending value', async () => {
  const { ability } = echoAbility();
  const target = createAbilityTarget(ability, callContextWith().call);
  const error = await rejectsWithInfo(target.badOutput({}), {
    code: 'ability_validation',
    status: 500,
    retryable: false,
  });
  assert.ok(error instanceof AbilityValidationError);
  assert.deepEqual(error.issues.map((issue) => issue.path), [['count']]);
  assert.equal(JSON.stringify({ ...error, message: error.message }).includes('SECRET'), false);
});

test('output issue messages are redacted even when the schema library quotes the value', async () => {
  const ability = defineAbility({
    id: 'svc-k.quote',
    methods: {
      // arktype prints the received value in its messages: `(was "...")`.
      pick: abilityMethod({ input: z.object({}), output: pickSchema }),
    },
    handler: () => ({ pick: () => ({ k: SECRET }) as unknown as { k: 'a' } }),
  });
  const error = await rejectsWithInfo(
    createAbilityTarget(ability, callContextWith().call).pick({}),
    { code: 'ability_validation', status: 500 },
  );
  assert.ok(error instanceof AbilityValidationError);
  assert.equal(JSON.stringify(error.issues).includes('SECRET'), false);
  assert.deepEqual(error.issues[0].path, ['k']);
});

test("an output issue path keeps indices and declared property names, never the output's own keys", async () => {
  const secretKey = `${SECRET}@customer.example`;
  const ability = defineAbility({
    id: 'svc-k.records',
    rpc: { transports: ['websocket'] },
    methods: {
      totals: abilityMethod({
        input: z.object({}),
        output: z.object({ rows: z.array(z.record(z.string(), z.number())) }),
      }),
      // A streamed item is checked the same way.
      each: abilityMethod({
        input: z.object({}),
        output: z.record(z.string(), z.number()),
        stream: true,
      }),
    },
    handler: () => ({
      totals: () => ({ rows: [{ ok: 1 }, { [secretKey]: 'n/a' }] }) as never,
      each: async function* () {
        yield { [secretKey]: 'n/a' } as never;
      },
    }),
  });
  const target = createAbilityTarget(ability, callContextWith().call);
  const error = await rejectsWithInfo(target.totals({}), {
    code: 'ability_validation',
    status: 500,
  });
  assert.ok(error instanceof AbilityValidationError);
  assert.equal(JSON.stringify(error.issues).includes(SECRET), false);
  assert.deepEqual(error.issues[0].path, ['rows', 1, '*']);
  const stream = await target.each({}) as ReadableStream<unknown>;
  const itemError = await stream.getReader().read().then(
    () => assert.fail('an invalid item was delivered'),
    (failure: unknown) => failure,
  );
  assert.ok(itemError instanceof AbilityValidationError);
  assert.equal(JSON.stringify(itemError.issues).includes(SECRET), false);
  assert.deepEqual(itemError.issues[0].path, ['*']);
});

function brokenSchema(validate: (value: unknown) => unknown): SvcSchema {
  const jsonSchema = () => ({ type: 'object' });
  return {
    '~standard': {
      version: 1,
      vendor: 'broken',
      validate,
      jsonSchema: { input: jsonSchema, output: jsonSchema },
    },
  } as unknown as SvcSchema;
}

test('a schema that throws or returns neither value nor issues fails closed', async () => {
  let factoryCalls = 0;
  const ability = defineAbility({
    id: 'svc-b.broken',
    methods: {
      throwsOnInput: abilityMethod({
        input: brokenSchema(() => {
          throw new Error('schema bug');
        }),
        output: z.object({}),
      }),
      emptyOutput: abilityMethod({ input: z.object({}), output: brokenSchema(() => ({})) }),
    },
    handler: () => {
      factoryCalls += 1;
      return { throwsOnInput: () => ({}), emptyOutput: () => ({}) };
    },
  });
  const target = createAbilityTarget(ability, callContextWith().call);
  await rejectsWithInfo(target.throwsOnInput({}), { code: 'ability_validation', status: 422 });
  assert.equal(factoryCalls, 0);
  await rejectsWithInfo(target.emptyOutput({}), { code: 'ability_validation', status: 500 });
  assert.equal(factoryCalls, 1);
});

test('a method with a zod input and an arktype output validates both sides', async () => {
  const ability = defineAbility({
    id: 'svc-m.mixed',
    methods: {
      summarize: abilityMethod({
        input: z.object({ n: z.number() }),
        output: summarySchema,
      }),
    },
    handler: () => ({ summarize: ({ n }) => ({ label: `n=${n}`, double: n * 2 }) }),
  });
  const target = createAbilityTarget(ability, callContextWith().call);
  assert.deepEqual(await target.summarize({ n: 4 }), { label: 'n=4', double: 8 });
  await rejectsWithInfo(target.summarize({ n: 'four' } as never), { status: 422 });
});

test('an arktype ability transforms input before the handler sees it', async () => {
  const seen: unknown[] = [];
  const ability = defineAbility({
    id: 'svc-k.ark',
    methods: {
      trim: abilityMethod({
        input: textSchema,
        output: lengthSchema,
      }),
    },
    handler: () => ({
      trim: (input) => {
        seen.push(input);
        return { length: input.text.length };
      },
    }),
  });
  const target = createAbilityTarget(ability, callContextWith().call);
  assert.deepEqual(await target.trim({ text: 'abc' }), { length: 3 });
  assert.deepEqual(seen, [{ text: 'abc' }]);
  const error = await rejectsWithInfo(target.trim({ text: 7 } as never), { status: 422 });
  assert.ok(error instanceof AbilityValidationError);
  assert.deepEqual(error.issues[0].path, ['text']);
});

test('the handler factory runs once per call and never for a refused call', async () => {
  const { ability, record } = echoAbility();
  const target = createAbilityTarget(ability, callContextWith().call);
  await target.write({ value: 'a' });
  await target.write({ value: 'b' });
  await rejectsWithInfo(target.write({ value: '' }), { status: 422 });
  assert.equal(record.factoryCalls, 2);
});

test('IDEM-05 the same idempotency key on two calls runs the handler twice (no deduplication)', async () => {
  const { ability, record } = echoAbility();
  const target = createAbilityTarget(ability, callContextWith({ idempotencyKey: 'same' }).call);
  await target.write({ value: 'a' });
  await target.write({ value: 'a' });
  assert.equal(record.factoryCalls, 2);
  assert.deepEqual(record.inputs.map((input) => input.idempotencyKey), ['same', 'same']);
});

for (const kind of FAIL_KINDS) {
  test(`ERR-01/ERR-02 a handler throwing ${kind} is replaced with the opaque 500 and logged once`, async () => {
    const { ability } = echoAbility();
    const { call, events } = callContextWith({ requestId: 'req-9' });
    const target = createAbilityTarget(ability, call);
    const error = await rejectsWithInfo(target.fail({ kind }), {
      code: 'internal',
      status: 500,
      retryable: false,
      reason: 'handler_failed',
    });
    assert.equal(error.message, 'Svc ability handler failed: fail');
    assert.equal('cause' in error, false);
    assert.equal(String(error.stack).includes('SECRET'), false);
    assert.equal(String(error.stack).includes('/'), false, 'no file paths in the stack');
    assert.equal(JSON.stringify({ ...error }).includes('SECRET'), false);
    assert.equal(events.length, 1);
    const event = events[0];
    assert.equal(event.event, 'svc.ability.handler_failed');
    assert.equal(event.level, 'error');
    assert.equal(event.requestId, 'req-9');
    assert.equal(event.ability, 'svc-a.echo');
    assert.equal(event.method, 'fail');
    const logged = event.error as { name: string; message: string };
    assert.equal(typeof logged.name, 'string');
    assert.equal(typeof logged.message, 'string');
  });
}

test('handlerFailureCause returns the original throw in-process', async () => {
  const { ability } = echoAbility();
  const { call, events } = callContextWith();
  const target = createAbilityTarget(ability, call);
  const error = await rejectsWithInfo(target.fail({ kind: 'type-error' }), { code: 'internal' });
  const cause = handlerFailureCause(error);
  assert.ok(cause instanceof TypeError);
  assert.equal(cause.message, SECRET);
  assert.deepEqual(events[0].error, { name: 'TypeError', message: SECRET });
});

test('a cause chain holding a taxonomy error is still replaced (only the thrown error counts)', async () => {
  const { ability } = echoAbility();
  const target = createAbilityTarget(ability, callContextWith().call);
  const error = await rejectsWithInfo(target.fail({ kind: 'cause' }), { status: 500 });
  assert.equal(error.message, 'Svc ability handler failed: fail');
});

test('the log event omits requestId when the session has none', async () => {
  const { ability } = echoAbility();
  const { call, events } = callContextWith();
  await rejectsWithInfo(createAbilityTarget(ability, call).fail({ kind: 'error' }), {});
  assert.equal('requestId' in events[0], false);
  assert.deepEqual(events[0].error, { name: 'Error', message: SECRET });
});

test('a throwing log sink does not change the opaque failure', async () => {
  const { ability } = echoAbility();
  const { call } = callContextWith({
    log: () => {
      throw new Error('sink down');
    },
  });
  const error = await rejectsWithInfo(createAbilityTarget(ability, call).fail({ kind: 'error' }), {
    reason: 'handler_failed',
  });
  assert.equal(error.message, 'Svc ability handler failed: fail');
});

test('ERR-04 AbilityHandlerError passes through with its status, retryable, reason and message', async () => {
  const { ability } = echoAbility();
  const { call, events } = callContextWith();
  const error = await rejectsWithInfo(
    createAbilityTarget(ability, call).failShaped({
      status: 429,
      retryable: true,
      reason: 'quota',
    }),
    { code: 'handler', status: 429, retryable: true, reason: 'quota' },
  );
  assert.equal(error.message, 'Quota exceeded');
  assert.equal(events.length, 0);
});

test('ERR-05 AbilityHandlerError defaults: 503 retryable, 500 not retryable', async () => {
  const { ability } = echoAbility();
  const target = createAbilityTarget(ability, callContextWith().call);
  await rejectsWithInfo(target.failShaped({ status: 503 }), { code: 'handler', retryable: true });
  await rejectsWithInfo(target.failShaped({ status: 500 }), { code: 'handler', retryable: false });
});

test('a received taxonomy error (a plain Error with a valid code) passes through unchanged', async () => {
  const received = Object.assign(new Error('Downstream refused'), {
    code: 'capability_auth',
    status: 403,
    retryable: false,
    reason: 'missing_scope',
  });
  const ability = defineAbility({
    id: 'svc-h.hop',
    methods: { relay: abilityMethod({ input: z.object({}), output: z.object({}) }) },
    handler: () => ({
      relay: () => {
        throw received;
      },
    }),
  });
  const { call, events } = callContextWith();
  await assert.rejects(createAbilityTarget(ability, call).relay({}), (error) => error === received);
  assert.equal(events.length, 0);
});

test('an error with an unknown code is not mistaken for a taxonomy error', async () => {
  const ability = defineAbility({
    id: 'svc-h.sys',
    methods: { read: abilityMethod({ input: z.object({}), output: z.object({}) }) },
    handler: () => ({
      read: () => {
        throw Object.assign(new Error(SECRET), { code: 'ENOENT' });
      },
    }),
  });
  const error = await rejectsWithInfo(
    createAbilityTarget(ability, callContextWith().call).read({}),
    { code: 'internal', status: 500 },
  );
  assert.equal(error.message, 'Svc ability handler failed: read');
});

test('a throwing handler factory is a handler failure (opaque, logged)', async () => {
  const ability = defineAbility({
    id: 'svc-f.factory',
    methods: { go: abilityMethod({ input: z.object({}), output: z.object({}) }) },
    handler: () => {
      throw new Error(SECRET);
    },
  });
  const { call, events } = callContextWith();
  const error = await rejectsWithInfo(createAbilityTarget(ability, call).go({}), {
    reason: 'handler_failed',
  });
  assert.equal(error.message, 'Svc ability handler failed: go');
  assert.equal(events.length, 1);
});

test('a handler object lacking the method fails opaquely instead of reaching anything else', async () => {
  const ability = defineAbility({
    id: 'svc-f.missing',
    methods: { go: abilityMethod({ input: z.object({}), output: z.object({}) }) },
    handler: () => ({}) as never,
  });
  const { call, events } = callContextWith();
  await rejectsWithInfo(createAbilityTarget(ability, call).go({}), { reason: 'handler_failed' });
  assert.match((events[0].error as { message: string }).message, /no method "go"/);
});

test('a handler can reject with CapabilityAuthError via requireScopes and it passes through', async () => {
  const ability = defineAbility({
    id: 'svc-s.strict',
    methods: { admin: abilityMethod({ input: z.object({}), output: z.object({}) }) },
    handler: () => ({
      admin() {
        throw new CapabilityAuthError('needs admin', { status: 403, reason: 'missing_scope' });
      },
    }),
  });
  await rejectsWithInfo(createAbilityTarget(ability, callContextWith().call).admin({}), {
    code: 'capability_auth',
    status: 403,
  });
});

test('createAbilityTarget refuses an ability that defineAbility did not produce', () => {
  const { ability } = echoAbility();
  assert.throws(
    () => createAbilityTarget({ ...ability }, callContextWith().call),
    SvcConfigurationError,
  );
});

test('the target class is built once per ability and shared by every session', () => {
  const { ability } = echoAbility();
  const first = createAbilityTarget(ability, callContextWith().call);
  const second = createAbilityTarget(ability, callContextWith().call);
  assert.equal(Object.getPrototypeOf(first), Object.getPrototypeOf(second));
  assert.notEqual(first, second);
  assert.deepEqual(Object.keys(first), [], 'no instance properties');
});

test('ERR-08 undeclared names are not methods of the target', () => {
  const { ability } = echoAbility();
  const target = createAbilityTarget(ability, callContextWith().call) as unknown as Record<
    string,
    unknown
  >;
  assert.equal(target.nope, undefined);
  assert.equal(target.authenticate, undefined);
  assert.equal(Object.hasOwn(Object.getPrototypeOf(target), 'nope'), false);
  const declared = Object.getOwnPropertyNames(Object.getPrototypeOf(target)).sort();
  assert.deepEqual(declared, [
    'badOutput',
    'constructor',
    'fail',
    'failMidStream',
    'failShaped',
    'items.get',
    'sleep',
    'ticks',
    'whoami',
    'write',
  ]);
});

test('a method detached from its target refuses to run', async () => {
  const { ability, record } = echoAbility();
  const target = createAbilityTarget(ability, callContextWith().call);
  const detached = target.write;
  await rejectsWithInfo(detached.call({}, { value: 'x' }), { code: 'internal' });
  assert.equal(record.factoryCalls, 0);
});

test('a handler error whose fields throw when read is replaced by the opaque failure and logged', async () => {
  const ability = defineAbility({
    id: 'svc-h.getter',
    methods: { read: abilityMethod({ input: z.object({}), output: z.object({}) }) },
    handler: () => ({
      read: () => {
        const error = new Error('db down');
        Object.defineProperty(error, 'code', {
          enumerable: true,
          get() {
            throw new Error('SECRET-from-getter');
          },
        });
        throw error;
      },
    }),
  });
  const { call, events } = callContextWith();
  await assert.rejects(createAbilityTarget(ability, call).read({}), (error: unknown) => {
    assert.equal((error as Error).message, 'Svc ability handler failed: read');
    assert.equal(JSON.stringify(svcErrorInfo(error)).includes('SECRET'), false);
    return true;
  });
  assert.equal(events.filter((event) => event.event === 'svc.ability.handler_failed').length, 1);
});
