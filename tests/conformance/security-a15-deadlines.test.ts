// Security checklist A15: deadline budgets from the wire are advisory input. Malformed values
// are ignored, large ones clamped, and a budget fails methods without closing sessions or
// standing in for authorization.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { MAX_SVC_TIMEOUT_MS } from '../../src/core/deadline.ts';
import { abilityMethod } from '../../src/service/method.ts';
import { defineAbility } from '../../src/service/ability.ts';
import { assertRefusal, createFixture, type Fixture } from './fixture.ts';
import {
  echoAbility,
  internalAbility,
  otherAbility,
  privateAbility,
  whoamiOnlyAbility,
} from './fixture-abilities.ts';

interface Report {
  remainingTimeoutMs: number | null;
}

const TIMEOUT = { code: 'timeout', status: 504, retryable: true } as const;

/** svc-a redeployed without a service-wide ceiling, so what a handler sees is the caller's budget. */
function withoutCeiling(fx: Fixture, timeout: { defaultMs?: number } = {}): void {
  fx.replaceService(
    'svc-a',
    fx.createService({
      id: 'svc-a',
      abilities: [
        echoAbility(fx.stats),
        otherAbility(fx.stats),
        internalAbility(fx.stats),
        privateAbility(fx.stats),
      ],
      timeout: { methodMs: false, ...timeout },
    }),
  );
}

const wait = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });

const sleepInput = z.object({ ms: z.number().int() });
const sleepOutput = z.object({ slept: z.boolean() });

/** svc-c.slow: two sleeping methods with 200 ms and 1000 ms ceilings (DL-07). */
const slowAbility = defineAbility({
  id: 'svc-c.slow',
  methods: {
    ceiling200: abilityMethod({ input: sleepInput, output: sleepOutput, timeoutMs: 200 }),
    ceiling10000: abilityMethod({ input: sleepInput, output: sleepOutput, timeoutMs: 10_000 }),
  },
  handler: ({ signal }) => ({
    async ceiling200({ ms }: { ms: number }) {
      await wait(ms, signal);
      return { slept: true };
    },
    async ceiling10000({ ms }: { ms: number }) {
      await wait(ms, signal);
      return { slept: true };
    },
  }),
});

test('DL-01 malformed X-Svc-Timeout values are ignored; a configured defaultMs applies', async () => {
  const fx = await createFixture();
  withoutCeiling(fx);
  for (const value of ['-5', '0', '1.5', '1e3', 'abc', '0x10', '', '5000 x']) {
    const batch = fx.httpBatch('svc-a', { headers: { 'X-Svc-Timeout': value } });
    using session = fx.session('svc-a.echo', { transport: batch.transport });
    const report = (await session.whoami({})) as Report;
    assert.equal(report.remainingTimeoutMs, null, JSON.stringify(value));
    assert.equal(batch.exchanges[0].request.headers.get('x-svc-timeout'), value);
  }
  withoutCeiling(fx, { defaultMs: 3000 });
  for (const value of ['abc', '-5']) {
    const batch = fx.httpBatch('svc-a', { headers: { 'X-Svc-Timeout': value } });
    using session = fx.session('svc-a.echo', { transport: batch.transport });
    const remaining = ((await session.whoami({})) as Report).remainingTimeoutMs;
    assert.ok(remaining !== null && remaining > 2000 && remaining <= 3000, String(remaining));
  }
});

test('DL-02 a 700000 ms budget is clamped to MAX_SVC_TIMEOUT_MS', async () => {
  const fx = await createFixture();
  withoutCeiling(fx);
  const batch = fx.httpBatch('svc-a', { headers: { 'X-Svc-Timeout': '700000' } });
  using session = fx.session('svc-a.echo', { transport: batch.transport });
  const remaining = ((await session.whoami({})) as Report).remainingTimeoutMs;
  assert.ok(
    remaining !== null && remaining > 599_000 && remaining <= MAX_SVC_TIMEOUT_MS,
    String(remaining),
  );
});

test('DL-03 HTTP-batch: X-Svc-Timeout 1 fails sleep with timeout/504, retryable', async () => {
  const fx = await createFixture();
  const batch = fx.httpBatch('svc-a', { headers: { 'X-Svc-Timeout': '1' } });
  using session = fx.session('svc-a.echo', { transport: batch.transport });
  await assertRefusal(session.sleep({ ms: 300 }), TIMEOUT);
  assert.equal(batch.exchanges[0].response.status, 200);
});

test('DL-03 WebSocket: timeout=500 bounds every call on the socket, which stays open', async () => {
  const fx = await createFixture();
  const socket = fx.webSocket('svc-a.echo', { query: { timeout: '500' } });
  using session = fx.session('svc-a.echo', { transport: socket.transport });
  const started = Date.now();
  await assertRefusal(session.sleep({ ms: 1000 }), TIMEOUT);
  const elapsed = Date.now() - started;
  // Not before the budget; had it not applied, the sleep would have succeeded.
  assert.ok(elapsed >= 450, `sleep failed after ${elapsed} ms`);
  // The budget was fixed when the socket opened; it is spent for every later call too.
  await assertRefusal(session.whoami({}), TIMEOUT);
  assert.equal(socket.connections.length, 1);
  assert.equal(socket.connections[0].state, 'open');
  await assertRefusal(session.whoami({}), TIMEOUT);
});

test('DL-04 a deadline is not an authorization input', async () => {
  const fx = await createFixture();
  {
    const batch = fx.httpBatch('svc-a', { headers: { 'X-Svc-Timeout': '5000' } });
    using session = fx.session('svc-a.echo', { token: 'not-a-token', transport: batch.transport });
    await assertRefusal(session.whoami({}), { code: 'capability_auth', status: 401 });
  }
  {
    const batch = fx.httpBatch('svc-b', { headers: { 'X-Svc-Timeout': '5000' } });
    using session = fx.session('svc-b.echo', {
      scopes: ['svc-b.read'],
      transport: batch.transport,
    });
    await assertRefusal(session.whoami({}), {
      code: 'capability_auth',
      status: 403,
      reason: 'ingress_required',
    });
  }
  assert.equal(fx.count('factories', 'svc-a.echo'), 0);
  assert.equal(fx.count('factories', 'svc-b.echo'), 0);
});

test('DL-05 WebSocket timeout query: malformed values are ignored, large ones clamped and fixed', async () => {
  const fx = await createFixture();
  withoutCeiling(fx);
  for (const value of ['-1', 'abc', '1e9']) {
    const socket = fx.webSocket('svc-a.echo', { query: { timeout: value } });
    using session = fx.session('svc-a.echo', { transport: socket.transport });
    assert.equal(((await session.whoami({})) as Report).remainingTimeoutMs, null, value);
    assert.equal(((await session.whoami({})) as Report).remainingTimeoutMs, null, value);
  }
  const socket = fx.webSocket('svc-a.echo', { query: { timeout: '900000' } });
  using session = fx.session('svc-a.echo', { transport: socket.transport });
  const first = ((await session.whoami({})) as Report).remainingTimeoutMs;
  assert.ok(first !== null && first > 599_000 && first <= MAX_SVC_TIMEOUT_MS, String(first));
  await new Promise((resolve) => setTimeout(resolve, 40));
  const second = ((await session.whoami({})) as Report).remainingTimeoutMs;
  // Measured from the socket's opening, not refreshed per call.
  assert.ok(second !== null && second <= first - 30, `${first} then ${second}`);
});

test('DL-06 an exhausted budget at the plane fails before any service session opens', async () => {
  const fx = await createFixture({ servicesDelayMs: 50 });
  using session = fx.plane.abilitySession<{ whoami(input: unknown): unknown }>({
    abilityId: 'svc-a.echo',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    timeoutMs: 1,
  });
  await assertRefusal(session.whoami({}), TIMEOUT);
  const rpcRequests = fx.events.filter((event) =>
    typeof event.path === 'string' && event.path.startsWith('/rpc/')
  );
  assert.deepEqual(rpcRequests, []);
  assert.equal(fx.count('factories', 'svc-a.echo'), 0);
});

test('DL-07 the earlier of the method ceiling and the caller budget wins', async () => {
  const fx = await createFixture();
  fx.replaceService(
    'svc-c',
    fx.createService({
      id: 'svc-c',
      abilities: [whoamiOnlyAbility(fx.stats, 'svc-c'), slowAbility],
    }),
  );
  const token = (await fx.plane.issueCapabilityToken({
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-c',
    scopes: ['svc-c.read'],
    callerAccess: 'service',
  })).token;
  const timed = async (budget: string, call: (session: SlowApi) => Promise<unknown>) => {
    const batch = fx.httpBatch('svc-c', { headers: { 'X-Svc-Timeout': budget } });
    using session = fx.session<SlowApi>('svc-c.slow', { token, transport: batch.transport });
    const started = Date.now();
    await assertRefusal(call(session), TIMEOUT);
    return Date.now() - started;
  };
  const ceilingFirst = await timed('5000', (s) => s.ceiling200({ ms: 1000 }));
  // Had the 5000 ms budget applied, the 1000 ms sleep would have succeeded.
  assert.ok(ceilingFirst >= 180, `ceiling 200: ${ceilingFirst} ms`);
  // The ceiling is two orders of magnitude past the budget, so a busy machine's late timers
  // cannot make the budget look like the ceiling (the handler ends at its aborted signal).
  const budgetFirst = await timed('100', (s) => s.ceiling10000({ ms: 20_000 }));
  assert.ok(budgetFirst >= 90 && budgetFirst < 1_000, `budget 100: ${budgetFirst} ms`);
});

interface SlowApi {
  ceiling200(input: { ms: number }): Promise<unknown>;
  ceiling10000(input: { ms: number }): Promise<unknown>;
}
