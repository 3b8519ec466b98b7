// Security checklist A17: what leaves the service when something fails. Unshaped handler
// failures become one opaque 500 (the original is only logged), shaped ones pass through.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertRefusal, createFixture } from './fixture.ts';
import { svcErrorInfo } from '../../src/core/errors.ts';

const OPAQUE = { code: 'internal', status: 500, retryable: false } as const;

test('ERR-01 a thrown Error becomes the opaque 500; the marker is nowhere on the wire', async () => {
  const fx = await createFixture();
  const batch = fx.httpBatch('svc-a');
  using session = fx.session('svc-a.echo', { transport: batch.transport });
  const error = await assertRefusal(session.fail({ kind: 'error' }), OPAQUE);
  assert.equal(error.message, 'Svc ability handler failed: fail');
  assert.equal('cause' in error, false);
  assert.equal(batch.exchanges.length, 1);
  const [exchange] = batch.exchanges;
  assert.equal(exchange.response.status, 200);
  assert.equal(exchange.body.includes(fx.stats.marker), false);
  assert.equal(exchange.body.includes('postgres://'), false);
  assert.equal(/\.ts\b|node_modules|\bat \S+ \(/.test(exchange.body), false, exchange.body);
  // Cap'n Web's error frame is ["error", name, message, stack, props]: no stack was sent.
  const reject = exchange.body.split('\n').map((line) => JSON.parse(line))
    .find((message) => message[0] === 'reject');
  assert.equal(reject[2][2], 'Svc ability handler failed: fail');
  assert.equal(reject[2][3] ?? null, null);
  assert.equal(JSON.stringify(reject[2][4]).includes('cause'), false);
  const logged = fx.events.filter((event) => event.event === 'svc.ability.handler_failed');
  assert.equal(logged.length, 1);
  assert.deepEqual(logged[0].error, {
    name: 'Error',
    message: `${fx.stats.marker} postgres://u:p@db`,
  });
  assert.equal(fx.events.some((event) => event.event === 'svc.request.failed'), false);
});

test('ERR-02 thrown non-Errors, cause chains and AggregateErrors give the same opaque 500', async () => {
  const fx = await createFixture();
  for (const kind of ['string', 'number', 'null', 'undefined', 'cause', 'aggregate']) {
    const batch = fx.httpBatch('svc-a');
    using session = fx.session('svc-a.echo', { transport: batch.transport });
    const error = await assertRefusal(session.fail({ kind }), OPAQUE, kind);
    assert.equal(error.message, 'Svc ability handler failed: fail', kind);
    assert.equal(batch.exchanges[0].body.includes(fx.stats.marker), false, kind);
  }
  assert.equal(
    fx.events.filter((event) => event.event === 'svc.ability.handler_failed').length,
    6,
  );
});

test('ERR-03 failMidStream over WebSocket ends with the opaque error, marker absent', async () => {
  const fx = await createFixture();
  const socket = fx.webSocket('svc-a.echo');
  using session = fx.session('svc-a.echo', { transport: socket.transport });
  const stream = (await session.failMidStream({ after: 3 })) as ReadableStream<{ i: number }>;
  const reader = stream.getReader();
  for (let i = 0; i < 3; i++) assert.deepEqual((await reader.read()).value, { i });
  const error = await assertRefusal(reader.read(), OPAQUE);
  assert.equal(error.message, 'Svc ability handler failed: failMidStream');
  assert.equal(socket.frames.some((frame) => frame.includes(fx.stats.marker)), false);
  assert.ok(socket.frames.some((frame) => frame.includes('handler failed: failMidStream')));
});

test('ERR-04 AbilityHandlerError passes through: handler/429, retryable, reason, message', async () => {
  const fx = await createFixture();
  using session = fx.session('svc-a.echo');
  const error = await assertRefusal(
    session.failShaped({ status: 429, retryable: true, reason: 'quota' }),
    { code: 'handler', status: 429, retryable: true, reason: 'quota' },
  );
  assert.equal(error.message, 'Quota exceeded');
  assert.equal(fx.events.some((event) => event.event === 'svc.ability.handler_failed'), false);
});

test('ERR-05 retryable defaults by status: 503 true, 500 false', async () => {
  const fx = await createFixture();
  using session = fx.session('svc-a.echo');
  await assertRefusal(session.failShaped({ status: 503, reason: 'down' }), {
    code: 'handler',
    status: 503,
    retryable: true,
  });
  await assertRefusal(session.failShaped({ status: 500, reason: 'bug' }), {
    code: 'handler',
    status: 500,
    retryable: false,
  });
});

test('ERR-06 badOutput is ability_validation/500, not 422, and does not echo the value', async () => {
  const fx = await createFixture();
  const batch = fx.httpBatch('svc-a');
  using session = fx.session('svc-a.echo', { transport: batch.transport });
  await assertRefusal(session.badOutput({}), {
    code: 'ability_validation',
    status: 500,
    retryable: false,
  });
  assert.equal(batch.exchanges[0].body.includes(fx.stats.marker), false);
});

test('ERR-07 ticks over HTTP-batch fails 405 in the batch; whoami beside it succeeds', async () => {
  const fx = await createFixture();
  const batch = fx.httpBatch('svc-a');
  using session = fx.session('svc-a.echo', { transport: batch.transport });
  const [ticks, whoami] = await Promise.allSettled([session.ticks({ n: 3 }), session.whoami({})]);
  assert.equal(batch.exchanges.length, 1, 'both calls travel in one batch');
  assert.equal(batch.exchanges[0].response.status, 200);
  assert.equal(ticks.status, 'rejected');
  await assertRefusal(Promise.reject(ticks.status === 'rejected' ? ticks.reason : undefined), {
    code: 'internal',
    status: 405,
    reason: 'stream_requires_session_transport',
  });
  assert.equal(whoami.status, 'fulfilled');
  assert.equal(fx.count('calls', 'svc-a.echo#ticks'), 0);
});

test('ERR-08 an undeclared method fails without a stack or file paths', async () => {
  const fx = await createFixture();
  const batch = fx.httpBatch('svc-a');
  using session = fx.session('svc-a.echo', { transport: batch.transport });
  const error = await assertRefusal(session.nope({}), { code: 'internal', status: 404 });
  assert.equal(svcErrorInfo(error).reason, 'unknown_method');
  assert.equal(/\.ts\b|node_modules|file:/.test(error.message), false, error.message);
  const body = batch.exchanges[0].body;
  assert.equal(/\.ts\b|node_modules|file:|\bat \S+ \(/.test(body), false, body);
  assert.equal(fx.count('factories', 'svc-a.echo'), 0);
});

test('ERR-10 no automatic retry: a retryable 503 from an idempotent method runs once', async () => {
  const fx = await createFixture();
  assert.equal(fx.services['svc-a'].discovery().abilities[0].methods.failShaped.idempotent, true);
  using session = fx.plane.abilitySession<{ failShaped(input: unknown): unknown }>({
    abilityId: 'svc-a.echo',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    caller: { id: 'alice', kind: 'user' },
  });
  await assertRefusal(session.failShaped({ status: 503, retryable: true, reason: 'down' }), {
    code: 'handler',
    status: 503,
    retryable: true,
    reason: 'down',
  });
  assert.equal(fx.count('calls', 'svc-a.echo#failShaped'), 1);
  assert.equal(fx.count('factories', 'svc-a.echo'), 1);
});
