// Security checklist A3, end to end: scope and access-class claims checked by svc-a's wrapper and
// gateway, through a real caller session, with the handler factory counters as witnesses.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertRefusal, createFixture } from './fixture.ts';

interface Report {
  identity: Record<string, unknown>;
}

test('CLM-09 scp [svc-a.read] calling write is refused 403 before the method body', async () => {
  const fx = await createFixture();
  using session = fx.session('svc-a.echo', { scopes: ['svc-a.read'] });
  await assertRefusal(session.write({}), {
    code: 'capability_auth',
    status: 403,
    retryable: false,
  });
  assert.equal(fx.count('factories', 'svc-a.echo'), 0);
  assert.equal(fx.count('calls', 'svc-a.echo#write'), 0);
  // The same session still serves what its scopes allow.
  assert.equal(((await session.whoami({})) as Report).identity.serviceId, 'svc-caller');
});

test('CLM-10 scopes match exactly: wildcards, case and near-misses never grant write', async () => {
  const fx = await createFixture();
  for (const scp of [['*'], ['svc-a.*'], ['SVC-A.WRITE'], ['svc-a.write '], ['svc-a.writ']]) {
    const token = await fx.forgeToken(fx.baselineClaims({ scp }));
    using session = fx.session('svc-a.echo', { token });
    await assertRefusal(session.write({}), {
      code: 'capability_auth',
      status: 403,
      retryable: false,
    }, JSON.stringify(scp));
  }
  assert.equal(fx.count('factories', 'svc-a.echo'), 0);
  assert.equal(fx.count('calls', 'svc-a.echo#write'), 0);
});

test('CLM-12 unknown claims are dropped: whoami echoes none, OAuth `scope` grants nothing', async () => {
  const fx = await createFixture();
  const token = await fx.forgeToken(fx.baselineClaims({
    admin: true,
    roles: ['root'],
    scope: 'svc-a.write',
    'x-tenant': 't1',
  }));
  using session = fx.session('svc-a.echo', { token });
  const report = (await session.whoami({})) as Report;
  assert.deepEqual(Object.keys(report.identity).sort(), [
    'audience',
    'callerAccess',
    'expiresAt',
    'issuer',
    'scopes',
    'serviceId',
    'tokenId',
  ]);
  const text = JSON.stringify(report);
  for (const unknown of ['admin', 'roles', 'root', 'scope"', 'x-tenant', 't1']) {
    assert.equal(text.includes(unknown), false, unknown);
  }
  const factoriesBefore = fx.count('factories', 'svc-a.echo');
  await assertRefusal(session.write({}), { code: 'capability_auth', status: 403 });
  assert.equal(fx.count('factories', 'svc-a.echo'), factoriesBefore);
});

test('CLM-14 spa absent reads as plane: whoami works, svc-a.internal is refused 403', async () => {
  const fx = await createFixture();
  const claims = fx.baselineClaims({ scp: ['svc-a.read', 'svc-a.internal'] });
  delete claims.spa;
  const token = await fx.forgeToken(claims);
  using echo = fx.session('svc-a.echo', { token });
  assert.equal(((await echo.whoami({})) as Report).identity.callerAccess, 'plane');
  using internal = fx.session('svc-a.internal', { token });
  await assertRefusal(internal.whoami({}), {
    code: 'capability_auth',
    status: 403,
    reason: 'access_class_mismatch',
  });
  assert.equal(fx.count('factories', 'svc-a.internal'), 0);
});

test('CLM-17 a delegated token with spk "service" stays plane-class everywhere', async () => {
  const fx = await createFixture();
  const issued = await fx.plane.issueCapabilityToken({
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read', 'svc-a.internal'],
    callerAccess: 'plane',
    subject: { id: 'carol', kind: 'service' },
  });
  using echo = fx.session('svc-a.echo', { token: issued.token });
  const report = (await echo.whoami({})) as Report;
  assert.equal(report.identity.callerAccess, 'plane');
  assert.deepEqual(report.identity.subject, { id: 'carol', kind: 'service' });
  assert.equal(report.identity.serviceId, 'svc-caller');
  using internal = fx.session('svc-a.internal', { token: issued.token });
  await assertRefusal(internal.whoami({}), {
    code: 'capability_auth',
    status: 403,
    reason: 'access_class_mismatch',
  });
  assert.equal(fx.count('factories', 'svc-a.internal'), 0);

  // Through the plane's own session the same principal is refused from the catalog.
  using planeSession = fx.plane.abilitySession<{ whoami(input: unknown): unknown }>({
    abilityId: 'svc-a.internal',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.internal'],
    caller: { id: 'carol', kind: 'user', principalKind: 'service' },
  });
  await assertRefusal(planeSession.whoami({}), { code: 'capability_auth', status: 403 });
  assert.equal(fx.count('factories', 'svc-a.internal'), 0);
});
