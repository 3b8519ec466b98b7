// Contract: Method definition. Each field through a deployed service; schemas from zod and
// arktype side by side (arktype at module scope: workerd forbids code generation later).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type } from 'arktype';
import { z } from 'zod';
import { svcErrorInfo } from '../../src/core/errors.ts';
import type { SvcSchema } from '../../src/core/schema.ts';
import { defineAbility } from '../../src/service/ability.ts';
import { abilityMethod } from '../../src/service/method.ts';
import { assertRefusal, createFixture, type Fixture } from './fixture.ts';

const anyObject = z.record(z.string(), z.unknown());
const arkTotal = type({ total: 'number.integer', label: 'string' });
const arkTick = type({ i: 'number.integer' });
const zodSum = z.object({ values: z.array(z.number()) });

/** A Standard Schema whose validator misbehaves as told, with a valid JSON Schema projection. */
function brokenSchema(validate: (value: unknown) => unknown): SvcSchema {
  return {
    '~standard': {
      version: 1 as const,
      vendor: 'broken',
      validate,
      jsonSchema: { input: () => ({ type: 'object' }), output: () => ({ type: 'object' }) },
    },
  } as unknown as SvcSchema;
}

function assertRefusedMethod(define: () => unknown, field: string, label = field): void {
  assert.throws(define, (error: unknown) => {
    assert.ok(error instanceof Error, label);
    assert.equal(svcErrorInfo(error).code, 'internal', label);
    assert.match(String((error as { reason?: string }).reason), /^invalid_method/, label);
    assert.ok(error.message.includes(field), `${label}: ${error.message}`);
    return true;
  });
}

/** Deploys `methods` as svc-c.m (HTTP-batch and WebSocket) and returns the service-class token. */
async function deployMethods(
  fx: Fixture,
  // deno-lint-ignore no-explicit-any
  methods: Record<string, any>,
  handler: Record<string, (input: never) => unknown>,
) {
  const service = fx.deploy('svc-c', [
    defineAbility({
      id: 'svc-c.m',
      rpc: { transports: ['http-batch', 'websocket'] },
      methods,
      handler: () => handler as never,
    }),
  ]);
  const token = await fx.tokenFor('svc-c', ['svc-c.read']);
  return { service, token, methods: service.discovery().abilities[0].methods };
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

test('Method definition input/output: schemas are chosen per side (zod input, arktype output)', async () => {
  const fx = await createFixture();
  let calls = 0;
  const { token, methods } = await deployMethods(fx, {
    sum: abilityMethod({ input: zodSum, output: arkTotal }),
    wrongOutput: abilityMethod({ input: zodSum, output: arkTotal }),
  }, {
    sum({ values }: { values: number[] }) {
      calls++;
      return { total: values.reduce((a, b) => a + b, 0), label: 'sum' };
    },
    wrongOutput() {
      calls++;
      return { total: 1.5, label: 'fraction' };
    },
  });
  assert.deepEqual(methods.sum.inputSchema.required, ['values']);
  assert.deepEqual(methods.sum.outputSchema.properties, {
    label: { type: 'string' },
    total: { type: 'integer' },
  });
  using session = fx.session('svc-c.m', { token });
  assert.deepEqual(await session.sum({ values: [1, 2, 3] }), { total: 6, label: 'sum' });
  const invalid = await assertRefusal(session.sum({ values: ['x'] }), {
    code: 'ability_validation',
    status: 422,
  });
  assert.deepEqual((invalid as unknown as { issues: { path: unknown[] }[] }).issues[0].path, [
    'values',
    0,
  ]);
  assert.equal(calls, 1, 'invalid input never reaches the handler');
  await assertRefusal(session.wrongOutput({ values: [] }), {
    code: 'ability_validation',
    status: 500,
  });
});

test('Method definition output: a streaming method validates each item', async () => {
  const fx = await createFixture();
  const { token, methods } = await deployMethods(fx, {
    ticks: abilityMethod({ input: anyObject, output: arkTick, stream: true }),
  }, {
    async *ticks() {
      yield { i: 0 };
      yield { i: 1 };
      yield { i: 'two' };
      yield { i: 3 };
    },
  });
  assert.equal(methods.ticks.stream, true);
  assert.deepEqual(methods.ticks.outputSchema.properties, { i: { type: 'integer' } });
  const socket = fx.webSocket('svc-c.m');
  using session = fx.session('svc-c.m', { token, transport: socket.transport });
  const reader = ((await session.ticks({})) as ReadableStream<unknown>).getReader();
  assert.deepEqual((await reader.read()).value, { i: 0 });
  assert.deepEqual((await reader.read()).value, { i: 1 });
  await assertRefusal(reader.read(), { code: 'ability_validation', status: 500 });
});

test('Method definition scopes: enforced by the wrapper before the handler', async () => {
  const fx = await createFixture();
  let calls = 0;
  const { token, methods } = await deployMethods(fx, {
    guarded: abilityMethod({ input: anyObject, output: anyObject, scopes: ['svc-c.admin'] }),
  }, {
    guarded() {
      calls++;
      return {};
    },
  });
  assert.deepEqual(methods.guarded.scopes, ['svc-c.admin']);
  using session = fx.session('svc-c.m', { token });
  await assertRefusal(session.guarded({}), { code: 'capability_auth', status: 403 });
  assert.equal(calls, 0);
  using admin = fx.session('svc-c.m', { token: await fx.tokenFor('svc-c', ['svc-c.admin']) });
  assert.deepEqual(await admin.guarded({}), {});
});

test('Method definition rest: method, path and a 2xx status (default 200)', async () => {
  const fx = await createFixture();
  const item = z.object({ id: z.string(), name: z.string().optional() });
  const { methods } = await deployMethods(fx, {
    get: abilityMethod({
      input: item,
      output: anyObject,
      rest: { method: 'get', path: '/i/{id}' },
    }),
    put: abilityMethod({
      input: item,
      output: anyObject,
      rest: { method: 'put', path: '/i/{id}', status: 201 },
    }),
    find: abilityMethod({ input: item, output: anyObject, rest: { method: 'query', path: '/f' } }),
  }, { get: () => ({}), put: () => ({}), find: () => ({}) });
  assert.deepEqual(methods.get.rest, { method: 'get', path: '/i/{id}', status: 200 });
  assert.deepEqual(methods.put.rest, { method: 'put', path: '/i/{id}', status: 201 });
  assert.deepEqual(methods.find.rest, { method: 'query', path: '/f', status: 200 });
  for (const method of ['post', 'patch', 'delete']) {
    abilityMethod({
      input: item,
      output: anyObject,
      rest: { method: method as 'post', path: '/x' },
    });
  }
  const define = (rest: unknown) => () =>
    abilityMethod({ input: item, output: anyObject, rest: rest as never });
  assertRefusedMethod(define({ method: 'head', path: '/x' }), 'rest.method');
  assertRefusedMethod(define({ method: 'get', path: '/x', status: 404 }), 'rest.status');
  assertRefusedMethod(define({ method: 'get', path: '/x', status: 301 }), 'rest.status');
  assertRefusedMethod(define({ method: 'get', path: '/x/{nope}' }), 'nope');
  assertRefusedMethod(define({ method: 'get', path: 'x' }), 'rest.path');
});

test('Method definition mcp: { name, description } is projected as published', async () => {
  const fx = await createFixture();
  const { methods } = await deployMethods(fx, {
    tool: abilityMethod({
      input: anyObject,
      output: anyObject,
      mcp: { name: 'svc-c_tool', description: 'A tool' },
    }),
    plain: abilityMethod({ input: anyObject, output: anyObject }),
  }, { tool: () => ({}), plain: () => ({}) });
  assert.deepEqual(methods.tool.mcp, { name: 'svc-c_tool', description: 'A tool' });
  assert.equal('mcp' in methods.plain, false);
  assertRefusedMethod(
    () =>
      abilityMethod({
        input: anyObject,
        output: anyObject,
        mcp: { name: 'has space', description: 'x' },
      }),
    'mcp.name',
  );
});

test('Method definition idempotent: `true` is projected; an unmarked method makes no claim', async () => {
  const fx = await createFixture();
  const { methods } = await deployMethods(fx, {
    safe: abilityMethod({ input: anyObject, output: anyObject, idempotent: true }),
    unmarked: abilityMethod({ input: anyObject, output: anyObject }),
  }, { safe: () => ({}), unmarked: () => ({}) });
  assert.equal(methods.safe.idempotent, true);
  assert.equal('idempotent' in methods.unmarked, false);
  assertRefusedMethod(
    () => abilityMethod({ input: anyObject, output: anyObject, idempotent: false as never }),
    'idempotent',
  );
});

test('Method definition stream: an async iterable, a sync iterable or a ReadableStream', async () => {
  const fx = await createFixture();
  const tick = z.object({ i: z.number().int() });
  const { token, methods } = await deployMethods(fx, {
    asyncIterable: abilityMethod({ input: anyObject, output: tick, stream: true }),
    syncIterable: abilityMethod({ input: anyObject, output: tick, stream: true }),
    readable: abilityMethod({ input: anyObject, output: tick, stream: true }),
    unary: abilityMethod({ input: anyObject, output: tick }),
  }, {
    async *asyncIterable() {
      for (let i = 0; i < 3; i++) yield { i };
    },
    syncIterable() {
      return [{ i: 0 }, { i: 1 }, { i: 2 }];
    },
    readable() {
      let i = 0;
      return new ReadableStream({
        pull(controller) {
          if (i < 3) controller.enqueue({ i: i++ });
          else controller.close();
        },
      });
    },
    unary: () => ({ i: 0 }),
  });
  assert.equal('stream' in methods.unary, false);
  const socket = fx.webSocket('svc-c.m');
  using session = fx.session('svc-c.m', { token, transport: socket.transport });
  for (const name of ['asyncIterable', 'syncIterable', 'readable']) {
    assert.equal(methods[name].stream, true);
    const stream = (await session[name]({})) as ReadableStream<unknown>;
    assert.deepEqual(await readAll(stream), [{ i: 0 }, { i: 1 }, { i: 2 }], name);
  }
});

test('Method definition timeoutMs: a non-negative integer, 0 opts out, not clamped to the wire limit', async () => {
  const fx = await createFixture();
  const seen: Record<string, number | undefined> = {};
  const service = fx.deploy('svc-c', [
    defineAbility({
      id: 'svc-c.m',
      methods: {
        optedOut: abilityMethod({ input: anyObject, output: anyObject, timeoutMs: 0 }),
        hour: abilityMethod({ input: anyObject, output: anyObject, timeoutMs: 3_600_000 }),
        byDefault: abilityMethod({ input: anyObject, output: anyObject }),
      },
      handler: ({ remainingTimeoutMs }) => ({
        optedOut: () => (seen.optedOut = remainingTimeoutMs(), {}),
        hour: () => (seen.hour = remainingTimeoutMs(), {}),
        byDefault: () => (seen.byDefault = remainingTimeoutMs(), {}),
      }),
    }),
  ]);
  const methods = service.discovery().abilities[0].methods;
  assert.equal(methods.optedOut.timeoutMs, 0);
  assert.equal(methods.hour.timeoutMs, 3_600_000);
  assert.equal(methods.byDefault.timeoutMs, 10_000);
  using session = fx.session('svc-c.m', { token: await fx.tokenFor('svc-c', []) });
  await session.optedOut({});
  await session.hour({});
  await session.byDefault({});
  assert.equal(seen.optedOut, undefined);
  assert.ok(seen.hour !== undefined && seen.hour > 600_000, String(seen.hour));
  assert.ok(seen.byDefault !== undefined && seen.byDefault <= 10_000, String(seen.byDefault));
  for (const timeoutMs of [-1, 1.5, 1e12, Number.NaN, '100']) {
    assertRefusedMethod(
      () => abilityMethod({ input: anyObject, output: anyObject, timeoutMs: timeoutMs as number }),
      'timeoutMs',
      String(timeoutMs),
    );
  }
});

test('Method definition schemas: a schema that breaks its contract fails closed (AbilityValidationError)', async () => {
  const fx = await createFixture();
  let calls = 0;
  const { token } = await deployMethods(fx, {
    throwingInput: abilityMethod({
      input: brokenSchema(() => {
        throw new Error('validator exploded');
      }),
      output: anyObject,
    }),
    emptyInput: abilityMethod({ input: brokenSchema(() => ({})), output: anyObject }),
    emptyOutput: abilityMethod({ input: anyObject, output: brokenSchema(() => ({})) }),
  }, {
    throwingInput: () => (calls++, {}),
    emptyInput: () => (calls++, {}),
    emptyOutput: () => (calls++, {}),
  });
  using session = fx.session('svc-c.m', { token });
  for (const name of ['throwingInput', 'emptyInput']) {
    const error = await assertRefusal(session[name]({}), {
      code: 'ability_validation',
      status: 422,
      reason: 'schema_contract_broken',
    }, name);
    assert.equal(error.message.includes('exploded'), false);
  }
  assert.equal(calls, 0);
  await assertRefusal(session.emptyOutput({}), {
    code: 'ability_validation',
    status: 500,
    reason: 'schema_contract_broken',
  });
});

test('Method definition schemas: lacking ~standard.validate or ~standard.jsonSchema is refused at definition', () => {
  const noJsonSchema = { '~standard': { version: 1, vendor: 'x', validate: () => ({ value: 1 }) } };
  const noValidate = {
    '~standard': {
      version: 1,
      vendor: 'x',
      jsonSchema: { input: () => ({}), output: () => ({}) },
    },
  };
  assertRefusedMethod(
    () => abilityMethod({ input: noJsonSchema as never, output: anyObject }),
    'jsonSchema',
  );
  assertRefusedMethod(
    () => abilityMethod({ input: anyObject, output: noValidate as never }),
    'validate',
  );
  assertRefusedMethod(() => abilityMethod({ input: {} as never, output: anyObject }), 'input');
});
