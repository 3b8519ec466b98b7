// Contract "Service options": `capabilities` is a capability catalog. The plane refuses a whole
// discovery document over one malformed catalog entry, so `createService` refuses such a catalog
// up front, and what it publishes is what the plane reads back, a scope named `__proto__` included.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SvcConfigurationError, svcErrorInfo } from '../../src/core/errors.ts';
import { defineCapabilities } from '../../src/service/capabilities.ts';
import { parseServiceDiscoveryDocument } from '../../src/service/discovery.ts';
import { createFixture } from './fixture.ts';
import { createFixtureStats, whoamiOnlyAbility } from './fixture-abilities.ts';

const DISCOVERY = 'https://svc-c.fixture.test/.well-known/svc/service.json';

test('Catalog createService refuses a catalog the plane would refuse, naming the problem', async () => {
  const fx = await createFixture();
  const cases: [unknown, RegExp][] = [
    [{ scopes: { 'svc-c read': {} } }, /scope "svc-c read" must not contain whitespace/],
    [{ scopes: { 'svc-c.read': { description: 42 } } }, /description must be a string/],
    [{ scopes: ['svc-c.read'] }, /scopes must be an object mapping scope names/],
    [{ serviceId: 'svc-c', extra: true }, /unknown field `extra` \(accepted: serviceId, scopes\)/],
  ];
  for (const [capabilities, pattern] of cases) {
    assert.throws(
      () =>
        fx.createService({
          id: 'svc-c',
          capabilities: capabilities as never,
          abilities: [whoamiOnlyAbility(createFixtureStats(), 'svc-c')],
        }),
      (error) => {
        assert.ok(error instanceof SvcConfigurationError, String(error));
        assert.equal(svcErrorInfo(error).reason, 'invalid_capabilities');
        assert.match(error.message, /^service svc-c capabilities: /);
        assert.match(error.message, pattern);
        return true;
      },
      JSON.stringify(capabilities),
    );
  }
});

test('Catalog a scope named __proto__ is published and read back by the plane as a scope', async () => {
  const fx = await createFixture();
  const service = fx.createService({
    id: 'svc-c',
    capabilities: defineCapabilities({
      scopes: JSON.parse('{"__proto__":{"description":"p"},"svc-c.read":{}}'),
    }),
    abilities: [whoamiOnlyAbility(createFixtureStats(), 'svc-c')],
  });
  assert.deepEqual(Object.keys(service.discovery().capabilities!.scopes!), [
    '__proto__',
    'svc-c.read',
  ]);
  const served = await (await service.fetch(new Request(DISCOVERY))).json();
  const parsed = parseServiceDiscoveryDocument(served, 'svc-c');
  assert.deepEqual(Object.keys(parsed.capabilities!.scopes!), ['__proto__', 'svc-c.read']);
});
