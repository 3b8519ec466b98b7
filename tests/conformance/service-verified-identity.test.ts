// Contract: Verified identity. What a handler learns about its caller, field by field, for plain,
// delegated, brokered and key-bound tokens.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { calculateJwkThumbprint } from 'jose';
import { assertRefusal, createFixture, ISS, PLANE_ID } from './fixture.ts';

interface Report {
  identity: Record<string, unknown>;
  connInfo: unknown;
}

const IDENTITY_FIELDS = [
  'audience',
  'brokerServiceId',
  'callerAccess',
  'confirmation',
  'expiresAt',
  'issuer',
  'scopes',
  'serviceId',
  'subject',
  'tokenId',
];

test('Verified identity: a plain token maps sub, aud, scp, jti, iss, exp and spa', async () => {
  const fx = await createFixture();
  const claims = fx.baselineClaims({ scp: ['svc-a.read', 'svc-a.write'] });
  using session = fx.session('svc-a.echo', { token: await fx.forgeToken(claims) });
  const { identity } = (await session.whoami({})) as Report;
  assert.deepEqual(identity, {
    serviceId: 'svc-caller',
    audience: 'svc-a',
    scopes: ['svc-a.read', 'svc-a.write'],
    tokenId: claims.jti,
    issuer: ISS,
    expiresAt: new Date((claims.exp as number) * 1000).toISOString(),
    callerAccess: 'service',
  });
});

test('Verified identity: serviceId is the acting service and subject the delegated principal', async () => {
  const fx = await createFixture();
  const issued = await fx.plane.issueCapabilityToken({
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    callerAccess: 'plane',
    subject: { id: 'user-7', kind: 'api_key', orgId: 'org-1' },
  });
  using session = fx.session('svc-a.echo', { token: issued.token });
  const { identity } = (await session.whoami({})) as Report;
  assert.equal(issued.claims.sub, 'user-7');
  assert.equal(identity.serviceId, 'svc-caller');
  assert.deepEqual(identity.subject, { id: 'user-7', kind: 'api_key', orgId: 'org-1' });
  assert.equal(identity.callerAccess, 'plane');
  assert.equal(identity.tokenId, issued.claims.jti);
});

test('Verified identity: subject appears only on delegated tokens, always with callerAccess plane', async () => {
  const fx = await createFixture();
  for (const callerAccess of ['service', 'plane'] as const) {
    const issued = await fx.plane.issueCapabilityToken({
      callerServiceId: 'svc-caller',
      targetServiceId: 'svc-a',
      scopes: ['svc-a.read'],
      callerAccess,
    });
    using session = fx.session('svc-a.echo', { token: issued.token });
    const { identity } = (await session.whoami({})) as Report;
    assert.equal(identity.callerAccess, callerAccess);
    assert.equal('subject' in identity, false, callerAccess);
  }
  // The issuer never mints a subject beside the service class.
  await assert.rejects(fx.plane.issueCapabilityToken({
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    callerAccess: 'service',
    subject: { id: 'user-7' },
  }));
  // A subject that arrives anyway (a forged service-class delegated token) is refused.
  const forged = await fx.forgeToken(fx.baselineClaims({ sub: 'user-7', act: { sub: 'svc-x' } }));
  using session = fx.session('svc-a.echo', { token: forged });
  await assertRefusal(session.whoami({}), { code: 'capability_auth', status: 401 });
});

test('Verified identity: brokerServiceId is present on brokered tokens only', async () => {
  const fx = await createFixture();
  const request = {
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    callerAccess: 'service' as const,
  };
  const brokered = await fx.plane.issueBrokeredCapabilityToken(request);
  using viaBroker = fx.session('svc-a.echo', { token: brokered.token });
  assert.equal(((await viaBroker.whoami({})) as Report).identity.brokerServiceId, PLANE_ID);
  const plain = await fx.plane.issueCapabilityToken(request);
  using direct = fx.session('svc-a.echo', { token: plain.token });
  assert.equal('brokerServiceId' in ((await direct.whoami({})) as Report).identity, false);
});

test('Verified identity: confirmation is set only after a verified proof of possession', async () => {
  const fx = await createFixture();
  using bound = fx.session('svc-a.echo', {
    requester: fx.requesters.jc1(),
    callerServiceId: 'svc-jwk',
  });
  const { identity } = (await bound.whoami({})) as Report;
  assert.deepEqual(identity.confirmation, {
    jkt: await calculateJwkThumbprint(fx.keys.K1.publicJwk as never, 'sha256'),
  });
  assert.equal(identity.serviceId, 'svc-jwk');
  using bearer = fx.session('svc-a.echo');
  assert.equal('confirmation' in ((await bearer.whoami({})) as Report).identity, false);
  // The same kind of bound token without its proof never produces an identity.
  const token = await fx.requesters.jc1()({
    callerServiceId: 'svc-jwk',
    targetServiceId: 'svc-a',
    abilityId: 'svc-a.echo',
    scopes: ['svc-a.read'],
  });
  using unproven = fx.session('svc-a.echo', {
    token,
    proveTokenPossession: () => Promise.resolve(''),
  });
  await assertRefusal(unproven.whoami({}), { code: 'capability_auth', status: 401 });
});

test('Verified identity: stays small, with no connection context in it', async () => {
  const fx = await createFixture();
  using session = fx.plane.abilitySession<{ whoami(input: unknown): Report }>({
    abilityId: 'svc-b.echo',
    targetServiceId: 'svc-b',
    scopes: ['svc-b.read'],
    caller: { id: 'alice', kind: 'user', orgId: 'org-1' },
    connInfo: { remote: { address: '192.0.2.1', port: 443 } },
    idempotencyKey: 'k-1',
    requestId: 'req-identity',
  });
  const report = await session.whoami({});
  assert.deepEqual(report.connInfo, { remote: { address: '192.0.2.1', port: 443 } });
  for (const key of Object.keys(report.identity)) {
    assert.ok(IDENTITY_FIELDS.includes(key), `unexpected identity field ${key}`);
  }
  assert.equal(JSON.stringify(report.identity).includes('192.0.2.1'), false);
});
