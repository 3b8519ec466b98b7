// Contract: Events (service side). Each structured event is one object with `event`, `level` and
// `requestId`; the logger option decides where it goes; middleware can read a request's events.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Context } from 'hono';
import { SvcConfigurationError, svcErrorInfo } from '../../src/core/errors.ts';
import type { SvcLogEvent } from '../../src/core/logging.ts';
import { svcLogEvents } from '../../src/service/log-events.ts';
import { httpBatchRpc } from '../../src/caller/transports/http-batch.ts';
import { createFixture, type Fixture } from './fixture.ts';
import { echoAbility } from './fixture-abilities.ts';

const DISCOVERY = 'https://svc-a.fixture.test/.well-known/svc/service.json';

/** Replaces console.log/error while `run` runs and returns every line written. */
async function capturingConsole(run: () => Promise<void>): Promise<string[]> {
  const lines: string[] = [];
  const { log, error } = console;
  console.log = (...args: unknown[]) => void lines.push(args.map(String).join(' '));
  console.error = (...args: unknown[]) => void lines.push(args.map(String).join(' '));
  try {
    await run();
  } finally {
    console.log = log;
    console.error = error;
  }
  return lines;
}

function named(fx: Fixture, name: string): SvcLogEvent[] {
  return fx.events.filter((event) => event.event === name);
}

test('Events: svc.discovery.served when the discovery document is served', async () => {
  const fx = await createFixture();
  const response = await fx.services['svc-a'].fetch(
    new Request(DISCOVERY, { headers: { 'X-Request-Id': 'req-discovery' } }),
  );
  assert.equal(response.status, 200);
  assert.deepEqual(named(fx, 'svc.discovery.served'), [
    { event: 'svc.discovery.served', level: 'info', requestId: 'req-discovery' },
  ]);
});

test('Events: svc.request.completed for each request, with event, level and requestId', async () => {
  const fx = await createFixture();
  using session = fx.session('svc-a.echo', { requestId: 'req-completed' });
  await session.whoami({});
  const completed = named(fx, 'svc.request.completed').filter((event) =>
    event.path === '/rpc/svc-a.echo'
  );
  assert.equal(completed.length, 1);
  assert.equal(completed[0].level, 'info');
  assert.equal(completed[0].requestId, 'req-completed');
  assert.equal(completed[0].status, 200);
  assert.equal(completed[0].method, 'POST');
});

test('Events: svc.request.failed when a request fails', async () => {
  const fx = await createFixture();
  const service = fx.deploy('svc-a', [echoAbility(fx.stats)], {
    middleware: async (c, next) => {
      if (c.req.header('x-break') === 'yes') throw new Error('policy layer broke');
      await next();
    },
  });
  let response: Response | undefined;
  // The failure is reported through the logger only, never written to the console behind it.
  const console = await capturingConsole(async () => {
    response = await service.fetch(
      new Request(DISCOVERY, { headers: { 'X-Break': 'yes', 'X-Request-Id': 'req-failed' } }),
    );
  });
  assert.deepEqual(console, []);
  assert.ok(response !== undefined);
  assert.equal(response.status, 500);
  assert.match(response.headers.get('content-type') ?? '', /^application\/problem\+json/);
  assert.equal(response.headers.get('x-request-id'), 'req-failed');
  const problem = await response.json() as { code: string; requestId: string; detail: string };
  assert.equal(problem.code, 'internal');
  assert.equal(problem.requestId, 'req-failed');
  assert.equal(JSON.stringify(problem).includes('policy layer broke'), false);
  const failed = named(fx, 'svc.request.failed');
  assert.equal(failed.length, 1);
  assert.equal(failed[0].level, 'error');
  assert.equal(failed[0].requestId, 'req-failed');
  assert.equal(failed[0].status, 500);
  // The caller's problem is opaque; the log carries the cause for the operator.
  assert.deepEqual(failed[0].error, { name: 'Error', message: 'policy layer broke' });
  assert.equal(named(fx, 'svc.request.completed').length, 0);
});

test('Events: svc.request.failed is not emitted for a handler failure (200 batch)', async () => {
  const fx = await createFixture();
  using session = fx.session('svc-a.echo');
  await assert.rejects(session.fail({ kind: 'error' }));
  assert.equal(named(fx, 'svc.request.failed').length, 0);
  const completed = named(fx, 'svc.request.completed').filter((event) =>
    event.path === '/rpc/svc-a.echo'
  );
  assert.deepEqual(completed.map((event) => event.status), [200]);
  assert.equal(named(fx, 'svc.ability.handler_failed').length, 1);
});

test('Events: an RPC session aborted for what its caller sent is svc.request.failed (warn), never a handler failure', async () => {
  const fx = await createFixture();
  const cases: [string, string, string][] = [
    ["not Cap'n Web at all", 'not json', 'rpc_protocol_error'],
    ['a release of an export that does not exist', '["release",7,1]', 'rpc_protocol_error'],
    ['a caller promise', '["push",["promise",-5]]', 'rpc_value_refused'],
  ];
  for (const [what, body, reason] of cases) {
    const before = fx.events.length;
    const response = await fx.services['svc-a'].fetch(
      new Request('https://svc-a.fixture.test/rpc/svc-a.echo', {
        method: 'POST',
        body,
        headers: { 'X-Request-Id': 'req-protocol' },
      }),
    );
    assert.equal(response.status, 200, what);
    assert.match(await response.text(), /^\["abort"/, what);
    await new Promise((resolve) => setTimeout(resolve, 0));
    const events = fx.events.slice(before);
    assert.equal(events.some((event) => event.event === 'svc.ability.handler_failed'), false, what);
    const failed = events.filter((event) => event.event === 'svc.request.failed');
    assert.equal(failed.length, 1, what);
    assert.equal(failed[0].level, 'warn', what);
    assert.equal(failed[0].reason, reason, what);
    assert.equal(failed[0].requestId, 'req-protocol', what);
    assert.equal(failed[0].ability, 'svc-a.echo', what);
    // One request, one outcome: the abort, never a completion beside it.
    assert.equal(
      events.filter((event) => event.event === 'svc.request.completed').length,
      0,
      what,
    );
    assert.equal(failed[0].status, 200, what);
  }
  assert.equal(fx.count('factories', 'svc-a.echo'), 0);
  // A session that ends normally reports nothing of the kind.
  const before = fx.events.length;
  {
    using session = fx.session('svc-a.echo');
    await session.whoami({});
  }
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.equal(
    fx.events.slice(before).some((event) => event.event === 'svc.request.failed'),
    false,
  );
});

test('Events: a call to a method the ability does not have is refused as unknown_method, not logged as a handler failure', async () => {
  const fx = await createFixture();
  const { token } = await fx.plane.issueCapabilityToken({
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    callerAccess: 'service',
  });
  const response = await fx.services['svc-a'].fetch(
    new Request('https://svc-a.fixture.test/rpc/svc-a.echo', {
      method: 'POST',
      body: [
        `["push",["pipeline",0,["authenticate"],[${JSON.stringify(token)}]]]`,
        '["push",["pipeline",1,["noSuchMethod"],[{}]]]',
        '["pull",2]',
      ].join('\n'),
    }),
  );
  const lines = (await response.text()).split('\n').map((line) => JSON.parse(line));
  const rejected = lines.find((line) => line[0] === 'reject');
  assert.ok(rejected, JSON.stringify(lines));
  assert.deepEqual(rejected[2][4], {
    code: 'internal',
    status: 404,
    retryable: false,
    reason: 'unknown_method',
  });
  assert.match(rejected[2][2], /noSuchMethod/);
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.equal(named(fx, 'svc.ability.handler_failed').length, 0);
  assert.equal(fx.count('factories', 'svc-a.echo'), 0);
});

test('Events: svc.ability.handler_failed carries the original error name and message', async () => {
  const fx = await createFixture();
  using session = fx.session('svc-a.echo', { requestId: 'req-handler' });
  await assert.rejects(session.fail({ kind: 'aggregate' }));
  await assert.rejects(session.fail({ kind: 'string' }));
  const [aggregate, thrownString] = named(fx, 'svc.ability.handler_failed');
  assert.equal(aggregate.level, 'error');
  assert.equal(aggregate.requestId, 'req-handler');
  assert.equal(aggregate.ability, 'svc-a.echo');
  assert.equal(aggregate.method, 'fail');
  assert.deepEqual(aggregate.error, {
    name: 'AggregateError',
    message: `${fx.stats.marker} postgres://u:p@db`,
  });
  assert.equal((thrownString.error as { message: string }).message.includes(fx.stats.marker), true);
  // The replacement itself is shaped: shaped failures are never logged as handler failures.
  await assert.rejects(session.failShaped({ status: 409, reason: 'conflict' }));
  assert.equal(named(fx, 'svc.ability.handler_failed').length, 2);
});

test('Events r1: the log callback runs once per event with the request context; default is JSON lines', async () => {
  const fx = await createFixture();
  const received: { event: SvcLogEvent; context: unknown }[] = [];
  const logged = fx.deploy('svc-a', [echoAbility(fx.stats)], {
    logger: { log: (event, context) => void received.push({ event, context }) },
  });
  await logged.fetch(new Request(DISCOVERY));
  assert.deepEqual(received.map((entry) => entry.event.event), [
    'svc.discovery.served',
    'svc.request.completed',
  ]);
  const context = received[0].context as Context;
  assert.equal(new URL(context.req.url).pathname, '/.well-known/svc/service.json');
  assert.equal(received[1].context, received[0].context);

  const lines = await capturingConsole(async () => {
    const defaulted = fx.deploy('svc-a', [echoAbility(fx.stats)], { logger: undefined });
    await defaulted.fetch(new Request(DISCOVERY, { headers: { 'X-Request-Id': 'req-json' } }));
  });
  const events = lines.map((line) => JSON.parse(line) as SvcLogEvent);
  assert.deepEqual(events.map((event) => [event.event, event.level, event.requestId]), [
    ['svc.discovery.served', 'info', 'req-json'],
    ['svc.request.completed', 'info', 'req-json'],
  ]);
});

test('Events r2: logger false disables request logging', async () => {
  const fx = await createFixture();
  const silent = fx.deploy('svc-a', [echoAbility(fx.stats)], { logger: false });
  const lines = await capturingConsole(async () => {
    await silent.fetch(new Request(DISCOVERY));
    using session = fx.session('svc-a.echo');
    await session.whoami({});
    await assert.rejects(session.fail({ kind: 'error' }));
  });
  assert.deepEqual(lines, []);
  assert.equal(fx.events.filter((event) => event.event.startsWith('svc.request')).length, 0);
  // The request-id middleware stays on.
  const response = await silent.fetch(new Request(DISCOVERY));
  assert.ok((response.headers.get('x-request-id') ?? '').length > 0);
});

test('Events r2: requestId { generator } customizes ids; a propagated id is still adopted', async () => {
  const fx = await createFixture();
  let next = 0;
  const service = fx.deploy('svc-a', [echoAbility(fx.stats)], {
    requestId: { generator: () => `gen-${++next}` },
  });
  const response = await service.fetch(new Request(DISCOVERY));
  assert.equal(response.headers.get('x-request-id'), 'gen-1');
  // A fixed token, so the plane's own discovery requests do not draw ids in between.
  const token = await fx.tokenFor('svc-a', ['svc-a.read']);
  using session = fx.session('svc-a.echo', {
    token,
    transport: httpBatchRpc((request) => service.fetch(request)),
  });
  assert.equal(((await session.whoami({})) as { requestId: string }).requestId, 'gen-2');
  using propagated = fx.session('svc-a.echo', { token, requestId: 'req-upstream' });
  assert.equal(
    ((await propagated.whoami({})) as { requestId: string }).requestId,
    'req-upstream',
  );
  assert.deepEqual(
    named(fx, 'svc.request.completed').map((event) => event.requestId),
    ['gen-1', 'gen-2', 'req-upstream'],
  );
  // A generated id that could not be echoed safely is replaced, not used.
  const unsafe = fx.deploy('svc-a', [echoAbility(fx.stats)], {
    requestId: { generator: () => 'bad\r\nid' },
  });
  const echoed = (await unsafe.fetch(new Request(DISCOVERY))).headers.get('x-request-id') ?? '';
  assert.match(echoed, /^[\x21-\x7e]+$/);
});

test('Events r3: middleware reads the request events after next() with svcLogEvents(c)', async () => {
  const fx = await createFixture();
  const seen: string[][] = [];
  fx.deploy('svc-a', [echoAbility(fx.stats)], {
    middleware: async (c, next) => {
      await next();
      seen.push(svcLogEvents(c).map((event) => event.event));
    },
  });
  await fx.services['svc-a'].fetch(new Request(DISCOVERY));
  using session = fx.session('svc-a.echo', { token: await fx.tokenFor('svc-a', []) });
  await assert.rejects(session.fail({ kind: 'error' }));
  assert.deepEqual(seen, [['svc.discovery.served'], ['svc.ability.handler_failed']]);
});

test('Events r2: a requestId option that is not { generator?: function } is refused at construction', async () => {
  const fx = await createFixture();
  for (const requestId of [{ generator: 'uuid' }, { generator: 42 }, 'uuid', null, []]) {
    assert.throws(
      () => fx.deploy('svc-a', [echoAbility(fx.stats)], { requestId: requestId as never }),
      (error: unknown) =>
        error instanceof SvcConfigurationError &&
        svcErrorInfo(error).reason === 'invalid_request_id_option' &&
        /`requestId(\.generator)?` must be/.test(error.message),
      `requestId ${JSON.stringify(requestId)} was accepted`,
    );
  }
  // Without a generator the default ids are used, and every request is still answered.
  const service = fx.deploy('svc-a', [echoAbility(fx.stats)], { requestId: {} });
  const response = await service.fetch(new Request(DISCOVERY));
  assert.equal(response.status, 200);
  await response.body?.cancel();
  const requestId = response.headers.get('x-request-id') ?? '';
  assert.match(requestId, /^[\x21-\x7e]+$/);
  assert.deepEqual(
    named(fx, 'svc.request.completed').map((event) => [event.requestId, event.status]),
    [[requestId, 200]],
  );
});
