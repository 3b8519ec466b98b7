import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { DEFAULT_ABILITY_TIMEOUT_MS } from '../../src/core/deadline.ts';
import { SvcConfigurationError, svcErrorInfo } from '../../src/core/errors.ts';
import { defineAbility } from '../../src/service/ability.ts';
import { defineCapabilities } from '../../src/service/capabilities.ts';
import {
  abilityDiscoveryEntry,
  parseServiceDiscoveryDocument,
  type ServiceDiscoveryDocument,
  serviceDiscoveryDocument,
} from '../../src/service/discovery.ts';
import { abilityMethod } from '../../src/service/method.ts';
import { echoAbility } from '../support/ability-fixtures.ts';

const DRAFT_2020_12 = 'https://json-schema.org/draft/2020-12/schema';

function timedAbility() {
  return defineAbility({
    id: 'svc-a.timed',
    methods: {
      inherits: abilityMethod({ input: z.object({}), output: z.object({}) }),
      optsOut: abilityMethod({ input: z.object({}), output: z.object({}), timeoutMs: 0 }),
      own: abilityMethod({ input: z.object({}), output: z.object({}), timeoutMs: 500 }),
    },
    handler: () => ({ inherits: () => ({}), optsOut: () => ({}), own: () => ({}) }),
  });
}

function fixtureDocument(): ServiceDiscoveryDocument {
  return serviceDiscoveryDocument({
    id: 'svc-a',
    title: 'Service A',
    version: '1.2.3',
    capabilities: defineCapabilities({
      serviceId: 'svc-a',
      scopes: { 'svc-a.read': { description: 'Read' }, 'svc-a.write': {} },
    }),
    abilities: [echoAbility().ability, timedAbility()],
    ingress: { brokerServiceId: 'plane' },
  });
}

/** A fresh, JSON-shaped copy of the fixture document to tamper with. */
function receivedDocument(): any {
  return JSON.parse(JSON.stringify(fixtureDocument()));
}

function refusesDocument(value: unknown, reason: string, pattern?: RegExp): void {
  assert.throws(
    () => parseServiceDiscoveryDocument(value, 'svc-a'),
    (error) => {
      assert.ok(error instanceof SvcConfigurationError, String(error));
      assert.equal(svcErrorInfo(error).reason, reason, error.message);
      if (pattern !== undefined) assert.match(error.message, pattern);
      return true;
    },
  );
}

test('an ability entry carries exposure, access, scopes, rpc and per-method projections', () => {
  const entry = abilityDiscoveryEntry(echoAbility().ability);
  assert.equal(entry.id, 'svc-a.echo');
  assert.equal(entry.exposure, 'published');
  assert.equal(entry.access, 'plane');
  assert.deepEqual(entry.scopes, []);
  assert.deepEqual(entry.rpc, { path: '/rpc/svc-a.echo', transports: ['http-batch', 'websocket'] });
  assert.deepEqual(Object.keys(entry.methods), [
    'whoami',
    'write',
    'sleep',
    'fail',
    'failShaped',
    'badOutput',
    'ticks',
    'failMidStream',
    'items.get',
  ]);
  const whoami = entry.methods.whoami;
  assert.deepEqual(whoami.scopes, ['svc-a.read']);
  assert.equal(whoami.inputSchema.$schema, DRAFT_2020_12);
  assert.equal(whoami.outputSchema.$schema, DRAFT_2020_12);
  assert.equal(whoami.timeoutMs, DEFAULT_ABILITY_TIMEOUT_MS);
  assert.deepEqual(whoami.mcp, { name: 'svc-a_whoami', description: 'Who is calling' });
  assert.equal('stream' in whoami, false);
  assert.equal('idempotent' in whoami, false, 'an unmarked method makes no claim');
  assert.equal('rest' in whoami, false);
});

test('a streaming method carries stream: true, timeoutMs 0 and the schema of one item', () => {
  const ticks = abilityDiscoveryEntry(echoAbility().ability).methods.ticks;
  assert.equal(ticks.stream, true);
  assert.equal(ticks.timeoutMs, 0);
  assert.equal(ticks.outputSchema.type, 'object');
  assert.deepEqual(Object.keys(ticks.outputSchema.properties as object), ['i']);
});

test('REST metadata and the idempotent projection appear only when declared', () => {
  const get = abilityDiscoveryEntry(echoAbility().ability).methods['items.get'];
  assert.deepEqual(get.rest, { method: 'get', path: '/items/{id}', status: 200 });
  assert.equal(get.idempotent, true);
  // The output came from arktype, the input from zod: both project to draft 2020-12.
  assert.deepEqual(Object.keys(get.outputSchema.properties as object).sort(), ['id', 'name']);
  assert.deepEqual(Object.keys(get.inputSchema.properties as object), ['id']);
});

test('timeoutMs is the effective ceiling: method, else service, else the default; 0 = none', () => {
  const byDefault = abilityDiscoveryEntry(timedAbility()).methods;
  assert.equal(byDefault.inherits.timeoutMs, DEFAULT_ABILITY_TIMEOUT_MS);
  assert.equal(byDefault.optsOut.timeoutMs, 0);
  assert.equal(byDefault.own.timeoutMs, 500);
  const serviceWide = abilityDiscoveryEntry(timedAbility(), { serviceMethodCeilingMs: 3_000 })
    .methods;
  assert.equal(serviceWide.inherits.timeoutMs, 3_000);
  assert.equal(serviceWide.own.timeoutMs, 500);
  const unbounded =
    abilityDiscoveryEntry(timedAbility(), { serviceMethodCeilingMs: false }).methods;
  assert.equal(unbounded.inherits.timeoutMs, 0);
  assert.equal(unbounded.own.timeoutMs, 500);
});

test('the service document carries id, title, version, capabilities, ingress and abilities', () => {
  const document = fixtureDocument();
  assert.equal(document.id, 'svc-a');
  assert.equal(document.title, 'Service A');
  assert.equal(document.version, '1.2.3');
  assert.deepEqual(document.capabilities, {
    serviceId: 'svc-a',
    scopes: { 'svc-a.read': { description: 'Read' }, 'svc-a.write': {} },
  });
  assert.deepEqual(document.ingress, { required: true, brokerServiceId: 'plane' });
  assert.deepEqual(document.abilities.map((ability) => ability.id), ['svc-a.echo', 'svc-a.timed']);
  // Plain JSON: serialising and parsing it changes nothing.
  assert.deepEqual(JSON.parse(JSON.stringify(document)), document);
});

test('the service document omits capabilities and ingress when not configured', () => {
  const document = serviceDiscoveryDocument({
    id: 'svc-a',
    title: 'A',
    version: '1',
    abilities: [timedAbility()],
  });
  assert.equal('capabilities' in document, false);
  assert.equal('ingress' in document, false);
});

test('the service document refuses a catalog of another service and foreign or duplicate abilities', () => {
  assert.throws(
    () =>
      serviceDiscoveryDocument({
        id: 'svc-a',
        title: 'A',
        version: '1',
        capabilities: defineCapabilities({ serviceId: 'svc-b' }),
        abilities: [],
      }),
    /capabilities\.serviceId is "svc-b", not "svc-a"/,
  );
  assert.throws(
    () =>
      serviceDiscoveryDocument({
        id: 'svc-b',
        title: 'B',
        version: '1',
        abilities: [timedAbility()],
      }),
    /does not belong to service svc-b/,
  );
  assert.throws(
    () =>
      serviceDiscoveryDocument({
        id: 'svc-a',
        title: 'A',
        version: '1',
        abilities: [timedAbility(), timedAbility()],
      }),
    /declared twice/,
  );
  assert.throws(
    () => serviceDiscoveryDocument({ id: 'svc-a', title: '', version: '1', abilities: [] }),
    /title must be a non-empty string/,
  );
});

test('a received document that the service produced parses back to the same document', () => {
  assert.deepEqual(parseServiceDiscoveryDocument(receivedDocument(), 'svc-a'), fixtureDocument());
});

test('unknown fields of a received document are dropped', () => {
  const received = receivedDocument();
  received.extra = 'x';
  received.abilities[0].owner = 'someone';
  received.abilities[0].methods.whoami.cost = 3;
  const parsed = parseServiceDiscoveryDocument(received, 'svc-a') as any;
  assert.equal('extra' in parsed, false);
  assert.equal('owner' in parsed.abilities[0], false);
  assert.equal('cost' in parsed.abilities[0].methods.whoami, false);
});

test('REG-01 a document whose id is not the configured id is refused', () => {
  const received = receivedDocument();
  received.id = 'svc-evil';
  refusesDocument(received, 'discovery_service_mismatch', /svc-evil/);
});

test('REG-02 a document whose capabilities.serviceId is not the configured id is refused', () => {
  const received = receivedDocument();
  received.capabilities.serviceId = 'svc-evil';
  refusesDocument(received, 'discovery_service_mismatch', /capabilities\.serviceId/);
});

test('an ability id outside the configured service is refused', () => {
  const received = receivedDocument();
  received.abilities[0].id = 'svc-b.echo';
  refusesDocument(received, 'discovery_service_mismatch', /svc-a\.<name>/);
});

test('REG-03 a REST {name} that is not a top-level input field is refused', () => {
  const received = receivedDocument();
  received.abilities[0].methods['items.get'].rest.path = '/items/{itemId}';
  refusesDocument(received, 'discovery_rest_variable', /\{itemId\}/);
  const nested = receivedDocument();
  nested.abilities[0].methods['items.get'].inputSchema = {
    type: 'object',
    properties: { item: { type: 'object', properties: { id: { type: 'string' } } } },
  };
  refusesDocument(nested, 'discovery_rest_variable', /\{id\}/);
});

test('REG-03 a REST {name} whose field cannot hold a string is refused', () => {
  const received = receivedDocument();
  received.abilities[0].methods['items.get'].inputSchema = {
    type: 'object',
    properties: { id: { type: 'integer' } },
  };
  refusesDocument(
    received,
    'discovery_rest_variable',
    /\{id\} names a field that cannot hold a string/,
  );
  const viaRef = receivedDocument();
  viaRef.abilities[0].methods['items.get'].inputSchema = {
    type: 'object',
    properties: { id: { $ref: '#/$defs/N' } },
    $defs: { N: { anyOf: [{ type: 'number' }, { type: 'null' }] } },
  };
  refusesDocument(viaRef, 'discovery_rest_variable', /\{id\}/);
});

test('duplicate ability ids, RPC paths, REST routes and MCP names are refused', () => {
  const duplicateId = receivedDocument();
  duplicateId.abilities[1].id = 'svc-a.echo';
  refusesDocument(duplicateId, 'discovery_duplicate_projection', /ability id svc-a\.echo/);

  const duplicatePath = receivedDocument();
  duplicatePath.abilities[1].rpc.path = '/rpc/svc-a.echo';
  refusesDocument(duplicatePath, 'discovery_duplicate_projection', /rpc path/);

  const duplicateRoute = receivedDocument();
  duplicateRoute.abilities[1].methods.own.inputSchema = {
    type: 'object',
    properties: { key: { type: 'string' } },
  };
  duplicateRoute.abilities[1].methods.own.rest = {
    method: 'get',
    path: '/items/{key}',
    status: 200,
  };
  refusesDocument(duplicateRoute, 'discovery_duplicate_projection', /REST route GET/);

  const duplicateTool = receivedDocument();
  duplicateTool.abilities[1].methods.own.mcp = { name: 'svc-a_whoami', description: '' };
  refusesDocument(duplicateTool, 'discovery_duplicate_projection', /MCP tool name svc-a_whoami/);
});

test('malformed documents are refused with discovery_malformed', () => {
  const cases: [string, (document: any) => unknown][] = [
    ['not an object', () => 'text'],
    ['array', () => []],
    ['missing title', (d) => (delete d.title, d)],
    ['version not a string', (d) => ((d.version = 1), d)],
    ['abilities not an array', (d) => ((d.abilities = {}), d)],
    ['malformed ability id', (d) => ((d.abilities[0].id = 'svc-a.echo.x'), d)],
    ['bad exposure', (d) => ((d.abilities[0].exposure = 'public'), d)],
    ['bad access', (d) => ((d.abilities[0].access = 'user'), d)],
    ['scope with whitespace', (d) => ((d.abilities[0].scopes = ['a b']), d)],
    ['rpc path relative', (d) => ((d.abilities[0].rpc.path = 'rpc/x'), d)],
    ['unknown transport', (d) => ((d.abilities[0].rpc.transports = ['tcp']), d)],
    ['no transports', (d) => ((d.abilities[0].rpc.transports = []), d)],
    ['stream over http-batch only', (d) => ((d.abilities[0].rpc.transports = ['http-batch']), d)],
    ['no methods', (d) => ((d.abilities[1].methods = {}), d)],
    [
      'reserved method name',
      (d) => ((d.abilities[1].methods.then = d.abilities[1].methods.own), d),
    ],
    ['stream false', (d) => ((d.abilities[0].methods.whoami.stream = false), d)],
    ['idempotent false', (d) => ((d.abilities[0].methods.whoami.idempotent = false), d)],
    ['negative timeoutMs', (d) => ((d.abilities[0].methods.whoami.timeoutMs = -1), d)],
    ['missing timeoutMs', (d) => (delete d.abilities[0].methods.whoami.timeoutMs, d)],
    ['inputSchema not an object', (d) => ((d.abilities[0].methods.whoami.inputSchema = true), d)],
    ['method scopes missing', (d) => (delete d.abilities[0].methods.whoami.scopes, d)],
    [
      'stream with REST',
      (d) => ((d.abilities[0].methods.ticks.rest = { method: 'get', path: '/t', status: 200 }), d),
    ],
    ['rest method', (d) => ((d.abilities[0].methods['items.get'].rest.method = 'head'), d)],
    ['rest status', (d) => ((d.abilities[0].methods['items.get'].rest.status = 404), d)],
    [
      'rest empty variable',
      (d) => ((d.abilities[0].methods['items.get'].rest.path = '/items/{}'), d),
    ],
    ['mcp name', (d) => ((d.abilities[0].methods.whoami.mcp.name = 'bad name'), d)],
    ['ingress.required', (d) => ((d.ingress.required = false), d)],
    ['ingress broker empty', (d) => ((d.ingress.brokerServiceId = ''), d)],
    ['catalog scope name', (d) => ((d.capabilities.scopes['a b'] = {}), d)],
  ];
  for (const [label, tamper] of cases) {
    assert.throws(
      () => parseServiceDiscoveryDocument(tamper(receivedDocument()), 'svc-a'),
      (error) => {
        assert.ok(error instanceof SvcConfigurationError, `${label}: ${error}`);
        assert.equal(
          svcErrorInfo(error).reason,
          'discovery_malformed',
          `${label}: ${error.message}`,
        );
        return true;
      },
      label,
    );
  }
});

test('an rpc.path that could leave the service or shadow its routes refuses the document', () => {
  const hostile = [
    '/../svc-b/rpc/svc-a.echo',
    '/rpc/./svc-a.echo',
    '/%2e%2e/svc-b/rpc/x',
    '/\\evil.example/rpc/svc-a.echo',
    '/rpc//svc-a.echo',
    '/.well-known/svc/service.json',
    '/.well-known/svc/',
  ];
  for (const path of hostile) {
    const document = receivedDocument();
    document.abilities[0].rpc.path = path;
    refusesDocument(document, 'discovery_malformed', /ability svc-a\.echo rpc\.path/);
  }
});

test('prototype-named keys from JSON.parse are refused, never merged', () => {
  const text = JSON.stringify(fixtureDocument()).replace('"whoami":', '"__proto__":');
  refusesDocument(JSON.parse(text), 'discovery_malformed', /__proto__/);
  const constructorName = JSON.stringify(fixtureDocument()).replace('"write":', '"constructor":');
  refusesDocument(JSON.parse(constructorName), 'discovery_malformed', /constructor/);
});

test('a catalog scope named __proto__ stays a plain data key', () => {
  const received = JSON.parse(
    JSON.stringify(fixtureDocument()).replace(
      '"svc-a.write":{}',
      '"__proto__":{"description":"p"}',
    ),
  );
  const parsed = parseServiceDiscoveryDocument(received, 'svc-a');
  const scopes = parsed.capabilities!.scopes!;
  assert.equal(Object.getPrototypeOf(scopes), Object.prototype);
  assert.deepEqual(Object.keys(scopes), ['svc-a.read', '__proto__']);
});

test('the service document refuses a catalog that did not pass the defineCapabilities rules', () => {
  const cases: [unknown, RegExp][] = [
    [{ scopes: { 'svc-a read': {} } }, /scope "svc-a read" must not contain whitespace/],
    [{ scopes: { 'svc-a.read': { description: 42 } } }, /description must be a string/],
    [{ scopes: ['svc-a.read'] }, /scopes must be an object mapping scope names/],
    [{ scopes: { 'svc-a.read': { bogus: 1 } } }, /scopes\["svc-a\.read"\]: unknown field `bogus`/],
    [{ serviceId: 'svc-a', extra: true }, /unknown field `extra` \(accepted: serviceId, scopes\)/],
  ];
  for (const [capabilities, pattern] of cases) {
    assert.throws(
      () =>
        serviceDiscoveryDocument({
          id: 'svc-a',
          title: 'A',
          version: '1',
          capabilities: capabilities as never,
          abilities: [],
        }),
      (error) => {
        assert.ok(error instanceof SvcConfigurationError, String(error));
        assert.equal(svcErrorInfo(error).reason, 'invalid_capabilities');
        assert.match(error.message, /^service svc-a capabilities: /);
        assert.match(error.message, pattern);
        return true;
      },
      JSON.stringify(capabilities),
    );
  }
});

test('a published catalog scope named __proto__ is an own key the plane reads back', () => {
  const document = serviceDiscoveryDocument({
    id: 'svc-a',
    title: 'A',
    version: '1',
    capabilities: defineCapabilities({
      scopes: JSON.parse('{"__proto__":{"description":"p"},"svc-a.read":{}}'),
    }),
    abilities: [],
  });
  const scopes = document.capabilities!.scopes!;
  assert.equal(Object.getPrototypeOf(scopes), Object.prototype);
  assert.deepEqual(Object.keys(scopes), ['__proto__', 'svc-a.read']);
  const received = parseServiceDiscoveryDocument(JSON.parse(JSON.stringify(document)), 'svc-a');
  assert.deepEqual(Object.keys(received.capabilities!.scopes!), ['__proto__', 'svc-a.read']);
  assert.deepEqual(
    Object.getOwnPropertyDescriptor(received.capabilities!.scopes, '__proto__')?.value,
    {
      description: 'p',
    },
  );
});
