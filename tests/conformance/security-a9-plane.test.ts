// Security checklist A9 (access class) at the plane, through `plane.abilitySession` as the
// in-process stand-in for the broker until the broker and REST front doors exist: the catalog
// decides a service-only ability before anything is minted or sent.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertRefusal, createPlaneDeployment, decodeJws } from './plane-fixture.ts';

type Report = { identity: Record<string, unknown> };

test('ACC-03 (in-process) a user caller is refused a service-only ability from the catalog', async () => {
  const fx = await createPlaneDeployment({ countSigningKeyLookups: true });
  using session = fx.plane.abilitySession({
    abilityId: 'svc-a.internal',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.internal'],
    caller: { id: 'bob', kind: 'user' },
  });
  await assertRefusal(session.whoami({}), {
    code: 'capability_auth',
    status: 403,
    retryable: false,
    reason: 'access_class_mismatch',
  });
  assert.equal(fx.counters.signingKeyLookups, 0, 'no token was minted');
  assert.equal(fx.rpcRequests('svc-a').length, 0, 'svc-a received no RPC request');
  assert.equal(fx.count('factories', 'svc-a.internal'), 0);
});

test('ACC-06 (in-process) a service caller reaches the service-only ability', async () => {
  const fx = await createPlaneDeployment();
  using session = fx.plane.abilitySession({
    abilityId: 'svc-a.internal',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.internal'],
    caller: { id: 'svc-robot', kind: 'service' },
  });
  const { identity } = await session.whoami({}) as Report;
  assert.equal(identity.callerAccess, 'service');
  assert.equal(identity.serviceId, 'svc-robot');
  assert.equal('subject' in identity, false);
  const [token] = fx.tokensAt('svc-a');
  const { claims } = decodeJws(token);
  assert.equal(claims.spa, 'service');
  assert.equal(claims.sub, 'svc-robot');
  for (const name of ['act', 'spk', 'spo']) assert.equal(name in claims, false, name);
  assert.equal(fx.count('calls', 'svc-a.internal#whoami'), 1);
});

test('ACC-05 REST: a user caller is refused a REST route of a service-only method with 403', async () => {
  const fx = await createPlaneDeployment({ countSigningKeyLookups: true });
  for (const bearer of ['t-bob', 't-alice', 't-usersvc']) {
    const response = await fx.rest('GET', '/internal/whoami', { bearer });
    assert.equal(response.status, 403, bearer);
    assert.equal(response.body.code, 'capability_auth');
    assert.equal(response.body.reason, 'access_class_mismatch');
    assert.equal(response.body.retryable, false);
  }
  assert.equal(fx.counters.signingKeyLookups, 0, 'no token was minted');
  assert.equal(fx.rpcRequests('svc-a').length, 0, 'svc-a received no RPC request');
  assert.equal(fx.count('factories', 'svc-a.internal'), 0);
});

test('ACC-06 (REST) t-robot reaches the service-only ability with a service-class token', async () => {
  const fx = await createPlaneDeployment();
  const response = await fx.rest('GET', '/internal/whoami', { bearer: 't-robot' });
  assert.equal(response.status, 200);
  const { identity } = response.body as Report;
  assert.equal(identity.callerAccess, 'service');
  assert.equal(identity.serviceId, 'svc-robot');
  assert.equal('subject' in identity, false);
  const [token] = fx.tokensAt('svc-a');
  const { claims } = decodeJws(token);
  assert.equal(claims.spa, 'service');
  assert.equal(claims.sub, 'svc-robot');
  for (const name of ['act', 'spk', 'spo']) assert.equal(name in claims, false, name);
  assert.equal(fx.count('calls', 'svc-a.internal#whoami'), 1);
});
