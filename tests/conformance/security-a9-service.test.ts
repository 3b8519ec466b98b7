// Security checklist A9, service side: the access class (`spa`) against the ability's `access`,
// decided by the service from its own definition before any handler exists.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { memoryRegistryCache } from '../../src/plane/registry-cache.ts';
import { assertRefusal, createFixture } from './fixture.ts';
import { echoAbility, internalAbility, otherAbility, privateAbility } from './fixture-abilities.ts';

interface Report {
  identity: Record<string, unknown>;
}

test('ACC-01 control: an HMAC-issued (service-class) token reaches svc-a.internal', async () => {
  const fx = await createFixture();
  using session = fx.session('svc-a.internal', { scopes: ['svc-a.internal'] });
  const report = (await session.whoami({})) as Report;
  assert.equal(report.identity.callerAccess, 'service');
  assert.equal(report.identity.serviceId, 'svc-caller');
  assert.equal('subject' in report.identity, false);
  assert.equal(fx.count('factories', 'svc-a.internal'), 1);
});

test('ACC-02 spa plane at svc-a.internal: 403 before the handler factory runs', async () => {
  const fx = await createFixture();
  const token = await fx.forgeToken(fx.baselineClaims({ spa: 'plane', scp: ['svc-a.internal'] }));
  using session = fx.session('svc-a.internal', { token });
  await assertRefusal(session.whoami({}), {
    code: 'capability_auth',
    status: 403,
    retryable: false,
    reason: 'access_class_mismatch',
  });
  assert.equal(fx.count('factories', 'svc-a.internal'), 0);
});

test('ACC-07 stale plane catalog: the redeployed service refuses from its own definition', async () => {
  const fx = await createFixture({ discoveryCache: memoryRegistryCache() });
  const asBob = () =>
    fx.plane.abilitySession<{ whoami(input: unknown): Report }>({
      abilityId: 'svc-a.echo',
      targetServiceId: 'svc-a',
      scopes: ['svc-a.read'],
      caller: { id: 'bob', kind: 'user' },
    });
  {
    // The plane caches svc-a's catalog with svc-a.echo as a plane-class ability.
    using session = asBob();
    const report = await session.whoami({});
    assert.deepEqual(report.identity.subject, { id: 'bob' });
  }
  const factoriesBefore = fx.count('factories', 'svc-a.echo');
  const tightened = fx.createService({
    id: 'svc-a',
    abilities: [
      echoAbility(fx.stats, 'svc-a', { access: 'service' }),
      otherAbility(fx.stats),
      internalAbility(fx.stats),
      privateAbility(fx.stats),
    ],
  });
  // Which side refused: the plane deciding from its stale catalog would send nothing to svc-a.
  const rpcPaths: string[] = [];
  fx.replaceService(
    'svc-a',
    {
      ...tightened,
      fetch: (request: Request, env?: unknown, ctx?: unknown) => {
        const path = new URL(request.url).pathname;
        if (path.startsWith('/rpc/')) rpcPaths.push(path);
        return tightened.fetch(request, env, ctx);
      },
      discovery: () => tightened.discovery(),
    } as typeof tightened,
  );
  using session = asBob();
  await assertRefusal(session.whoami({}), {
    code: 'capability_auth',
    status: 403,
    reason: 'access_class_mismatch',
  });
  assert.deepEqual(rpcPaths, ['/rpc/svc-a.echo'], 'svc-a itself refused the call');
  assert.equal(fx.count('factories', 'svc-a.echo'), factoriesBefore);
});

test('ACC-08 a delegated token (act present, spa plane) at svc-a.internal is refused 403', async () => {
  const fx = await createFixture();
  const issued = await fx.plane.issueCapabilityToken({
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.internal'],
    callerAccess: 'plane',
    subject: { id: 'user-7', orgId: 'org-1' },
  });
  assert.deepEqual(issued.claims.act, { sub: 'svc-caller' });
  using session = fx.session('svc-a.internal', { token: issued.token });
  await assertRefusal(session.whoami({}), {
    code: 'capability_auth',
    status: 403,
    reason: 'access_class_mismatch',
  });
  assert.equal(fx.count('factories', 'svc-a.internal'), 0);
});
