// Contract: Service discovery document. What a service publishes at
// /.well-known/svc/service.json, and the registry rule that configuration is the identity
// authority.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { defineAbility } from '../../src/service/ability.ts';
import { defineCapabilities } from '../../src/service/capabilities.ts';
import { abilityMethod } from '../../src/service/method.ts';
import type { ServiceDiscoveryDocument, SvcService } from '../../src/service/mod.ts';
import { assertRefusal, createFixture } from './fixture.ts';
import { whoamiOnlyAbility } from './fixture-abilities.ts';

const DISCOVERY_URL = 'https://svc.fixture.test/.well-known/svc/service.json';

async function fetchDocument(service: { fetch(request: Request): Promise<Response> }) {
  const response = await service.fetch(new Request(DISCOVERY_URL));
  return { response, document: (await response.json()) as ServiceDiscoveryDocument };
}

/** A stand-in that serves `document` as its discovery document (a misconfigured service). */
function servingDocument(document: unknown): SvcService {
  return {
    fetch: () => Promise.resolve(Response.json(document)),
  } as unknown as SvcService;
}

test('Service discovery document: id, title, version and abilities, served as JSON', async () => {
  const fx = await createFixture();
  const { response, document } = await fetchDocument(fx.services['svc-a']);
  assert.equal(response.status, 200);
  assert.match(response.headers.get('content-type') ?? '', /^application\/json/);
  assert.equal(document.id, 'svc-a');
  assert.equal(document.title, 'Service A');
  assert.equal(document.version, '1.0.0');
  assert.deepEqual(document.abilities.map((entry) => entry.id), [
    'svc-a.echo',
    'svc-a.other',
    'svc-a.internal',
    'svc-a.private',
  ]);
  assert.equal('capabilities' in document, false);
  assert.deepEqual(document, fx.services['svc-a'].discovery());
});

test('Service discovery document: capabilities are optional and may carry serviceId', async () => {
  const fx = await createFixture();
  const service = fx.deploy('svc-c', [whoamiOnlyAbility(fx.stats, 'svc-c')], {
    capabilities: defineCapabilities({
      serviceId: 'svc-c',
      scopes: { 'svc-c.read': { description: 'Read things' } },
    }),
  });
  const { document } = await fetchDocument(service);
  assert.equal(document.capabilities?.serviceId, 'svc-c');
  assert.deepEqual(document.capabilities?.scopes?.['svc-c.read'], { description: 'Read things' });
  // A catalog naming another service refuses the service itself.
  assert.throws(
    () =>
      fx.createService({
        id: 'svc-c',
        abilities: [whoamiOnlyAbility(fx.stats, 'svc-c')],
        capabilities: defineCapabilities({ serviceId: 'svc-x' }),
      }),
    /serviceId/,
  );
});

test('Service discovery document: each ability entry carries every projected field', async () => {
  const fx = await createFixture();
  const { document } = await fetchDocument(fx.services['svc-a']);
  const echo = document.abilities[0];
  assert.equal(echo.exposure, 'published');
  assert.equal(echo.access, 'plane');
  assert.deepEqual(echo.scopes, []);
  assert.deepEqual(echo.rpc, { path: '/rpc/svc-a.echo', transports: ['http-batch', 'websocket'] });
  assert.deepEqual(Object.keys(echo.methods), [
    'whoami',
    'write',
    'sleep',
    'fail',
    'failShaped',
    'badOutput',
    'ticks',
    'failMidStream',
    'items.get',
    'items.update',
    'items.search',
    'items.replace',
    'items.patch',
    'items.delete',
  ]);
  const whoami = echo.methods.whoami;
  assert.deepEqual(whoami.scopes, ['svc-a.read']);
  assert.equal(whoami.inputSchema.type, 'object');
  assert.match(String(whoami.inputSchema.$schema), /draft\/2020-12/);
  assert.equal(whoami.outputSchema.type, 'object');
  assert.deepEqual(whoami.mcp, { name: 'svc-a_whoami', description: 'Echo the verified identity' });
  assert.equal(whoami.timeoutMs, 10_000);
  assert.equal('idempotent' in whoami, false);
  assert.equal(echo.methods.failShaped.idempotent, true);
  assert.deepEqual(echo.methods['items.update'].rest, {
    method: 'post',
    path: '/items/{id}',
    status: 201,
  });
  assert.deepEqual(echo.methods['items.update'].inputSchema.required, ['id', 'name']);
  const internal = document.abilities[2];
  assert.equal(internal.access, 'service');
  assert.deepEqual(internal.scopes, ['svc-a.internal']);
  assert.equal(document.abilities[3].exposure, 'private');
});

test('Service discovery document: streaming methods carry stream: true and an item outputSchema', async () => {
  const fx = await createFixture();
  const { document } = await fetchDocument(fx.services['svc-a']);
  const ticks = document.abilities[0].methods.ticks;
  assert.equal(ticks.stream, true);
  assert.equal(ticks.outputSchema.type, 'object');
  assert.deepEqual(Object.keys(ticks.outputSchema.properties as object).sort(), ['i', 'pad']);
  // Streams are never bounded by a ceiling: the effective ceiling is 0 (none).
  assert.equal(ticks.timeoutMs, 0);
});

test('Service discovery document: timeoutMs is the effective per-method ceiling', async () => {
  const fx = await createFixture();
  const anyObject = z.record(z.string(), z.unknown());
  const ability = defineAbility({
    id: 'svc-c.timed',
    methods: {
      inherits: abilityMethod({ input: anyObject, output: anyObject }),
      own: abilityMethod({ input: anyObject, output: anyObject, timeoutMs: 750 }),
      none: abilityMethod({ input: anyObject, output: anyObject, timeoutMs: 0 }),
    },
    handler: () => ({ inherits: () => ({}), own: () => ({}), none: () => ({}) }),
  });
  const ceilings = (service: SvcService) => {
    const methods = service.discovery().abilities[0].methods;
    return [methods.inherits.timeoutMs, methods.own.timeoutMs, methods.none.timeoutMs];
  };
  assert.deepEqual(ceilings(fx.deploy('svc-c', [ability])), [10_000, 750, 0]);
  assert.deepEqual(ceilings(fx.deploy('svc-c', [ability], { timeout: { methodMs: 2500 } })), [
    2500,
    750,
    0,
  ]);
  assert.deepEqual(ceilings(fx.deploy('svc-c', [ability], { timeout: { methodMs: false } })), [
    0,
    750,
    0,
  ]);
});

test('Service discovery document: httpCache emits Cache-Control and Cache-Tag', async () => {
  const fx = await createFixture();
  const plain = await fetchDocument(fx.services['svc-c']);
  assert.equal(plain.response.headers.get('cache-control'), null);
  assert.equal(plain.response.headers.get('cache-tag'), null);
  const ability = whoamiOnlyAbility(fx.stats, 'svc-c');
  const cached = await fetchDocument(fx.deploy('svc-c', [ability], { httpCache: true }));
  assert.match(cached.response.headers.get('cache-control') ?? '', /max-age=\d+/);
  assert.match(cached.response.headers.get('cache-control') ?? '', /stale-while-revalidate=300/);
  assert.match(cached.response.headers.get('cache-tag') ?? '', /svc:service:svc-c/);
  const tuned = await fetchDocument(fx.deploy('svc-c', [ability], {
    httpCache: { maxAgeSeconds: 30, staleWhileRevalidateSeconds: 0, tags: ['team-c'] },
  }));
  assert.equal(tuned.response.headers.get('cache-control'), 'public, max-age=30');
  assert.match(tuned.response.headers.get('cache-tag') ?? '', /team-c/);
});

test('Service discovery document: the registry accepts it only when its ids equal the configured id', async () => {
  const fx = await createFixture();
  const issueFor = (targetServiceId: string) =>
    fx.plane.issueCapabilityToken({
      callerServiceId: 'svc-caller',
      targetServiceId,
      scopes: [`${targetServiceId}.read`],
      callerAccess: 'service',
    });
  const genuine = fx.services['svc-c'].discovery();
  // The endpoint configured as svc-c serves a document that says it is svc-a.
  fx.replaceService('svc-c', servingDocument({ ...genuine, id: 'svc-a' }));
  await assertRefusal(issueFor('svc-c'), { code: 'capability_auth', status: 403 });
  // ... or whose capability catalog names another service.
  fx.replaceService(
    'svc-c',
    servingDocument({ ...genuine, capabilities: { serviceId: 'svc-x' } }),
  );
  await assertRefusal(issueFor('svc-c'), { code: 'capability_auth', status: 403 });
  // Other targets are unaffected.
  assert.equal((await issueFor('svc-a')).claims.aud, 'svc-a');
});
