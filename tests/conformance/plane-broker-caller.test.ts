// Contract "Broker caller" mapping, through `plane.abilitySession` (the in-process stand-in for
// invocation middleware until the broker and REST front doors exist): `kind` decides the access
// class, `principalKind` only becomes `spk` / `subject.kind`.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SvcConfigurationError } from '../../src/core/errors.ts';
import type { BrokerCaller } from '../../src/plane/in-process-session.ts';
import {
  assertRefusal,
  createPlaneDeployment,
  decodeJws,
  PLANE_ID,
  type PlaneDeployment,
} from './plane-fixture.ts';

type Report = { identity: Record<string, unknown> };

function sessionFor(fx: PlaneDeployment, caller: BrokerCaller | undefined, abilityId: string) {
  const [targetServiceId] = abilityId.split('.');
  return fx.plane.abilitySession({
    abilityId,
    targetServiceId,
    scopes: [abilityId === 'svc-a.internal' ? 'svc-a.internal' : `${targetServiceId}.read`],
    ...(caller !== undefined ? { caller } : {}),
  });
}

test('Broker caller: kind user with principalKind and orgId becomes a delegated subject', async () => {
  const fx = await createPlaneDeployment();
  using session = sessionFor(
    fx,
    { id: 'alice', kind: 'user', orgId: 'org-1', principalKind: 'api_key' },
    'svc-a.echo',
  );
  const { identity } = await session.whoami({}) as Report;
  assert.equal(identity.callerAccess, 'plane');
  assert.equal(identity.serviceId, PLANE_ID);
  assert.deepEqual(identity.subject, { id: 'alice', kind: 'api_key', orgId: 'org-1' });
  const { claims } = decodeJws(fx.tokensAt('svc-a')[0]);
  assert.equal(claims.sub, 'alice');
  assert.deepEqual(claims.act, { sub: PLANE_ID });
  assert.equal(claims.spk, 'api_key');
  assert.equal(claims.spo, 'org-1');
  assert.equal(claims.spa, 'plane');
});

test('Broker caller: kind user without principalKind keeps the legacy user shape', async () => {
  const fx = await createPlaneDeployment();
  using session = sessionFor(fx, { id: 'bob', kind: 'user' }, 'svc-a.echo');
  const { identity } = await session.whoami({}) as Report;
  assert.equal(identity.callerAccess, 'plane');
  assert.deepEqual(identity.subject, { id: 'bob' });
  const { claims } = decodeJws(fx.tokensAt('svc-a')[0]);
  assert.equal('spk' in claims, false);
  assert.equal('spo' in claims, false);
});

test('Broker caller: kind service keeps its id, gets callerAccess service and no subject', async () => {
  const fx = await createPlaneDeployment();
  using session = sessionFor(fx, { id: 'svc-robot', kind: 'service' }, 'svc-a.internal');
  const { identity } = await session.whoami({}) as Report;
  assert.equal(identity.serviceId, 'svc-robot');
  assert.equal(identity.callerAccess, 'service');
  assert.equal('subject' in identity, false);
  const { claims } = decodeJws(fx.tokensAt('svc-a')[0]);
  assert.equal(claims.sub, 'svc-robot');
  assert.equal(claims.spa, 'service');
  for (const name of ['act', 'spk', 'spo']) assert.equal(name in claims, false, name);
});

test('Broker caller: a service caller carries no principalKind and no orgId', async () => {
  const fx = await createPlaneDeployment();
  assert.throws(
    () =>
      sessionFor(
        fx,
        { id: 'svc-robot', kind: 'service', principalKind: 'automation' },
        'svc-a.echo',
      ),
    SvcConfigurationError,
  );
  // orgId becomes spo, which only a delegated (user-class) token carries: refused, not dropped.
  assert.throws(
    () => sessionFor(fx, { id: 'svc-robot', kind: 'service', orgId: 'org-1' }, 'svc-a.echo'),
    (error: unknown) => error instanceof SvcConfigurationError && /no orgId/.test(error.message),
  );
});

test("Broker caller: principalKind 'service' beside kind 'user' stays plane-class", async () => {
  const fx = await createPlaneDeployment();
  const carol: BrokerCaller = { id: 'carol', kind: 'user', principalKind: 'service' };
  using echo = sessionFor(fx, carol, 'svc-a.echo');
  const { identity } = await echo.whoami({}) as Report;
  assert.equal(identity.callerAccess, 'plane');
  assert.deepEqual(identity.subject, { id: 'carol', kind: 'service' });
  using internal = sessionFor(fx, carol, 'svc-a.internal');
  await assertRefusal(internal.whoami({}), {
    code: 'capability_auth',
    status: 403,
    reason: 'access_class_mismatch',
  });
  assert.equal(fx.rpcRequests('svc-a').length, 1, 'only the echo call reached svc-a');
  assert.equal(fx.count('factories', 'svc-a.internal'), 0);
});

test('Broker caller: only kind service reaches access service abilities', async () => {
  const fx = await createPlaneDeployment();
  const plane: BrokerCaller[] = [
    { id: 'alice', kind: 'user', orgId: 'org-1', principalKind: 'api_key' },
    { id: 'bob', kind: 'user' },
    { id: 'svc-robot', kind: 'user' },
  ];
  for (const caller of plane) {
    using session = sessionFor(fx, caller, 'svc-a.internal');
    await assertRefusal(session.whoami({}), { status: 403, reason: 'access_class_mismatch' });
  }
  using noCaller = sessionFor(fx, undefined, 'svc-a.internal');
  await assertRefusal(noCaller.whoami({}), { status: 403, reason: 'access_class_mismatch' });
  using robot = sessionFor(fx, { id: 'svc-robot', kind: 'service' }, 'svc-a.internal');
  assert.equal(((await robot.whoami({})) as Report).identity.callerAccess, 'service');
});

test('Broker caller: principalKind is a non-empty string of at most 512 characters', async () => {
  const fx = await createPlaneDeployment();
  for (const principalKind of ['', 'p'.repeat(513), 7]) {
    assert.throws(
      () => sessionFor(fx, { id: 'u', kind: 'user', principalKind } as never, 'svc-a.echo'),
      SvcConfigurationError,
      JSON.stringify(principalKind),
    );
  }
  for (const kind of ['admin', undefined, 'USER']) {
    assert.throws(
      () => sessionFor(fx, { id: 'u', kind } as never, 'svc-a.echo'),
      SvcConfigurationError,
      `kind ${JSON.stringify(kind)}`,
    );
  }
  using session = sessionFor(
    fx,
    { id: 'u', kind: 'user', principalKind: 'p'.repeat(512) },
    'svc-a.echo',
  );
  const { identity } = await session.whoami({}) as Report;
  assert.deepEqual(identity.subject, { id: 'u', kind: 'p'.repeat(512) });
});
