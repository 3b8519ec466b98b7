import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type } from 'arktype';
import { z } from 'zod';
import { SvcConfigurationError } from '../../src/core/errors.ts';
import {
  type AbilityDefinition,
  assertUniqueProjections,
  defineAbility,
} from '../../src/service/ability.ts';
import { rpcPathProblem } from '../../src/service/identifiers.ts';
import { abilityMethod } from '../../src/service/method.ts';

// workerd permits code generation only at startup, where arktype compiles its validators, so
// arktype schemas are declared at module scope.
const arkPing = type({ 'message?': 'string' });
const arkPong = type({ pong: 'boolean' });

const ping = abilityMethod({ input: arkPing, output: arkPong });
const watch = abilityMethod({
  input: z.object({}),
  output: z.object({ n: z.number() }),
  stream: true,
});

function refuses(definition: Record<string, unknown>, pattern: RegExp): void {
  assert.throws(
    () => defineAbility({ handler: () => ({}), ...definition } as never),
    (error) => {
      assert.ok(error instanceof SvcConfigurationError, String(error));
      assert.match(error.message, pattern);
      return true;
    },
  );
}

function pingAbility(id: string, extra: Record<string, unknown> = {}): AbilityDefinition {
  return defineAbility({
    id,
    methods: { ping },
    handler: () => ({ ping: () => ({ pong: true }) }),
    ...extra,
  } as never);
}

test('defaults: exposure private, access plane, rpc.path /rpc/<id>, transports http-batch', () => {
  const ability = pingAbility('svc-a.other');
  assert.equal(ability.exposure, 'private');
  assert.equal(ability.access, 'plane');
  assert.deepEqual(ability.scopes, []);
  assert.deepEqual(ability.rpc, { path: '/rpc/svc-a.other', transports: ['http-batch'] });
  assert.equal(Object.isFrozen(ability), true);
  assert.equal(Object.isFrozen(ability.rpc), true);
  assert.equal(Object.isFrozen(ability.methods), true);
});

test('declared values are kept', () => {
  const ability = pingAbility('svc-a.internal', {
    title: 'Internal',
    description: 'Service callers only',
    exposure: 'published',
    access: 'service',
    scopes: ['svc-a.internal'],
    rpc: { path: '/rpc/internal', transports: ['websocket', 'http-batch', 'websocket'] },
  });
  assert.equal(ability.title, 'Internal');
  assert.equal(ability.description, 'Service callers only');
  assert.equal(ability.exposure, 'published');
  assert.equal(ability.access, 'service');
  assert.deepEqual(ability.scopes, ['svc-a.internal']);
  assert.deepEqual(ability.rpc, { path: '/rpc/internal', transports: ['websocket', 'http-batch'] });
});

test('the id must be <service>.<name> with exactly one dot', () => {
  for (const id of ['svc-a.echo', 'svc_a.x-1', 'A.B']) assert.equal(pingAbility(id).id, id);
  for (
    const id of ['echo', 'svc-a.', '.echo', 'svc-a.echo.extra', 'svc a.echo', 'svc-a.éc', '', 7]
  ) {
    refuses({ id, methods: { ping } }, /id must be `<service>\.<name>`/);
  }
});

test('exposure, access and scopes are checked', () => {
  refuses(
    { id: 'svc-a.x', methods: { ping }, exposure: 'public' },
    /svc-a\.x.*exposure must be one of/,
  );
  refuses({ id: 'svc-a.x', methods: { ping }, access: 'user' }, /access must be one of/);
  refuses({ id: 'svc-a.x', methods: { ping }, scopes: ['a b'] }, /scopes entry/);
  refuses({ id: 'svc-a.x', methods: { ping }, title: 1 }, /title must be a string/);
  refuses(
    { id: 'svc-a.x', methods: { ping }, owner: 'me' },
    /unknown field `owner`/,
  );
});

test('methods must be a non-empty object and the handler a factory', () => {
  refuses({ id: 'svc-a.x', methods: {} }, /at least one method/);
  refuses({ id: 'svc-a.x', methods: [] }, /methods must be an object/);
  refuses({ id: 'svc-a.x', methods: { ping }, handler: {} }, /handler must be a factory function/);
});

test('method names must be reachable by name over RPC', () => {
  for (
    const name of [
      'authenticate',
      'constructor',
      'then',
      'toJSON',
      'catch',
      'toString',
      'hasOwnProperty',
      'valueOf',
      '__proto__',
      '__defineGetter__',
      'dup',
      '',
      'has space',
      'slash/name',
      'x'.repeat(129),
    ]
  ) {
    const methods = Object.defineProperty({}, name, { value: ping, enumerable: true });
    refuses({ id: 'svc-a.x', methods }, /svc-a\.x.*method name/);
  }
  const ability = pingAbility('svc-a.ok', { methods: { 'items.get': ping, 'a-b_c': ping } });
  assert.deepEqual(Object.keys(ability.methods), ['items.get', 'a-b_c']);
});

test('a method built without abilityMethod is checked, naming the ability and method', () => {
  refuses(
    {
      id: 'svc-a.raw',
      methods: {
        get: {
          input: z.object({ id: z.string() }),
          output: z.object({}),
          rest: { method: 'get', path: '/r/{nope}' },
        },
      },
    },
    /svc-a\.raw.*method "get".*rest\.path.*\{nope\}/,
  );
  const ability = pingAbility('svc-a.rawok', {
    methods: { raw: { input: z.object({}), output: z.object({}) } },
  });
  assert.equal(ability.methods.raw.stream, false);
});

test('REG-04 a streaming method needs websocket or cloudflare-binding-rpc', () => {
  refuses(
    { id: 'svc-a.feed', methods: { watch } },
    /svc-a\.feed.*method "watch".*streams.*websocket/,
  );
  refuses(
    { id: 'svc-a.feed', methods: { watch }, rpc: { transports: ['http-batch'] } },
    /rpc\.transports must enable/,
  );
  for (
    const transports of [['websocket'], ['cloudflare-binding-rpc'], ['http-batch', 'websocket']]
  ) {
    assert.deepEqual(
      defineAbility({
        id: 'svc-a.feed',
        methods: { watch },
        rpc: { transports: transports as never },
        handler: () => ({ watch: () => [] }),
      }).rpc.transports,
      transports,
    );
  }
});

test('rpc.path: literal segments of letters, digits and -._~ below the service, nothing else', () => {
  for (const path of ['/rpc/svc-a.echo', '/rpc/svc_a.x-y', '/custom/plain', '/v1/~x/', '/a.b']) {
    assert.equal(rpcPathProblem(path), undefined, path);
  }
  const refused: [unknown, RegExp][] = [
    ['rpc/x', /starting with `\/`/],
    [undefined, /starting with `\/`/],
    ['/', /literal path/],
    ['/rpc//x', /literal path/],
    ['//evil.example/rpc', /literal path/],
    ['/rpc/:id', /literal path/],
    ['/rpc/x?y', /literal path/],
    ['/rpc/%2e%2e', /literal path/],
    ['/\\evil.example/rpc', /literal path/],
    ['/rpc/x y', /literal path/],
    ['/rpc/é', /literal path/],
    ['/../svc-b/rpc/x', /`\.` or `\.\.` segment/],
    ['/rpc/./x', /`\.` or `\.\.` segment/],
    ['/rpc/x/..', /`\.` or `\.\.` segment/],
    ['/.well-known/svc/service.json', /\/\.well-known\/svc\//],
    ['/.well-known/svc', /\/\.well-known\/svc\//],
  ];
  for (const [path, problem] of refused) {
    assert.match(rpcPathProblem(path) ?? 'accepted', problem, String(path));
  }
  refuses(
    { id: 'svc-a.x', methods: { ping }, rpc: { path: '/../svc-b/rpc/x' } },
    /rpc\.path must not contain a `\.` or `\.\.` segment/,
  );
});

test('rpc.path and rpc.transports are checked', () => {
  refuses(
    { id: 'svc-a.x', methods: { ping }, rpc: { path: 'rpc/x' } },
    /rpc\.path must be a string starting with/,
  );
  refuses(
    { id: 'svc-a.x', methods: { ping }, rpc: { path: '/rpc/:id' } },
    /rpc\.path must be a literal path/,
  );
  refuses({ id: 'svc-a.x', methods: { ping }, rpc: { path: '/rpc//x' } }, /rpc\.path/);
  refuses(
    { id: 'svc-a.x', methods: { ping }, rpc: { transports: [] } },
    /rpc\.transports must be a non-empty array/,
  );
  refuses(
    { id: 'svc-a.x', methods: { ping }, rpc: { transports: ['tcp'] } },
    /"tcp" is not a transport/,
  );
  refuses(
    { id: 'svc-a.x', methods: { ping }, rpc: { host: 'x' } },
    /rpc: unknown field `host` \(accepted: path, transports\)/,
  );
});

test('assertUniqueProjections accepts distinct abilities of one service', () => {
  const first = defineAbility({
    id: 'svc-a.echo',
    methods: {
      get: abilityMethod({
        input: z.object({ id: z.string() }),
        output: z.object({}),
        rest: { method: 'get', path: '/items/{id}' },
        mcp: { name: 'items_get', description: 'Get' },
      }),
    },
    handler: () => ({ get: () => ({}) }),
  });
  const second = defineAbility({
    id: 'svc-a.other',
    methods: {
      // Same path, another HTTP method: a distinct route.
      put: abilityMethod({
        input: z.object({ id: z.string() }),
        output: z.object({}),
        rest: { method: 'put', path: '/items/{id}' },
      }),
    },
    handler: () => ({ put: () => ({}) }),
  });
  assert.doesNotThrow(() => assertUniqueProjections([first, second], 'svc-a'));
});

test('assertUniqueProjections refuses ids of another service, duplicates and clashing projections', () => {
  const echo = pingAbility('svc-a.echo');
  const refusesSet = (abilities: AbilityDefinition[], pattern: RegExp) =>
    assert.throws(() => assertUniqueProjections(abilities, 'svc-a'), (error) => {
      assert.ok(error instanceof SvcConfigurationError);
      assert.match(error.message, pattern);
      return true;
    });
  refusesSet([pingAbility('svc-b.echo')], /does not belong to service svc-a/);
  refusesSet([pingAbility('svc-ab.echo')], /does not belong to service svc-a/);
  refusesSet([echo, pingAbility('svc-a.echo')], /ability id svc-a\.echo is declared twice/);
  refusesSet(
    [echo, pingAbility('svc-a.two', { rpc: { path: '/rpc/svc-a.echo' } })],
    /rpc path \/rpc\/svc-a\.echo is declared twice/,
  );
  const routed = (id: string, variable: string) =>
    defineAbility({
      id,
      methods: {
        get: abilityMethod({
          input: z.object({ [variable]: z.string() }),
          output: z.object({}),
          rest: { method: 'get', path: `/items/{${variable}}` },
        }),
      },
      handler: () => ({ get: () => ({}) }) as never,
    });
  refusesSet(
    [routed('svc-a.one', 'id'), routed('svc-a.two', 'itemId')],
    /REST route GET \/items\/\{itemId\} is declared twice/,
  );
  const tool = (id: string) =>
    defineAbility({
      id,
      methods: {
        ping: abilityMethod({
          input: arkPing,
          output: arkPong,
          mcp: { name: 'ping', description: '' },
        }),
      },
      handler: () => ({ ping: () => ({ pong: true }) }),
    });
  refusesSet([tool('svc-a.one'), tool('svc-a.two')], /MCP tool name ping is declared twice/);
});
