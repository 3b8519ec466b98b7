// Contract: Errors (taxonomy and rules 1-7), through svc-a's fixture methods and small abilities
// deployed for the rule at hand.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import {
  AbilityHandlerError,
  AbilityValidationError,
  handlerFailureCause,
  svcErrorInfo,
} from '../../src/core/errors.ts';
import { defineAbility } from '../../src/service/ability.ts';
import { createAbilityTarget } from '../../src/service/ability-target.ts';
import { abilityMethod } from '../../src/service/method.ts';
import { WITHHELD_ERROR_MESSAGE } from '../../src/service/rpc-serve.ts';
import { assertRefusal, createFixture, type Fixture } from './fixture.ts';
import { createFixtureStats, echoAbility } from './fixture-abilities.ts';

const anyObject = z.record(z.string(), z.unknown());

/** svc-c.relay: calls a method of svc-a.echo and lets whatever it throws propagate. */
function relayAbility(fx: Fixture) {
  return defineAbility({
    id: 'svc-c.relay',
    methods: {
      relay: abilityMethod({
        input: z.object({ method: z.string(), input: anyObject }),
        output: anyObject,
      }),
    },
    handler: () => ({
      async relay({ method, input }: { method: string; input: Record<string, unknown> }) {
        using downstream = fx.session('svc-a.echo');
        return (await downstream[method](input)) as Record<string, unknown>;
      },
    }),
  });
}

/** svc-c.forged: throws an Error carrying whatever taxonomy-looking fields it is given. */
const forgedAbility = defineAbility({
  id: 'svc-c.forged',
  methods: { raise: abilityMethod({ input: anyObject, output: anyObject }) },
  handler: () => ({
    raise(fields: Record<string, unknown>): Record<string, unknown> {
      throw Object.assign(new Error('forged by a peer'), fields);
    },
  }),
});

test('Errors taxonomy: capability_auth is 401 for an invalid token, 403 for scope or access', async () => {
  const fx = await createFixture();
  using invalid = fx.session('svc-a.echo', { token: 'a.b.c' });
  await assertRefusal(invalid.whoami({}), {
    code: 'capability_auth',
    status: 401,
    retryable: false,
  });
  using unscoped = fx.session('svc-a.echo', { scopes: ['svc-a.read'] });
  await assertRefusal(unscoped.write({}), { code: 'capability_auth', status: 403 });
  using wrongClass = fx.session('svc-a.internal', {
    token: await fx.tokenFor('svc-a', ['svc-a.internal'], { spa: 'plane' }),
  });
  await assertRefusal(wrongClass.whoami({}), { code: 'capability_auth', status: 403 });
});

test('Errors taxonomy: ability_validation is 422 for input, 500 for output', async () => {
  const fx = await createFixture();
  using session = fx.session('svc-a.echo');
  const invalid = await assertRefusal(session.sleep({ ms: -1 }), {
    code: 'ability_validation',
    status: 422,
    retryable: false,
  });
  // Rebuilt as a plain error on arrival: the class is gone, the fields are not.
  assert.equal(invalid instanceof AbilityValidationError, false);
  await assertRefusal(session.badOutput({}), { code: 'ability_validation', status: 500 });
});

test('Errors taxonomy: timeout is 504, handler is author-chosen, internal is 500', async () => {
  const fx = await createFixture();
  const slow = fx.httpBatch('svc-a', { headers: { 'X-Svc-Timeout': '20' } });
  using timed = fx.session('svc-a.echo', { transport: slow.transport });
  await assertRefusal(timed.sleep({ ms: 500 }), { code: 'timeout', status: 504, retryable: true });
  using session = fx.session('svc-a.echo');
  await assertRefusal(session.failShaped({ status: 418, reason: 'teapot' }), {
    code: 'handler',
    status: 418,
    reason: 'teapot',
  });
  await assertRefusal(session.fail({ kind: 'error' }), {
    code: 'internal',
    status: 500,
    retryable: false,
  });
});

test('Errors r1: a method failure travels inside the RPC batch; the HTTP response is 200', async () => {
  const fx = await createFixture();
  const batch = fx.httpBatch('svc-a');
  const token = await fx.tokenFor('svc-a', []);
  using session = fx.session('svc-a.echo', { token, transport: batch.transport });
  const results = await Promise.allSettled([
    session.whoami({}),
    session.failShaped({ status: 503, reason: 'down' }),
    session.fail({ kind: 'error' }),
  ]);
  assert.deepEqual(results.map((result) => result.status), ['rejected', 'rejected', 'rejected']);
  assert.equal(batch.exchanges.length, 1);
  assert.equal(batch.exchanges[0].response.status, 200);
  const rejects = batch.exchanges[0].body.split('\n').filter((line) =>
    line.startsWith('["reject"')
  );
  assert.equal(rejects.length, 3);
});

test('Errors r2: retryable defaults true for 408, 429, 502, 503, 504; explicit values win', async () => {
  const fx = await createFixture();
  using session = fx.session('svc-a.echo');
  for (const status of [408, 429, 502, 503, 504, 400, 409, 500, 501]) {
    const expected = [408, 429, 502, 503, 504].includes(status);
    await assertRefusal(session.failShaped({ status, reason: 'default' }), {
      code: 'handler',
      status,
      retryable: expected,
    }, String(status));
  }
  await assertRefusal(session.failShaped({ status: 503, retryable: false, reason: 'explicit' }), {
    code: 'handler',
    status: 503,
    retryable: false,
  });
  await assertRefusal(session.failShaped({ status: 500, retryable: true, reason: 'explicit' }), {
    code: 'handler',
    status: 500,
    retryable: true,
  });
});

test('Errors r3: AbilityValidationError.issues is a list of { message, path? }', async () => {
  const fx = await createFixture();
  using session = fx.session('svc-a.echo');
  const error = await assertRefusal(session['items.update']({ id: 7 }), {
    code: 'ability_validation',
    status: 422,
  });
  const issues = (error as unknown as { issues: Record<string, unknown>[] }).issues;
  assert.ok(Array.isArray(issues) && issues.length === 2, JSON.stringify(issues));
  for (const issue of issues) {
    assert.equal(typeof issue.message, 'string');
    assert.ok(Object.keys(issue).every((key) => key === 'message' || key === 'path'));
  }
  assert.deepEqual(issues.map((issue) => issue.path).sort(), [['id'], ['name']]);
  // Locally the class carries the same shape.
  const local = new AbilityValidationError('bad', { issues: [{ message: 'm' }] });
  assert.deepEqual(local.issues, [{ message: 'm' }]);
});

test('Errors r4: a received error is a plain Error; svcErrorInfo re-validates every field', async () => {
  const fx = await createFixture();
  using session = fx.session('svc-a.echo');
  const received = await assertRefusal(
    session.failShaped({ status: 429, retryable: true, reason: 'quota' }),
    { code: 'handler', status: 429 },
  );
  assert.equal(received instanceof AbilityHandlerError, false);
  for (const key of ['code', 'status', 'retryable', 'reason']) {
    assert.ok(Object.keys(received).includes(key), key);
  }
  fx.deploy('svc-c', [forgedAbility]);
  using forged = fx.session('svc-c.forged', { token: await fx.tokenFor('svc-c', []) });
  // A peer claiming a retryable refusal, a 200 timeout or a malformed code gets no say.
  const refusal = await forged.raise({ code: 'capability_auth', status: 401, retryable: true })
    .catch((error: unknown) => error);
  assert.equal((refusal as { retryable: unknown }).retryable, true);
  assert.deepEqual(svcErrorInfo(refusal), {
    code: 'capability_auth',
    status: 401,
    retryable: false,
  });
  const timeout = await forged.raise({ code: 'timeout', status: 200, retryable: false })
    .catch((error: unknown) => error);
  assert.deepEqual(svcErrorInfo(timeout), { code: 'timeout', status: 504, retryable: true });
  const unknown = await forged.raise({ code: 'teapot', status: 418 }).catch((error) => error);
  assert.deepEqual(svcErrorInfo(unknown), {
    code: 'internal',
    status: 500,
    retryable: false,
    reason: 'handler_failed',
  });
  assert.equal((unknown as Error).message, 'Svc ability handler failed: raise');
});

test('Errors r5: other throws become the opaque 500; the original stays in-process, never as cause', async () => {
  const fx = await createFixture();
  using session = fx.session('svc-a.echo');
  const received = await assertRefusal(session.fail({ kind: 'cause' }), {
    code: 'internal',
    status: 500,
    retryable: false,
  });
  assert.equal(received.message, 'Svc ability handler failed: fail');
  assert.equal(received.cause, undefined);
  assert.equal(handlerFailureCause(received), undefined);
  const logged = fx.events.filter((event) => event.event === 'svc.ability.handler_failed');
  assert.deepEqual(logged.map((event) => event.error), [{ name: 'Error', message: 'outer' }]);

  // In the process that replaced it, the original is reachable through handlerFailureCause.
  const stats = createFixtureStats();
  const events: unknown[] = [];
  const target = createAbilityTarget(echoAbility(stats), {
    identity: {
      serviceId: 'svc-caller',
      audience: 'svc-a',
      scopes: ['svc-a.read'],
      tokenId: 't',
      issuer: 'i',
      expiresAt: new Date(Date.now() + 60_000),
      callerAccess: 'service',
    },
    context: {},
    transport: 'websocket',
    log: (event) => void events.push(event),
  }) as unknown as Record<string, (input: unknown) => Promise<unknown>>;
  const local = await target.fail({ kind: 'error' }).catch((error: unknown) => error) as Error;
  assert.equal(local.message, 'Svc ability handler failed: fail');
  assert.equal(local.cause, undefined);
  assert.equal(local.stack?.includes(stats.marker) ?? false, false);
  const original = handlerFailureCause(local) as Error;
  assert.equal(original.message, `${stats.marker} postgres://u:p@db`);
  // The same holds for a stream failing mid-way.
  const stream = await target.failMidStream({ after: 1 }) as ReadableStream<unknown>;
  const reader = stream.getReader();
  assert.deepEqual((await reader.read()).value, { i: 0 });
  const midStream = await reader.read().catch((error: unknown) => error) as Error;
  assert.equal(midStream.message, 'Svc ability handler failed: failMidStream');
  assert.equal((handlerFailureCause(midStream) as Error).message, `${stats.marker} mid-stream`);
  assert.equal(events.length, 2);
});

test('Errors r6: a taxonomy error rebuilt by an intermediate hop passes through unchanged', async () => {
  const fx = await createFixture();
  fx.deploy('svc-c', [relayAbility(fx)]);
  using session = fx.session('svc-c.relay', { token: await fx.tokenFor('svc-c', []) });
  const shaped = await assertRefusal(
    session.relay({
      method: 'failShaped',
      input: { status: 429, retryable: true, reason: 'quota' },
    }),
    { code: 'handler', status: 429, retryable: true, reason: 'quota' },
  );
  assert.equal(shaped.message, 'Quota exceeded');
  const opaque = await assertRefusal(session.relay({ method: 'fail', input: { kind: 'error' } }), {
    code: 'internal',
    status: 500,
    reason: 'handler_failed',
  });
  // svc-a's opaque error, not a second replacement by svc-c.
  assert.equal(opaque.message, 'Svc ability handler failed: fail');
  const replaced = fx.events.filter((event) => event.event === 'svc.ability.handler_failed');
  assert.deepEqual(replaced.map((event) => event.ability), ['svc-a.echo']);
});

test('Errors r7: AbilityHandlerError lets the handler choose message, reason, status, retryable', async () => {
  const fx = await createFixture();
  using session = fx.session('svc-a.echo');
  const error = await assertRefusal(
    session.failShaped({ status: 409, retryable: true, reason: 'version_conflict' }),
    { code: 'handler', status: 409, retryable: true, reason: 'version_conflict' },
  );
  assert.equal(error.message, 'Shaped failure');
  const local = new AbilityHandlerError('Gone', { status: 410, reason: 'gone' });
  assert.deepEqual(svcErrorInfo(local), {
    code: 'handler',
    status: 410,
    retryable: false,
    reason: 'gone',
  });
});

/** A strict proxy (ORM row, config object) that throws on every member read, `then` included. */
function strictRow(marker: string): object {
  return new Proxy({}, {
    get(_target, key) {
      throw new Error(`${marker}: no member ${String(key)}`);
    },
  });
}

/** svc-c.rows: returns, awaits or streams a strict proxy under a schema that lets it through. */
function deployRows(fx: Fixture) {
  fx.deploy('svc-c', [
    defineAbility({
      id: 'svc-c.rows',
      rpc: { transports: ['http-batch', 'websocket'] },
      methods: {
        get: abilityMethod({ input: z.object({}), output: z.unknown() }),
        load: abilityMethod({ input: z.object({}), output: z.unknown() }),
        scan: abilityMethod({ input: z.object({}), output: z.unknown(), stream: true }),
      },
      handler: () => ({
        get: () => strictRow(fx.stats.marker),
        load: async () => await Promise.resolve({ row: 1 }).then(() => strictRow(fx.stats.marker)),
        // A stream source hands items over as they are; an iterable's would be awaited first.
        scan: () =>
          new ReadableStream({
            start(controller) {
              controller.enqueue({ i: 0 });
              controller.enqueue(strictRow(fx.stats.marker));
              controller.close();
            },
          }),
      }),
    }),
  ]);
}

const HANDLER_FAILED = {
  code: 'internal',
  status: 500,
  retryable: false,
  reason: 'handler_failed',
} as const;

test('Errors r7: an AbilityHandlerError the caller could not read back fails as the opaque 500, logged for its author', async () => {
  const fx = await createFixture();
  fx.deploy('svc-c', [
    defineAbility({
      id: 'svc-c.misused',
      methods: {
        badStatus: abilityMethod({ input: z.object({}), output: z.object({}) }),
        badReason: abilityMethod({ input: z.object({}), output: z.object({}) }),
      },
      handler: () => ({
        badStatus(): Record<string, never> {
          throw new AbilityHandlerError('Teapot', { status: 200 });
        },
        badReason(): Record<string, never> {
          throw new AbilityHandlerError('Quota', { status: 429, reason: 'quota exceeded' });
        },
      }),
    }),
  ]);
  using session = fx.session('svc-c.misused', { token: await fx.tokenFor('svc-c', []) });
  const status = await assertRefusal(session.badStatus({}), HANDLER_FAILED);
  assert.equal(status.message, 'Svc ability handler failed: badStatus');
  const reason = await assertRefusal(session.badReason({}), HANDLER_FAILED);
  assert.equal(reason.message, 'Svc ability handler failed: badReason');
  const failed = fx.events.filter((event) => event.event === 'svc.ability.handler_failed');
  assert.deepEqual(failed.map((event) => [event.method, (event.error as Error).name]), [
    ['badStatus', 'TypeError'],
    ['badReason', 'TypeError'],
  ]);
  assert.match(String((failed[0].error as Error).message), /status must be an integer/);
  assert.match(String((failed[1].error as Error).message), /reason must be/);
});

test('Errors r5: a returned value whose `then` getter throws is the opaque 500, logged, its text withheld', async () => {
  const fx = await createFixture();
  deployRows(fx);
  const batch = fx.httpBatch('svc-c');
  using session = fx.session('svc-c.rows', {
    token: await fx.tokenFor('svc-c', []),
    transport: batch.transport,
  });
  const sync = await assertRefusal(session.get({}), HANDLER_FAILED);
  assert.equal(sync.message, 'Svc ability handler failed: get');
  const awaited = await assertRefusal(session.load({}), HANDLER_FAILED);
  assert.equal(awaited.message, 'Svc ability handler failed: load');
  for (const exchange of batch.exchanges) {
    assert.equal(exchange.response.status, 200);
    assert.equal(exchange.body.includes(fx.stats.marker), false, `leaked: ${exchange.body}`);
  }
  const failed = fx.events.filter((event) => event.event === 'svc.ability.handler_failed');
  assert.deepEqual(failed.map((event) => [event.ability, event.method]), [
    ['svc-c.rows', 'get'],
    ['svc-c.rows', 'load'],
  ]);
  // The log, and only the log, keeps the original message.
  assert.ok(failed.every((event) => String((event.error as Error).message).includes('then')));
});

test('Errors r5: a streamed item whose `then` getter throws ends the stream with the opaque 500, logged', async () => {
  const fx = await createFixture();
  deployRows(fx);
  const socket = fx.webSocket('svc-c.rows');
  using session = fx.session('svc-c.rows', {
    token: await fx.tokenFor('svc-c', []),
    transport: socket.transport,
  });
  const reader = (await session.scan({}) as ReadableStream<unknown>).getReader();
  assert.deepEqual((await reader.read()).value, { i: 0 });
  const ended = await assertRefusal(reader.read(), HANDLER_FAILED);
  assert.equal(ended.message, 'Svc ability handler failed: scan');
  const frames = socket.frames.join('\n');
  assert.equal(frames.includes(fx.stats.marker), false, `leaked: ${frames}`);
  const failed = fx.events.filter((event) => event.event === 'svc.ability.handler_failed');
  assert.deepEqual(failed.map((event) => event.method), ['scan']);
});

test('Errors r5: a thrown proxy whose prototype lookup throws is still the opaque 500, logged', async () => {
  const fx = await createFixture();
  const marker = fx.stats.marker;
  fx.deploy('svc-c', [
    defineAbility({
      id: 'svc-c.hostile',
      methods: { raise: abilityMethod({ input: z.object({}), output: z.object({}) }) },
      handler: () => ({
        raise(): never {
          throw new Proxy(new Error(marker), {
            getPrototypeOf() {
              throw new Error(`${marker} from getPrototypeOf`);
            },
          });
        },
      }),
    }),
  ]);
  const batch = fx.httpBatch('svc-c');
  using session = fx.session('svc-c.hostile', {
    token: await fx.tokenFor('svc-c', []),
    transport: batch.transport,
  });
  const refused = await assertRefusal(session.raise({}), HANDLER_FAILED);
  assert.equal(refused.message, 'Svc ability handler failed: raise');
  assert.equal(batch.exchanges[0].body.includes(marker), false, batch.exchanges[0].body);
  const failed = fx.events.filter((event) => event.event === 'svc.ability.handler_failed');
  assert.deepEqual(failed.map((event) => event.method), ['raise']);
});

test("Errors r5: an output Cap'n Web cannot send leaves as the withheld internal 500, logged", async () => {
  const fx = await createFixture();
  const marker = fx.stats.marker;
  // A driver value type (decimal, object id) under a permissive output schema.
  class Decimal {
    constructor(readonly digits: string) {}
    toString(): string {
      return `${marker} ${this.digits}`;
    }
  }
  fx.deploy('svc-c', [
    defineAbility({
      id: 'svc-c.money',
      methods: {
        balance: abilityMethod({
          input: z.object({}),
          output: z.object({ amount: z.unknown() }),
        }),
      },
      handler: () => ({ balance: () => ({ amount: new Decimal('1234.56') }) }),
    }),
  ]);
  const batch = fx.httpBatch('svc-c');
  using session = fx.session('svc-c.money', {
    token: await fx.tokenFor('svc-c', []),
    transport: batch.transport,
  });
  const refused = await assertRefusal(session.balance({}), {
    code: 'internal',
    status: 500,
    retryable: false,
    reason: 'error_withheld',
  });
  assert.equal(refused.message, WITHHELD_ERROR_MESSAGE);
  assert.equal(batch.exchanges[0].response.status, 200);
  assert.equal(batch.exchanges[0].body.includes(marker), false, batch.exchanges[0].body);
  const failed = fx.events.filter((event) => event.event === 'svc.ability.handler_failed');
  assert.equal(failed.length, 1);
  assert.equal(failed[0].ability, 'svc-c.money');
  assert.equal(failed[0].reason, 'error_withheld');
  assert.match(String((failed[0].error as Error).message), /Cannot serialize value/);
  // Taxonomy errors still pass through this backstop untouched (rules 5 and 6, above).
  assert.equal(fx.events.some((event) => event.event === 'svc.request.failed'), false);
});
