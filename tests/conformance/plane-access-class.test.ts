// Contract "Access class enforcement" r1 and r3: `spa` is `service` exactly for callers the plane
// proved to be services and `plane` for everyone it fronts itself; a service declaring
// `access: 'service'` refuses every caller of tokens from a plane that does not state `spa`.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { BrokerCaller } from '../../src/plane/in-process-session.ts';
import {
  assertRefusal,
  createPlaneDeployment,
  decodeJws,
  forgedToken,
  hmacTokenRequest,
  jwkTokenRequest,
  tokenBody,
} from './plane-fixture.ts';

type Report = { identity: Record<string, unknown> };
const internal = {
  callerServiceId: 'svc-caller',
  targetServiceId: 'svc-a',
  scopes: ['svc-a.internal'],
};

test('Access class r1: spa is service for callers the plane proved to be services', async () => {
  const fx = await createPlaneDeployment();
  const hmac = await fx.send(await hmacTokenRequest(tokenBody({ scopes: ['svc-a.internal'] })));
  const jwk = await fx.send(
    await jwkTokenRequest(tokenBody({ callerServiceId: 'svc-jwk', scopes: ['svc-a.internal'] })),
  );
  const forCaller = await fx.plane.issueCapabilityTokenForCaller({
    caller: { clientId: 'hc1', serviceId: 'svc-caller' },
    targetServiceId: 'svc-a',
    scopes: ['svc-a.internal'],
  });
  for (const token of [hmac.body.token, jwk.body.token, forCaller.token]) {
    assert.equal(decodeJws(token).claims.spa, 'service');
  }
  using session = fx.plane.abilitySession({
    abilityId: 'svc-a.internal',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.internal'],
    caller: { id: 'svc-robot', kind: 'service' },
  });
  const { identity } = await session.whoami({}) as Report;
  assert.equal(identity.callerAccess, 'service');
  assert.equal(decodeJws(fx.tokensAt('svc-a')[0]).claims.spa, 'service');
});

test('Access class r1: spa is plane for every caller the plane fronts itself', async () => {
  const fx = await createPlaneDeployment();
  const fronted: (BrokerCaller | undefined)[] = [
    undefined,
    { id: 'alice', kind: 'user', principalKind: 'api_key' },
    { id: 'carol', kind: 'user', principalKind: 'service' },
  ];
  for (const caller of fronted) {
    using session = fx.plane.abilitySession({
      abilityId: 'svc-a.echo',
      targetServiceId: 'svc-a',
      scopes: ['svc-a.read'],
      ...(caller !== undefined ? { caller } : {}),
    });
    assert.equal(((await session.whoami({})) as Report).identity.callerAccess, 'plane');
  }
  assert.deepEqual(fx.tokensAt('svc-a').map((token) => decodeJws(token).claims.spa), [
    'plane',
    'plane',
    'plane',
  ]);
  const direct = await fx.plane.issueCapabilityToken({ ...internal, callerAccess: 'plane' });
  using refused = fx.session('svc-a.internal', { token: direct.token });
  await assertRefusal(refused.whoami({}), { status: 403, reason: 'access_class_mismatch' });
  assert.equal(fx.count('factories', 'svc-a.internal'), 0);
});

test('Access class r3: a service-only ability refuses every caller of a plane without spa', async () => {
  const fx = await createPlaneDeployment();
  // What an older plane minted: the same claims, without spa.
  const older = await forgedToken({ spa: undefined });
  using refused = fx.session('svc-a.internal', { token: older });
  await assertRefusal(refused.whoami({}), { status: 403, reason: 'access_class_mismatch' });
  using planeAbility = fx.session('svc-a.echo', { token: older });
  assert.equal(((await planeAbility.whoami({})) as Report).identity.callerAccess, 'plane');
  // After the plane upgrade the same caller is admitted.
  using upgraded = fx.session('svc-a.internal', { scopes: ['svc-a.internal'] });
  const { identity } = await upgraded.whoami({}) as Report;
  assert.equal(identity.callerAccess, 'service');
  assert.equal(identity.serviceId, 'svc-caller');
  assert.equal(fx.count('calls', 'svc-a.internal#whoami'), 1);
});
