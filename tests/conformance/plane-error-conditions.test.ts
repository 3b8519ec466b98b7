// Contract "Other error conditions": the rows that belong to the plane's signing keys, issuance,
// delegation, access class, ingress, budgets and rotation, one test per row, end to end.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SvcConfigurationError } from '../../src/core/errors.ts';
import { createControlPlane } from '../../src/plane/control-plane.ts';
import {
  assertRefusal,
  createPlaneDeployment,
  forgedToken,
  hmacTokenRequest,
  PLANE_ID,
  planeKeys,
  sleep,
  tokenBody,
} from './plane-fixture.ts';

test('Other error conditions: two signing keys with the same kid refuse the configuration', async () => {
  const keys = await planeKeys();
  assert.throws(
    () =>
      createControlPlane({
        signingKeys: [
          { kid: 'k1', secret: keys.k1.privateJwk },
          { kid: 'k1', secret: { ...keys.k2.privateJwk, kid: 'k1' } },
        ],
        services: [],
      }),
    /Duplicate capability signing key id/,
  );
});

test('Other error conditions: unknown service, scope or grant at issuance is refused specifically', async () => {
  const fx = await createPlaneDeployment();
  const refusals: [Record<string, unknown>, 'hc1' | 'hc2', string, RegExp][] = [
    [tokenBody({ targetServiceId: 'svc-zz' }), 'hc1', 'unknown_target', /svc-zz/],
    [tokenBody({ scopes: ['svc-a.nope'] }), 'hc1', 'unknown_scope', /svc-a\.nope.*svc-a/],
    [tokenBody({ callerServiceId: 'svc-other' }), 'hc2', 'grant_denied', /svc-a\.read/],
  ];
  for (const [body, clientId, reason, detail] of refusals) {
    const response = await fx.send(await hmacTokenRequest(body, { clientId }));
    assert.equal(response.status, 403, reason);
    assert.equal(response.body.reason, reason);
    assert.match(response.body.detail, detail);
  }
});

test('Other error conditions: an empty scope list is refused on every issuing path, granted or not', async () => {
  // With no scope to check, the grant check would pass for a caller granted nothing.
  const fx = await createPlaneDeployment();
  const mints = [
    () =>
      fx.plane.issueCapabilityTokenForCaller({
        caller: { clientId: 'hc2', serviceId: 'svc-other' },
        targetServiceId: 'svc-a',
        scopes: [],
      }),
    () =>
      fx.plane.issueCapabilityToken({
        callerServiceId: 'svc-other',
        targetServiceId: 'svc-a',
        scopes: [],
        callerAccess: 'service',
      }),
    () =>
      fx.plane.issueCapabilityToken({
        callerServiceId: 'svc-caller',
        targetServiceId: 'svc-a',
        scopes: [],
        callerAccess: 'plane',
      }),
  ];
  for (const mint of mints) {
    await assertRefusal(mint(), {
      code: 'capability_auth',
      status: 403,
      reason: 'scopes_required',
    });
  }
  // The in-process session could never make a call, so it is refused when it is opened.
  assert.throws(
    () =>
      fx.plane.abilitySession({
        abilityId: 'svc-a.echo',
        targetServiceId: 'svc-a',
        scopes: [],
        caller: { id: 'svc-other', kind: 'service' },
      }),
    (error: unknown) =>
      error instanceof SvcConfigurationError && error.reason === 'scopes_required',
  );
  assert.equal(fx.count('factories', 'svc-a.echo'), 0);
  // The token endpoint refuses the same request as malformed.
  const response = await fx.send(await hmacTokenRequest(tokenBody({ scopes: [] })));
  assert.equal(response.status, 400);
  assert.equal(response.body.token, undefined);
});

test('Other error conditions: an unreachable grant target at issuance is a 500', async () => {
  const fx = await createPlaneDeployment();
  fx.stop('svc-d');
  const response = await fx.send(
    await hmacTokenRequest(tokenBody({ targetServiceId: 'svc-d', scopes: ['svc-d.read'] })),
  );
  assert.equal(response.status, 500);
  assert.equal(response.body.code, 'internal');
  assert.equal(response.body.token, undefined);
});

test('Other error conditions: a caller-supplied subject is a 403', async () => {
  const fx = await createPlaneDeployment();
  const endpoint = await fx.send(await hmacTokenRequest(tokenBody({ subject: { id: 'x' } })));
  assert.equal(endpoint.status, 403);
  await assertRefusal(
    fx.plane.issueCapabilityTokenForCaller({
      caller: { clientId: 'hc1', serviceId: 'svc-caller' },
      targetServiceId: 'svc-a',
      scopes: ['svc-a.read'],
      subject: { id: 'x' },
    } as never),
    { code: 'capability_auth', status: 403 },
  );
});

test('Other error conditions: a service-only ability refuses a non-service caller before the handler', async () => {
  const fx = await createPlaneDeployment();
  using fromCatalog = fx.plane.abilitySession({
    abilityId: 'svc-a.internal',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.internal'],
    caller: { id: 'bob', kind: 'user' },
  });
  await assertRefusal(fromCatalog.whoami({}), { status: 403, reason: 'access_class_mismatch' });
  assert.equal(fx.rpcRequests('svc-a').length, 0, 'decided from the catalog');
  using fromDefinition = fx.session('svc-a.internal', {
    token: await forgedToken({ spa: 'plane' }),
  });
  await assertRefusal(fromDefinition.whoami({}), { status: 403, reason: 'access_class_mismatch' });
  assert.equal(fx.count('factories', 'svc-a.internal'), 0);
});

test('Other error conditions: a non-brokered token at an ingress service is refused before the handler', async () => {
  const fx = await createPlaneDeployment();
  const plain = await fx.plane.issueCapabilityToken({
    callerServiceId: PLANE_ID,
    targetServiceId: 'svc-b',
    scopes: ['svc-b.read'],
    callerAccess: 'plane',
  });
  using session = fx.session('svc-b.echo', { token: plain.token });
  await assertRefusal(session.whoami({}), { code: 'capability_auth', reason: 'ingress_required' });
  assert.equal(fx.count('factories', 'svc-b.echo'), 0);
});

test('Other error conditions: an exhausted budget at the plane fails before a service session opens', async () => {
  const fx = await createPlaneDeployment();
  fx.slowDiscovery('svc-a', 200);
  using session = fx.plane.abilitySession({
    abilityId: 'svc-a.echo',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    timeoutMs: 100,
  });
  await assertRefusal(session.whoami({}), { code: 'timeout', status: 504, retryable: true });
  await sleep(300);
  assert.equal(fx.rpcRequests('svc-a').length, 0);
});

test('Other error conditions: invalid plane timeout policy values are refused at construction', async () => {
  const fx = await createPlaneDeployment();
  for (const timeout of [{ maxMs: 0 }, { defaultMs: -5 }, { maxMs: 1.5 }, { defaultMs: 0 }]) {
    assert.throws(
      () => fx.replica(['k1'], { timeout }),
      SvcConfigurationError,
      JSON.stringify(timeout),
    );
  }
});

test('Other error conditions: a token whose kid the service does not know is unknown-capability-key-id', async () => {
  const fx = await createPlaneDeployment();
  const keys = await planeKeys();
  using session = fx.session('svc-a.echo', { token: await forgedToken({}, { key: keys.k3 }) });
  await assertRefusal(session.whoami({}), {
    code: 'capability_auth',
    status: 401,
    reason: 'unknown_capability_key_id',
  });
});
