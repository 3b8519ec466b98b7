// Contract: Limits rule 3 (deadline semantics), over HTTP-batch and WebSocket.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { DEFAULT_ABILITY_TIMEOUT_MS, SVC_TIMEOUT_GRACE_MS } from '../../src/core/deadline.ts';
import { SvcConfigurationError, svcErrorInfo } from '../../src/core/errors.ts';
import { defineAbility } from '../../src/service/ability.ts';
import { abilityMethod } from '../../src/service/method.ts';
import { websocketRpc } from '../../src/caller/transports/websocket.ts';
import type { RpcTransportFactory } from '../../src/caller/transports/outbound-metadata.ts';
import { memoryWebSocketFactory } from '../../src/testing/mod.ts';
import { assertRefusal, createFixture, type Fixture } from './fixture.ts';
import { echoAbility } from './fixture-abilities.ts';
import { recordFiredTimers, steppableWallClock } from '../support/wall-clock.ts';

const TIMEOUT = { code: 'timeout', status: 504, retryable: true } as const;
const anyObject = z.record(z.string(), z.unknown());
const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Observation {
  remainingAtStart?: number;
  remainingAfterAbort?: number;
  aborted?: boolean;
  finished?: boolean;
}

/**
 * svc-c.timed: `sleep` ignores its signal (and records what it saw), `wait` returns when the
 * signal aborts, `relay` forwards what is left of its budget to svc-a, `ticks` streams.
 */
function deployTimed(fx: Fixture, options: { methodMs?: number } = {}) {
  const seen: Observation[] = [];
  fx.deploy('svc-c', [
    defineAbility({
      id: 'svc-c.timed',
      rpc: { transports: ['http-batch', 'websocket'] },
      methods: {
        sleep: abilityMethod({ input: z.object({ ms: z.number() }), output: anyObject }),
        wait: abilityMethod({ input: anyObject, output: anyObject }),
        relay: abilityMethod({ input: z.object({ pauseMs: z.number() }), output: anyObject }),
        remaining: abilityMethod({ input: anyObject, output: anyObject }),
        capped: abilityMethod({ input: anyObject, output: anyObject, timeoutMs: 100 }),
        ticks: abilityMethod({ input: anyObject, output: anyObject, stream: true }),
      },
      handler: ({ signal, remainingTimeoutMs }) => ({
        async sleep({ ms }: { ms: number }) {
          const observation: Observation = { remainingAtStart: remainingTimeoutMs() };
          seen.push(observation);
          await delay(ms);
          observation.aborted = signal.aborted;
          observation.finished = true;
          return {};
        },
        async wait() {
          const observation: Observation = {};
          seen.push(observation);
          await new Promise((resolve) => signal.addEventListener('abort', resolve));
          observation.remainingAfterAbort = remainingTimeoutMs();
          return {};
        },
        async relay({ pauseMs }: { pauseMs: number }) {
          const mine = remainingTimeoutMs();
          await delay(pauseMs);
          using downstream = fx.session('svc-a.echo', { timeoutMs: remainingTimeoutMs() });
          const report = (await downstream.whoami({})) as { remainingTimeoutMs: number };
          return { mine, downstream: report.remainingTimeoutMs };
        },
        remaining: () => ({ remaining: remainingTimeoutMs() ?? null }),
        capped: async () => (await delay(1000), {}),
        ticks() {
          return [0, 1, 2, 3].map((i) => ({ i, remaining: remainingTimeoutMs() ?? null }));
        },
      }),
    }),
  ], options.methodMs === undefined ? {} : { timeout: { methodMs: options.methodMs } });
  return { seen, token: fx.tokenFor('svc-c', []) };
}

interface TimedApi {
  sleep(input: { ms: number }): Promise<unknown>;
  wait(input: object): Promise<unknown>;
  relay(input: { pauseMs: number }): Promise<{ mine: number; downstream: number }>;
  remaining(input: object): Promise<{ remaining: number | null }>;
  capped(input: object): Promise<unknown>;
  ticks(input: object): Promise<ReadableStream<{ i: number; remaining: number | null }>>;
}

test('Limits r3: the budget is relative milliseconds, forwarded as what is left', async () => {
  const fx = await createFixture();
  const { token } = deployTimed(fx);
  const batch = fx.httpBatch('svc-c');
  using overBatch = fx.session<TimedApi>('svc-c.timed', {
    token: await token,
    timeoutMs: 5000,
    transport: batch.transport,
  });
  const { remaining } = await overBatch.remaining({});
  const sent = Number(batch.exchanges[0].request.headers.get('x-svc-timeout'));
  assert.ok(Number.isInteger(sent) && sent > 4000 && sent <= 5000, String(sent));
  assert.ok(remaining !== null && remaining <= sent && remaining > 3900, String(remaining));
  const socket = fx.webSocket('svc-c.timed');
  using overSocket = fx.session<TimedApi>('svc-c.timed', {
    token: await token,
    timeoutMs: 5000,
    transport: socket.transport,
  });
  await overSocket.remaining({});
  const query = Number(new URL(socket.connections[0].url).searchParams.get('timeout'));
  assert.ok(Number.isInteger(query) && query > 4000 && query <= 5000, String(query));
});

test('Limits r3: each hop measures on its own clock and forwards what is left', async () => {
  const fx = await createFixture();
  const { token } = deployTimed(fx);
  using session = fx.session<TimedApi>('svc-c.timed', { token: await token, timeoutMs: 3000 });
  const { mine, downstream } = await session.relay({ pauseMs: 120 });
  assert.ok(mine <= 3000 && mine > 2500, `svc-c had ${mine}`);
  assert.ok(downstream <= mine - 100, `svc-a got ${downstream} of ${mine}`);
});

test('Limits r3: remainingTimeoutMs() is 0 once the budget is gone; the handler signal aborts', async () => {
  const fx = await createFixture();
  const { seen, token } = deployTimed(fx);
  // A budget far above a stalled machine's scheduling delay: with a short one the service could
  // find it spent before the handler starts and refuse the call without running it.
  const batch = fx.httpBatch('svc-c', { headers: { 'X-Svc-Timeout': '1500' } });
  using session = fx.session<TimedApi>('svc-c.timed', {
    token: await token,
    transport: batch.transport,
  });
  await assertRefusal(session.wait({}), TIMEOUT);
  assert.deepEqual(seen, [{ remainingAfterAbort: 0 }]);
});

test('Limits r3: a session opened with timeoutMs 0 fails every call immediately', async () => {
  const fx = await createFixture();
  const batch = fx.httpBatch('svc-a');
  using session = fx.session('svc-a.echo', { timeoutMs: 0, transport: batch.transport });
  await assertRefusal(session.whoami({}), TIMEOUT);
  await assertRefusal(session.whoami({}), TIMEOUT);
  assert.equal(batch.exchanges.length, 0);
  assert.equal(fx.count('factories', 'svc-a.echo'), 0);
});

test('Limits r3: a caller timeout ends the wait but does not cancel the peer', async () => {
  const fx = await createFixture();
  const { seen, token } = deployTimed(fx);
  // A peer that receives no budget (it is stripped on the way) keeps running: nothing cancels it.
  const sockets = memoryWebSocketFactory((request, env) =>
    fx.services['svc-c'].fetch(request, env)
  );
  const transport = websocketRpc('wss://svc-c.fixture.test/rpc/svc-c.timed', {
    createWebSocket: (url) => {
      const stripped = new URL(url);
      stripped.searchParams.delete('timeout');
      return sockets.createWebSocket(stripped.href);
    },
  });
  using session = fx.session<TimedApi>('svc-c.timed', {
    token: await token,
    timeoutMs: 100,
    transport,
  });
  const started = Date.now();
  // Which timer ended the wait is read from the timers that had fired, not from the clock: they
  // fire in deadline order however late a busy machine runs them.
  const timers = recordFiredTimers();
  let firedAtRefusal: number[];
  let error: Error;
  try {
    error = await assertRefusal(
      session.sleep({ ms: 1200 }).finally(() => (firedAtRefusal = [...timers.delays])),
      TIMEOUT,
    );
  } finally {
    timers.restore();
  }
  const waited = Date.now() - started;
  assert.equal(error.name, 'SvcTimeoutError');
  assert.ok(waited >= 300, `waited ${waited} ms (budget plus grace)`);
  assert.ok(
    Math.max(0, ...firedAtRefusal!) <= 100 + SVC_TIMEOUT_GRACE_MS,
    `timers fired before the refusal: ${firedAtRefusal!.join(', ')} (budget plus grace)`,
  );
  assert.equal(seen[0].finished, undefined);
  // The handler runs to its end on its own schedule.
  for (let i = 0; i < 60 && seen[0].finished !== true; i++) await delay(50);
  assert.equal(seen[0].finished, true);
  assert.equal(seen[0].aborted, false);
});

test('Limits r3: the wrapper fails a method that outlives the deadline and aborts its signal', async () => {
  const fx = await createFixture();
  const { seen, token } = deployTimed(fx);
  const batch = fx.httpBatch('svc-c', { headers: { 'X-Svc-Timeout': '100' } });
  using session = fx.session<TimedApi>('svc-c.timed', {
    token: await token,
    transport: batch.transport,
  });
  const started = Date.now();
  await assertRefusal(session.sleep({ ms: 300 }), TIMEOUT);
  const elapsed = Date.now() - started;
  // Had the deadline not applied, the 300 ms sleep would have succeeded.
  assert.ok(elapsed >= 90, `failed after ${elapsed} ms`);
  for (let i = 0; i < 60 && seen[0].finished !== true; i++) await delay(50);
  assert.equal(seen[0].finished, true);
  assert.equal(seen[0].aborted, true);
});

test('Limits r3: a handler that keeps the thread past its deadline fails, sync or async', async () => {
  const fx = await createFixture();
  const spin = (ms: number) => {
    const until = Date.now() + ms;
    while (Date.now() < until) {
      // Busy: no timer can run until the handler returns.
    }
  };
  const returned: string[] = [];
  fx.deploy('svc-c', [
    defineAbility({
      id: 'svc-c.busy',
      methods: {
        sync: abilityMethod({ input: anyObject, output: anyObject, timeoutMs: 50 }),
        async: abilityMethod({ input: anyObject, output: anyObject, timeoutMs: 50 }),
        quick: abilityMethod({ input: anyObject, output: anyObject, timeoutMs: 50 }),
      },
      handler: ({ signal }) => ({
        sync: () => (spin(200), returned.push('sync'), {}),
        async: async () => (spin(200), returned.push('async'), { aborted: signal.aborted }),
        quick: () => ({ fine: true }),
      }),
    }),
  ]);
  using session = fx.session<Record<string, (input: object) => Promise<unknown>>>(
    'svc-c.busy',
    { token: await fx.tokenFor('svc-c', []) },
  );
  await assertRefusal(session.sync({}), TIMEOUT);
  await assertRefusal(session.async({}), TIMEOUT);
  assert.deepEqual(returned, ['sync', 'async'], 'both handlers did return, after the deadline');
  assert.deepEqual(await session.quick({}), { fine: true }, 'in time is still a success');
});

test('Limits r3: a deadline fails a method, not the session', async () => {
  const fx = await createFixture();
  const { token } = deployTimed(fx);
  const socket = fx.webSocket('svc-c.timed');
  using overSocket = fx.session<TimedApi>('svc-c.timed', {
    token: await token,
    transport: socket.transport,
  });
  await assertRefusal(overSocket.capped({}), TIMEOUT);
  // The next call on the same socket runs, under a fresh method ceiling.
  const { remaining } = await overSocket.remaining({});
  assert.ok(
    remaining !== null && remaining > DEFAULT_ABILITY_TIMEOUT_MS - 1000 &&
      remaining <= DEFAULT_ABILITY_TIMEOUT_MS,
    String(remaining),
  );
  assert.equal(socket.connections.length, 1);
  using overBatch = fx.session<TimedApi>('svc-c.timed', { token: await token, timeoutMs: 300 });
  await assertRefusal(overBatch.sleep({ ms: 800 }), TIMEOUT);
  const after = await overBatch.remaining({});
  assert.ok(after.remaining !== null && after.remaining > 0 && after.remaining <= 300);
});

test('Limits r3: a deadline does not bound a stream or its consumption', async () => {
  const fx = await createFixture();
  const { token } = deployTimed(fx);
  const issued = await token;
  // The wall clock is held while the socket opens and the call arrives (so the call arrives
  // inside the 150 ms budget however slow the machine), then moved past it while the items are
  // read.
  const realNow = Date.now;
  let heldAt = realNow();
  const openedAt = heldAt;
  Date.now = () => heldAt;
  try {
    const socket = fx.webSocket('svc-c.timed', { query: { timeout: '150' } });
    using session = fx.session<TimedApi>('svc-c.timed', {
      token: issued,
      transport: socket.transport,
    });
    const reader = (await session.ticks({})).getReader();
    const items: number[] = [];
    for (;;) {
      heldAt += 60;
      await delay(60);
      const { done, value } = await reader.read();
      if (done) break;
      items.push(value.i);
    }
    assert.deepEqual(items, [0, 1, 2, 3]);
    assert.ok(heldAt - openedAt > 150, 'the items were read past the budget');
  } finally {
    Date.now = realNow;
  }
});

test('Limits r3: over HTTP-batch the budget is per call, over WebSocket fixed at open', async () => {
  const fx = await createFixture();
  const { token } = deployTimed(fx);
  const issued = await token;
  // The wall clock is moved past the budget between calls instead of slept through, so neither
  // outcome depends on how fast a busy machine runs the calls.
  const clock = steppableWallClock();
  try {
    using overBatch = fx.session<TimedApi>('svc-c.timed', { token: issued, timeoutMs: 600 });
    await overBatch.sleep({ ms: 10 });
    clock.advance(700);
    await overBatch.sleep({ ms: 10 });
    const socket = fx.webSocket('svc-c.timed');
    using overSocket = fx.session<TimedApi>('svc-c.timed', {
      token: issued,
      timeoutMs: 600,
      transport: socket.transport,
    });
    await overSocket.sleep({ ms: 10 });
    clock.advance(700);
    await assertRefusal(overSocket.sleep({ ms: 10 }), TIMEOUT);
  } finally {
    clock.restore();
  }
});

test('Limits r3: over HTTP-batch, calls that waited for one token each forward their own budget', async () => {
  const fx = await createFixture();
  const { token } = deployTimed(fx);
  const issued = await token;
  const batch = fx.httpBatch('svc-c');
  // A cold session: its one token request answers 800 ms into each call's 1000 ms budget. The
  // wall clock is moved by the test rather than waited for, so a busy machine cannot spend the
  // first call's last 200 ms.
  let answer: ((token: string) => void) | undefined;
  using session = fx.session<TimedApi>('svc-c.timed', {
    requester: () => new Promise<string>((resolve) => (answer = resolve)),
    transport: batch.transport,
    timeoutMs: 1000,
  });
  const clock = steppableWallClock();
  let first: { remaining: number | null };
  let second: { remaining: number | null };
  try {
    const early = session.remaining({});
    for (let i = 0; i < 100 && answer === undefined; i++) await delay(5);
    clock.advance(700);
    // Started 700 ms later, this call shares the token request but has about 900 ms left when
    // the token arrives, where the first has about 200.
    const late = session.remaining({});
    clock.advance(100);
    answer!(issued);
    [first, second] = await Promise.all([early, late]);
  } finally {
    clock.restore();
  }
  assert.ok(first.remaining !== null && first.remaining <= 200, `first: ${first.remaining}`);
  assert.ok(second.remaining !== null && second.remaining > 500, `second: ${second.remaining}`);
  const forwarded = batch.exchanges.map((e) => Number(e.request.headers.get('x-svc-timeout')));
  assert.equal(forwarded.length, 2, `one batch each (forwarded ${forwarded.join(', ')})`);
  // Calls made together still travel in one batch with one budget. The clock is held while they
  // are made, so a collector pause between them (a loaded machine) cannot set them apart.
  const realNow = Date.now;
  const startedAt = realNow();
  Date.now = () => startedAt;
  let together: Promise<unknown>[];
  try {
    together = [session.remaining({}), session.remaining({}), session.remaining({})];
  } finally {
    Date.now = realNow;
  }
  await Promise.all(together);
  assert.equal(batch.exchanges.length, 3);
});

test('Limits r3: honoured from any caller without ingress, never an authorization input', async () => {
  const fx = await createFixture();
  assert.equal(fx.services['svc-a'].discovery().ingress, undefined);
  const batch = fx.httpBatch('svc-a', { headers: { 'X-Svc-Timeout': '50' } });
  using plain = fx.session('svc-a.echo', { transport: batch.transport });
  await assertRefusal(plain.sleep({ ms: 400 }), TIMEOUT);
  const generous = fx.httpBatch('svc-a', { headers: { 'X-Svc-Timeout': '600000' } });
  using forged = fx.session('svc-a.echo', { token: 'x.y.z', transport: generous.transport });
  await assertRefusal(forged.whoami({}), { code: 'capability_auth', status: 401 });
});

test('Limits r3: whichever of the service ceiling and the caller budget expires first wins', async () => {
  const fx = await createFixture();
  const { seen, token } = deployTimed(fx, { methodMs: 400 });
  const timed = async (budget: string) => {
    const batch = fx.httpBatch('svc-c', { headers: { 'X-Svc-Timeout': budget } });
    using session = fx.session<TimedApi>('svc-c.timed', {
      token: await token,
      transport: batch.transport,
    });
    const started = Date.now();
    await assertRefusal(session.sleep({ ms: 1000 }), TIMEOUT);
    return Date.now() - started;
  };
  // Had the 5000 ms budget applied, the 1000 ms sleep would have succeeded.
  const ceiling = await timed('5000');
  assert.ok(ceiling >= 390, `ceiling: ${ceiling} ms`);
  // Which deadline bounded a call is read from the deadline its handler was given (the one the
  // wrapper enforces), not from how long the call took: on a busy machine a 60 ms budget can
  // take longer than a 400 ms ceiling to be reported.
  const ceilingGiven = seen[0].remainingAtStart;
  assert.ok(
    ceilingGiven !== undefined && ceilingGiven > 60 && ceilingGiven <= 400,
    `ceiling given: ${ceilingGiven} ms`,
  );
  const budget = await timed('60');
  assert.ok(budget >= 55, `budget: ${budget} ms`);
  const budgetGiven = seen[1].remainingAtStart;
  assert.ok(budgetGiven !== undefined && budgetGiven <= 60, `budget given: ${budgetGiven} ms`);
  // Streams are never bounded by a ceiling: without a caller budget they see none.
  const socket = fx.webSocket('svc-c.timed');
  using session = fx.session<TimedApi>('svc-c.timed', {
    token: await token,
    transport: socket.transport,
  });
  const first = await (await session.ticks({})).getReader().read();
  assert.equal(first.value?.remaining, null);
});

test('Limits r3 with a service policy: defaultMs fills in on HTTP-batch only, maxMs clamps every budget', async () => {
  const fx = await createFixture();
  fx.deploy('svc-a', [echoAbility(fx.stats)], {
    timeout: { methodMs: false, defaultMs: 2000, maxMs: 3000 },
  });
  const token = await fx.tokenFor('svc-a', ['svc-a.read']);
  const remainingOver = async (transport: RpcTransportFactory) => {
    using session = fx.session('svc-a.echo', { token, transport });
    return ((await session.whoami({})) as { remainingTimeoutMs: number | null }).remainingTimeoutMs;
  };
  const defaulted = await remainingOver(fx.httpBatch('svc-a').transport);
  assert.ok(defaulted !== null && defaulted > 1500 && defaulted <= 2000, String(defaulted));
  // A session transport gets no default: its budget would bound every call on the socket.
  assert.equal(await remainingOver(fx.webSocket('svc-a.echo').transport), null);
  const clampedBatch = await remainingOver(
    fx.httpBatch('svc-a', { headers: { 'X-Svc-Timeout': '60000' } }).transport,
  );
  assert.ok(clampedBatch !== null && clampedBatch > 2500 && clampedBatch <= 3000);
  const clampedSocket = await remainingOver(
    fx.webSocket('svc-a.echo', { query: { timeout: '60000' } }).transport,
  );
  assert.ok(clampedSocket !== null && clampedSocket > 2500 && clampedSocket <= 3000);
});

test('Limits: a service `timeout` that is not an object is refused at construction', async () => {
  const fx = await createFixture();
  for (const timeout of [0, -5, 1.5, 5000, 'abc', true, null, [], [5000]]) {
    assert.throws(
      () => fx.deploy('svc-a', [echoAbility(fx.stats)], { timeout: timeout as never }),
      (error: unknown) =>
        error instanceof SvcConfigurationError &&
        svcErrorInfo(error).reason === 'invalid_timeout_policy' &&
        /`timeout` must be an object/.test(error.message),
      `timeout ${JSON.stringify(timeout)} was accepted`,
    );
  }
  // An object, empty or not, is still read field by field.
  fx.deploy('svc-a', [echoAbility(fx.stats)], { timeout: {} });
  fx.deploy('svc-a', [echoAbility(fx.stats)], { timeout: { methodMs: 5000, maxMs: 9000 } });
  assert.throws(
    () => fx.deploy('svc-a', [echoAbility(fx.stats)], { timeout: { maxMs: 0 } }),
    SvcConfigurationError,
  );
});
