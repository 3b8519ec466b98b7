// Contract "Delegation" r1-r4: only control-plane code asserts a subject; direct mints need
// callerAccess and are not brokered (the session picks the brokered path by itself); a subject
// never replaces scope or grant checks; token cache keys carry the whole subject.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CapabilityAuthError, SvcConfigurationError } from '../../src/core/errors.ts';
import type { DelegatedSubject } from '../../src/core/identity.ts';
import {
  capabilityTokenCacheKey,
  createCapabilityTokenCache,
} from '../../src/caller/token-request-cache.ts';
import { controlPlaneRpcTokenRequester } from '../../src/caller/token-requesters.ts';
import {
  assertRefusal,
  createPlaneDeployment,
  decodeJws,
  hmacTokenRequest,
  jwkTokenRequest,
  PLANE_ID,
  tokenBody,
} from './plane-fixture.ts';

type Report = { identity: Record<string, unknown> };

const toSvcA = {
  callerServiceId: PLANE_ID,
  targetServiceId: 'svc-a',
  scopes: ['svc-a.read'],
  callerAccess: 'plane' as const,
};

test('Delegation r1: plane code asserts subjects (session and direct mint)', async () => {
  const fx = await createPlaneDeployment();
  using session = fx.plane.abilitySession({
    targetServiceId: toSvcA.targetServiceId,
    scopes: toSvcA.scopes,
    abilityId: 'svc-a.echo',
    caller: { id: 'alice', kind: 'user', orgId: 'org-1' },
  });
  const viaSession = await session.whoami({}) as Report;
  assert.deepEqual(viaSession.identity.subject, { id: 'alice', orgId: 'org-1' });
  const issued = await fx.plane.issueCapabilityToken({ ...toSvcA, subject: { id: 'dave' } });
  using direct = fx.session('svc-a.echo', { token: issued.token });
  assert.deepEqual(((await direct.whoami({})) as Report).identity.subject, { id: 'dave' });
});

test('Delegation r1: the token endpoint and issueCapabilityTokenForCaller refuse subjects', async () => {
  const fx = await createPlaneDeployment({ countSigningKeyLookups: true });
  const hmac = await fx.send(await hmacTokenRequest(tokenBody({ subject: { id: 'victim' } })));
  const jwk = await fx.send(
    await jwkTokenRequest(tokenBody({ callerServiceId: 'svc-jwk', subject: { id: 'victim' } })),
  );
  for (const response of [hmac, jwk]) {
    assert.equal(response.status, 403);
    assert.equal(response.body.reason, 'subject_not_allowed');
  }
  await assert.rejects(
    fx.plane.issueCapabilityTokenForCaller({
      caller: { clientId: 'hc1', serviceId: 'svc-caller' },
      targetServiceId: 'svc-a',
      scopes: ['svc-a.read'],
      subject: { id: 'victim' },
    } as never),
    (error: unknown) =>
      error instanceof CapabilityAuthError && error.status === 403 &&
      error.reason === 'subject_not_allowed',
  );
  assert.equal(fx.counters.signingKeyLookups, 0);
});

test('Delegation r1: the three shipped requesters refuse a subject locally', async () => {
  const fx = await createPlaneDeployment();
  let bindingCalls = 0;
  const rpc = controlPlaneRpcTokenRequester({
    binding: {
      requestCapabilityToken() {
        bindingCalls++;
        return Promise.resolve('unused');
      },
    },
    callerServiceId: 'svc-caller',
  });

  for (const requester of [fx.hmacRequester(), fx.jwkRequester(), rpc]) {
    await assertRefusal(
      requester({
        callerServiceId: 'svc-caller',
        targetServiceId: 'svc-a',
        abilityId: 'svc-a.echo',
        scopes: ['svc-a.read'],
        subject: { id: 'victim' },
      } as never),
      { code: 'capability_auth', status: 403, reason: 'subject_not_allowed' },
    );
  }
  assert.equal(bindingCalls, 0);
  assert.equal(fx.counters.requesterFetches, 0, 'the plane saw no token request');
});

test('Delegation r2: direct mints need callerAccess and are never brokered', async () => {
  const fx = await createPlaneDeployment();
  const { callerAccess: _omitted, ...withoutAccess } = toSvcA;
  await assert.rejects(
    fx.plane.issueCapabilityToken(withoutAccess as never),
    (error: unknown) =>
      error instanceof SvcConfigurationError && /callerAccess/.test(error.message),
  );
  const toSvcB = { ...toSvcA, targetServiceId: 'svc-b', scopes: ['svc-b.read'] };
  const direct = await fx.plane.issueCapabilityToken({ ...toSvcB, subject: { id: 'alice' } });
  assert.equal('spb' in decodeJws(direct.token).claims, false);
  using refused = fx.session('svc-b.echo', { token: direct.token });
  await assertRefusal(refused.whoami({}), {
    code: 'capability_auth',
    status: 403,
    reason: 'ingress_required',
  });
  assert.equal(fx.count('factories', 'svc-b.echo'), 0);
  const brokered = await fx.plane.issueBrokeredCapabilityToken({
    ...toSvcB,
    subject: { id: 'alice' },
  });
  using accepted = fx.session('svc-b.echo', { token: brokered.token });
  assert.equal(((await accepted.whoami({})) as Report).identity.brokerServiceId, PLANE_ID);
  using session = fx.plane.abilitySession({
    targetServiceId: toSvcB.targetServiceId,
    scopes: toSvcB.scopes,
    abilityId: 'svc-b.echo',
    caller: { id: 'alice', kind: 'user' },
  });
  assert.equal(((await session.whoami({})) as Report).identity.brokerServiceId, PLANE_ID);
});

test('Delegation r2: the brokered direct mint needs callerAccess too, and no subject with service access', async () => {
  const fx = await createPlaneDeployment({ countSigningKeyLookups: true });
  const toSvcB = { callerServiceId: PLANE_ID, targetServiceId: 'svc-b', scopes: ['svc-b.read'] };
  const before = fx.counters.signingKeyLookups;
  const refusedFor = (pattern: RegExp) => (error: unknown) =>
    error instanceof SvcConfigurationError && pattern.test(error.message);
  for (const callerAccess of [undefined, 'admin', 'SERVICE']) {
    await assert.rejects(
      fx.plane.issueBrokeredCapabilityToken({ ...toSvcB, callerAccess } as never),
      refusedFor(/callerAccess/),
      `brokered, ${callerAccess}`,
    );
    await assert.rejects(
      fx.plane.issueCapabilityToken({ ...toSvcB, callerAccess } as never),
      refusedFor(/callerAccess/),
      `direct, ${callerAccess}`,
    );
  }
  await assert.rejects(
    fx.plane.issueBrokeredCapabilityToken({
      ...toSvcB,
      callerAccess: 'service',
      subject: { id: 'alice' },
    }),
    refusedFor(/subject/),
  );
  assert.equal(fx.counters.signingKeyLookups, before, 'nothing was signed');
});

test('Delegation r3: a subject does not replace scope or grant checks', async () => {
  const fx = await createPlaneDeployment();
  const alice = { id: 'alice', kind: 'user' as const, principalKind: 'api_key' };
  await assertRefusal(
    fx.plane.issueCapabilityToken({
      ...toSvcA,
      callerServiceId: 'svc-stranger',
      subject: { id: 'alice', kind: 'api_key' },
    }),
    { status: 403, reason: 'grant_denied' },
  );
  await assertRefusal(
    fx.plane.issueCapabilityToken({ ...toSvcA, scopes: ['svc-a.nope'], subject: { id: 'alice' } }),
    { status: 403, reason: 'unknown_scope' },
  );
  using readOnly = fx.plane.abilitySession({
    abilityId: 'svc-a.echo',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    caller: alice,
  });
  await assertRefusal(readOnly.write({}), { code: 'capability_auth', status: 403 });
  assert.equal(fx.count('calls', 'svc-a.echo#write'), 0);
});

test('Delegation r4: token cache keys carry the complete subject, not the access class', async () => {
  const request = {
    callerServiceId: PLANE_ID,
    targetServiceId: 'svc-a',
    abilityId: 'svc-a.echo',
    scopes: ['svc-a.write', 'svc-a.read', 'svc-a.read'],
  };
  const key = (subject?: DelegatedSubject, extra: Record<string, unknown> = {}) =>
    capabilityTokenCacheKey({ ...request, ...extra, ...(subject ? { subject } : {}) });
  const subjects: (DelegatedSubject | undefined)[] = [
    undefined,
    { id: 'alice' },
    { id: 'alice', kind: 'api_key' },
    { id: 'alice', kind: 'automation' },
    { id: 'alice', kind: 'api_key', orgId: 'org-1' },
    { id: 'alice', kind: 'api_key', orgId: 'org-2' },
    { id: 'bob', kind: 'api_key', orgId: 'org-1' },
  ];
  assert.equal(new Set(subjects.map((subject) => key(subject))).size, subjects.length);
  assert.equal(
    key({ id: 'alice', kind: 'api_key' }),
    key({ id: 'alice', kind: 'api_key' }, { scopes: ['svc-a.read', 'svc-a.write'] }),
  );
  assert.notEqual(key(), key(undefined, { ttlSeconds: 60 }));
  assert.notEqual(key(), key(undefined, { abilityId: 'svc-a.other' }));
  assert.equal(key(), key(undefined, { callerAccess: 'service' }), 'access class is not keyed');
});

test('Delegation r4: an in-process requester never hands one subject a token of another', async () => {
  const fx = await createPlaneDeployment();
  const cache = createCapabilityTokenCache();
  let minted = 0;
  // An application's in-process requester for delegated calls, keyed the contract's way.
  const tokenFor = (subject: DelegatedSubject) => {
    const request = { ...toSvcA, abilityId: 'svc-a.echo', subject };
    return cache.get(capabilityTokenCacheKey(request), async () => {
      minted++;
      const issued = await fx.plane.issueCapabilityToken(request);
      return { token: issued.token, lifetimeMs: 120_000 };
    });
  };
  const apiKey = await tokenFor({ id: 'alice', kind: 'api_key' });
  const automation = await tokenFor({ id: 'alice', kind: 'automation' });
  const again = await tokenFor({ id: 'alice', kind: 'api_key' });
  assert.equal(minted, 2);
  assert.equal(again, apiKey);
  assert.equal(decodeJws(apiKey).claims.spk, 'api_key');
  assert.equal(decodeJws(automation).claims.spk, 'automation');
});
