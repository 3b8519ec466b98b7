// Contract: Ability definition. Every field of the table, proven through a deployed service:
// defaults, what is refused at definition or setup time, and what the handler factory receives.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { svcErrorInfo } from '../../src/core/errors.ts';
import type { HandlerFactoryInput } from '../../src/service/ability.ts';
import { defineAbility } from '../../src/service/ability.ts';
import { abilityMethod } from '../../src/service/method.ts';
import { createService } from '../../src/service/service.ts';
import { httpBatchRpc } from '../../src/caller/transports/http-batch.ts';
import { staticJwks } from '../../src/service/jwks-sources.ts';
import { assertRefusal, createFixture } from './fixture.ts';

const anyObject = z.record(z.string(), z.unknown());

/** A one-method ability on svc-c; `extra` overrides definition fields. */
function plainAbility(extra: Record<string, unknown> = {}, id = 'svc-c.plain') {
  return defineAbility({
    id,
    methods: { ping: abilityMethod({ input: anyObject, output: anyObject }) },
    handler: () => ({ ping: () => ({ pong: true }) }),
    ...extra,
  });
}

/** Runs `define` and asserts a configuration refusal whose message names `field`. */
function assertRefusedDefinition(define: () => unknown, field: string, label = field): void {
  assert.throws(define, (error: unknown) => {
    assert.ok(error instanceof Error, label);
    assert.equal(svcErrorInfo(error).code, 'internal', label);
    // Refusals inside a method definition carry `invalid_method`.
    assert.match(
      String((error as { reason?: string }).reason),
      /^invalid_(ability|method)$/,
      label,
    );
    assert.ok(error.message.includes(field), `${label}: ${error.message}`);
    return true;
  });
}

test('Ability definition id: must be `<service>.<name>`; other shapes are refused', () => {
  for (const id of ['echo', 'svc-c.', '.echo', 'svc-c.echo.more', 'svc c.echo', '', 42]) {
    assertRefusedDefinition(() => plainAbility({ id }), 'id', JSON.stringify(id));
  }
  assert.equal(plainAbility().id, 'svc-c.plain');
  // The service part must be the service serving it.
  assert.throws(
    () =>
      createService({
        id: 'svc-a',
        title: 'A',
        version: '1',
        auth: { jwks: staticJwks({ keys: [] }), issuer: 'https://issuer.test' },
        abilities: [plainAbility()],
      }),
    /does not belong to service svc-a/,
  );
});

test('Ability definition title and description: optional strings, published in discovery', async () => {
  const fx = await createFixture();
  const service = fx.deploy('svc-c', [
    plainAbility({ title: 'Plain', description: 'A plain ability' }),
    plainAbility({}, 'svc-c.bare'),
  ]);
  const [described, bare] = service.discovery().abilities;
  assert.equal(described.title, 'Plain');
  assert.equal(described.description, 'A plain ability');
  assert.equal('title' in bare, false);
  assert.equal('description' in bare, false);
  assertRefusedDefinition(() => plainAbility({ title: 5 }), 'title');
});

test('Ability definition exposure: defaults to private; only private or published', async () => {
  const fx = await createFixture();
  const service = fx.deploy('svc-c', [
    plainAbility(),
    plainAbility({ exposure: 'published' }, 'svc-c.public'),
  ]);
  assert.deepEqual(service.discovery().abilities.map((entry) => entry.exposure), [
    'private',
    'published',
  ]);
  assertRefusedDefinition(() => plainAbility({ exposure: 'public' }), 'exposure');
  // Exposure is about front doors; a private ability still serves authenticated callers.
  using session = fx.session('svc-c.plain', { token: await fx.tokenFor('svc-c', []) });
  assert.deepEqual(await session.ping({}), { pong: true });
});

test('Ability definition access: defaults to plane; service admits only service callers', async () => {
  const fx = await createFixture();
  let factories = 0;
  const restricted = plainAbility({
    access: 'service',
    handler: () => {
      factories++;
      return { ping: () => ({ pong: true }) };
    },
  }, 'svc-c.restricted');
  const service = fx.deploy('svc-c', [plainAbility(), restricted]);
  assert.deepEqual(service.discovery().abilities.map((entry) => entry.access), [
    'plane',
    'service',
  ]);
  assertRefusedDefinition(() => plainAbility({ access: 'user' }), 'access');
  const planeToken = await fx.tokenFor('svc-c', [], { spa: 'plane' });
  const serviceToken = await fx.tokenFor('svc-c', []);
  {
    // A plane ability serves both classes.
    using asPlane = fx.session('svc-c.plain', { token: planeToken });
    using asService = fx.session('svc-c.plain', { token: serviceToken });
    assert.deepEqual(await asPlane.ping({}), { pong: true });
    assert.deepEqual(await asService.ping({}), { pong: true });
  }
  using refused = fx.session('svc-c.restricted', { token: planeToken });
  await assertRefusal(refused.ping({}), { code: 'capability_auth', status: 403 });
  assert.equal(factories, 0);
  using admitted = fx.session('svc-c.restricted', { token: serviceToken });
  assert.deepEqual(await admitted.ping({}), { pong: true });
  assert.equal(factories, 1);
});

test('Ability definition scopes: ability-level scopes are required by every method', async () => {
  const fx = await createFixture();
  let factories = 0;
  const scoped = defineAbility({
    id: 'svc-c.scoped',
    scopes: ['svc-c.read'],
    methods: {
      one: abilityMethod({ input: anyObject, output: anyObject }),
      two: abilityMethod({ input: anyObject, output: anyObject, scopes: ['svc-c.extra'] }),
    },
    handler: () => {
      factories++;
      return { one: () => ({ method: 'one' }), two: () => ({ method: 'two' }) };
    },
  });
  const service = fx.deploy('svc-c', [scoped]);
  assert.deepEqual(service.discovery().abilities[0].scopes, ['svc-c.read']);
  using without = fx.session('svc-c.scoped', {
    token: await fx.tokenFor('svc-c', ['svc-c.extra']),
  });
  await assertRefusal(without.one({}), { code: 'capability_auth', status: 403 });
  await assertRefusal(without.two({}), { code: 'capability_auth', status: 403 });
  assert.equal(factories, 0);
  using both = fx.session('svc-c.scoped', {
    token: await fx.tokenFor('svc-c', ['svc-c.read', 'svc-c.extra']),
  });
  assert.deepEqual(await both.two({}), { method: 'two' });
  assertRefusedDefinition(() => plainAbility({ scopes: ['has space'] }), 'scopes');
});

test('Ability definition methods: required, a non-empty map of method definitions', () => {
  assertRefusedDefinition(() => plainAbility({ methods: {} }), 'methods');
  assertRefusedDefinition(() => plainAbility({ methods: undefined }), 'methods');
  assertRefusedDefinition(() => plainAbility({ methods: { ping: { input: 1 } } }), 'ping');
  // A name Cap'n Web could not reach, or that collides with the gateway, is refused.
  assertRefusedDefinition(
    () =>
      plainAbility({
        methods: { authenticate: abilityMethod({ input: anyObject, output: anyObject }) },
      }),
    'authenticate',
  );
});

test('Ability definition rpc.path: defaults to /rpc/<abilityId>; a custom path serves there', async () => {
  const fx = await createFixture();
  const service = fx.deploy('svc-c', [
    plainAbility(),
    plainAbility({ rpc: { path: '/custom/plain' } }, 'svc-c.custom'),
  ]);
  assert.deepEqual(service.discovery().abilities.map((entry) => entry.rpc.path), [
    '/rpc/svc-c.plain',
    '/custom/plain',
  ]);
  const token = await fx.tokenFor('svc-c', []);
  using custom = fx.session('svc-c.custom', {
    token,
    transport: httpBatchRpc((request) => service.fetch(request), {
      url: 'https://svc-c.fixture.test/custom/plain',
    }),
  });
  assert.deepEqual(await custom.ping({}), { pong: true });
  // Nothing answers at the default path of an ability that moved.
  const moved = await service.fetch(
    new Request('https://svc-c.fixture.test/rpc/svc-c.custom', { method: 'POST', body: '' }),
  );
  assert.equal(moved.status, 404);
  assertRefusedDefinition(() => plainAbility({ rpc: { path: 'no-slash' } }), 'rpc.path');
});

test('Ability definition rpc.transports: default http-batch only; WebSocket is opt-in', async () => {
  const fx = await createFixture();
  const service = fx.deploy('svc-c', [
    plainAbility(),
    plainAbility({ rpc: { transports: ['http-batch', 'websocket'] } }, 'svc-c.both'),
  ]);
  assert.deepEqual(service.discovery().abilities.map((entry) => entry.rpc.transports), [
    ['http-batch'],
    ['http-batch', 'websocket'],
  ]);
  const token = await fx.tokenFor('svc-c', []);
  const refused = fx.webSocket('svc-c.plain');
  using overRefused = fx.session('svc-c.plain', { token, transport: refused.transport });
  await assert.rejects(overRefused.ping({}));
  const upgrades = await Promise.all(refused.connections.map((each) => each.response));
  assert.deepEqual(upgrades.map((response) => response.status), [405]);
  const enabled = fx.webSocket('svc-c.both');
  using overEnabled = fx.session('svc-c.both', { token, transport: enabled.transport });
  assert.deepEqual(await overEnabled.ping({}), { pong: true });
  assertRefusedDefinition(() => plainAbility({ rpc: { transports: ['smtp'] } }), 'rpc.transports');
  assertRefusedDefinition(() => plainAbility({ rpc: { transports: [] } }), 'rpc.transports');
});

test('Ability definition rpc.transports: a streaming method needs websocket or a binding (setup check)', () => {
  const streaming = {
    methods: {
      ticks: abilityMethod({ input: anyObject, output: anyObject, stream: true }),
    },
    handler: () => ({ async *ticks() {} }),
  };
  assertRefusedDefinition(() => plainAbility(streaming), 'ticks');
  assertRefusedDefinition(
    () => plainAbility({ ...streaming, rpc: { transports: ['http-batch'] } }),
    'websocket',
  );
  for (const transports of [['websocket'], ['http-batch', 'cloudflare-binding-rpc']]) {
    const methods = plainAbility({ ...streaming, rpc: { transports } }).methods as Record<
      string,
      { stream: boolean }
    >;
    assert.equal(methods.ticks.stream, true);
  }
});

test('Ability definition rpc.transports: an ability served over the native binding only (streaming or not) starts, and is advertised as such', () => {
  const serviceWith = (ability: ReturnType<typeof plainAbility>) =>
    createService({
      id: 'svc-c',
      title: 'C',
      version: '1',
      auth: { jwks: staticJwks({ keys: [] }), issuer: 'https://issuer.test' },
      abilities: [ability],
      logger: false,
    });
  const streamingMethods = {
    methods: { ticks: abilityMethod({ input: anyObject, output: anyObject, stream: true }) },
    handler: () => ({ async *ticks() {} }),
  };
  for (
    const ability of [
      plainAbility({ rpc: { transports: ['cloudflare-binding-rpc'] } }),
      plainAbility({
        ...streamingMethods,
        rpc: { transports: ['http-batch', 'cloudflare-binding-rpc'] },
      }),
    ]
  ) {
    const served = serviceWith(ability);
    assert.deepEqual(served.discovery().abilities[0].rpc.transports, ability.rpc.transports);
    assert.equal(typeof served.connectAbility, 'function');
  }
});

test('Ability definition handler: a factory receiving context, identity, connInfo, signal, remainingTimeoutMs, idempotencyKey', async () => {
  const fx = await createFixture();
  assertRefusedDefinition(() => plainAbility({ handler: { ping() {} } }), 'handler');
  const received: HandlerFactoryInput[] = [];
  const inspected = defineAbility({
    id: 'svc-c.inspect',
    methods: { ping: abilityMethod({ input: anyObject, output: anyObject }) },
    handler: (input) => {
      received.push(input);
      return { ping: () => ({ pong: true }) };
    },
  });
  const service = fx.deploy('svc-c', [inspected]);
  const token = await fx.tokenFor('svc-c', ['svc-c.read']);
  using session = fx.session('svc-c.inspect', {
    token,
    idempotencyKey: 'key-1',
    transport: httpBatchRpc((request) => service.fetch(request, { BINDING: 'bound value' })),
  });
  await session.ping({});
  await session.ping({});
  // One factory call per method call.
  assert.equal(received.length, 2);
  const [input] = received;
  // The Hono context of the call, typed: bindings and the request read without a cast.
  const { context } = input;
  assert.equal(context.env.BINDING, 'bound value');
  assert.equal(new URL(context.req.url).pathname, '/rpc/svc-c.inspect');
  assert.equal(context.req.path, '/rpc/svc-c.inspect');
  assert.deepEqual(context.req.param(), {});
  assert.equal(context.req.header('X-Svc-Idempotency-Key'), 'key-1');
  assert.equal(input.identity.audience, 'svc-c');
  assert.deepEqual(input.identity.scopes, ['svc-c.read']);
  assert.ok(input.signal instanceof AbortSignal);
  assert.equal(input.signal.aborted, false);
  assert.equal(typeof input.remainingTimeoutMs, 'function');
  const remaining = input.remainingTimeoutMs();
  assert.ok(typeof remaining === 'number' && remaining > 0 && remaining <= 10_000);
  assert.equal(input.idempotencyKey, 'key-1');
  // svc-c has no ingress: connection info is never handed over.
  assert.equal(input.connInfo, undefined);
  assert.equal(typeof input.requestId, 'string');
});
