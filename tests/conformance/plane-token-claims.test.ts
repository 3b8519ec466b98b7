// Contract "Capability token claims", rules 1-5, on tokens as the real plane mints them and as
// the real services read them: plain and delegated shapes, spa, spk and the closed claim set.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CAPABILITY_TOKEN_TYP } from '../../src/core/capability-token.ts';
import { SvcConfigurationError } from '../../src/core/errors.ts';
import {
  assertRefusal,
  createPlaneDeployment,
  decodeJws,
  forgedToken,
  hmacTokenRequest,
  ISS,
  PLANE_ID,
  tokenBody,
} from './plane-fixture.ts';

const CLOSED_CLAIMS = new Set([
  'iss',
  'sub',
  'act',
  'aud',
  'scp',
  'spa',
  'spb',
  'spk',
  'spo',
  'cnf',
  'jti',
  'exp',
  'iat',
  'nbf',
]);

type Report = { identity: Record<string, unknown> };

const forged = (claims: Record<string, unknown>) => forgedToken(claims);

const planeIssue = (scopes = ['svc-a.read']) => ({
  callerServiceId: PLANE_ID,
  targetServiceId: 'svc-a',
  scopes,
  callerAccess: 'plane' as const,
});

test('Capability token claims: ES256 with kid and typ; only the closed claim set is minted', async () => {
  const fx = await createPlaneDeployment();
  const first = await fx.send(await hmacTokenRequest(tokenBody()));
  const second = await fx.send(await hmacTokenRequest(tokenBody()));
  const { header, claims } = decodeJws(first.body.token);
  assert.deepEqual(header, { alg: 'ES256', kid: 'k1', typ: CAPABILITY_TOKEN_TYP });
  for (const name of Object.keys(claims)) assert.ok(CLOSED_CLAIMS.has(name), name);
  assert.equal(claims.iss, ISS);
  assert.equal(claims.aud, 'svc-a');
  assert.deepEqual(claims.scp, ['svc-a.read']);
  assert.match(String(claims.jti), /^[0-9a-f-]{36}$/);
  assert.notEqual(claims.jti, decodeJws(second.body.token).claims.jti);
  assert.equal(claims.nbf, claims.iat);
  assert.equal((claims.exp as number) - (claims.iat as number), 120);
  // HMAC callers get no key binding; a direct (non-brokered) request carries no spb.
  assert.equal('cnf' in claims, false);
  assert.equal('spb' in claims, false);
});

test('Claims r1: a plain token has sub = the calling service and no act, spk or spo', async () => {
  const fx = await createPlaneDeployment();
  const endpoint = decodeJws((await fx.send(await hmacTokenRequest(tokenBody()))).body.token);
  const direct = decodeJws((await fx.plane.issueCapabilityToken(planeIssue())).token);
  assert.equal(endpoint.claims.sub, 'svc-caller');
  assert.equal(direct.claims.sub, PLANE_ID);
  for (const { claims } of [endpoint, direct]) {
    for (const name of ['act', 'spk', 'spo']) assert.equal(name in claims, false, name);
  }
  using session = fx.session('svc-a.echo');
  const report = await session.whoami({}) as Report;
  assert.equal(report.identity.serviceId, 'svc-caller');
  assert.equal('subject' in report.identity, false);
});

test('Claims r1: spk or spo on a plain token is rejected at verification', async () => {
  const fx = await createPlaneDeployment();
  for (const extra of [{ spk: 'api_key' }, { spo: 'org-1' }]) {
    using session = fx.session('svc-a.echo', { token: await forged(extra) });
    await assertRefusal(session.whoami({}), {
      code: 'capability_auth',
      status: 401,
      reason: 'invalid_claims',
    });
  }
  assert.equal(fx.count('factories', 'svc-a.echo'), 0);
});

test('Claims r2: a delegated token carries act and spa plane; subject with spa service is refused', async () => {
  const fx = await createPlaneDeployment({ countSigningKeyLookups: true });
  const issued = await fx.plane.issueCapabilityToken({
    ...planeIssue(),
    subject: { id: 'user-7', kind: 'api_key', orgId: 'org-1' },
  });
  const { claims } = decodeJws(issued.token);
  assert.deepEqual(claims.act, { sub: PLANE_ID });
  assert.equal(claims.sub, 'user-7');
  assert.equal(claims.spa, 'plane');
  assert.equal(claims.spk, 'api_key');
  assert.equal(claims.spo, 'org-1');
  const mintsBefore = fx.counters.signingKeyLookups;
  await assert.rejects(
    fx.plane.issueCapabilityToken({
      ...planeIssue(),
      callerAccess: 'service',
      subject: { id: 'user-7' },
    }),
    (error: unknown) => error instanceof SvcConfigurationError && /subject/.test(error.message),
  );
  assert.equal(fx.counters.signingKeyLookups, mintsBefore, 'nothing was signed');
  using session = fx.session('svc-a.echo', { token: issued.token });
  const report = await session.whoami({}) as Report;
  assert.equal(report.identity.serviceId, PLANE_ID);
  assert.equal(report.identity.callerAccess, 'plane');
  assert.deepEqual(report.identity.subject, { id: 'user-7', kind: 'api_key', orgId: 'org-1' });
});

test('Claims r3: every minted token states spa; a token without spa reads as plane', async () => {
  const fx = await createPlaneDeployment();
  const service = decodeJws((await fx.send(await hmacTokenRequest(tokenBody()))).body.token);
  const plane = decodeJws((await fx.plane.issueCapabilityToken(planeIssue())).token);
  assert.equal(service.claims.spa, 'service');
  assert.equal(plane.claims.spa, 'plane');
  const legacy = await forged({ spa: undefined });
  using echo = fx.session('svc-a.echo', { token: legacy });
  const report = await echo.whoami({}) as Report;
  assert.equal(report.identity.callerAccess, 'plane');
  using internal = fx.session('svc-a.internal', { token: legacy });
  await assertRefusal(internal.whoami({}), {
    code: 'capability_auth',
    status: 403,
    reason: 'access_class_mismatch',
  });
  assert.equal(fx.count('factories', 'svc-a.internal'), 0);
});

test('Claims r4: spk is a non-empty string of at most 512 characters; malformed is refused', async () => {
  const fx = await createPlaneDeployment();
  for (const kind of ['', 'x'.repeat(513), '🔑'.repeat(513), 5, {}]) {
    await assert.rejects(
      fx.plane.issueCapabilityToken({ ...planeIssue(), subject: { id: 'u', kind } as never }),
      SvcConfigurationError,
      `kind ${JSON.stringify(kind)}`,
    );
  }
  // Characters are code points, counted alike by the plane and the verifier: 512 emoji (1 024
  // UTF-16 units) are 512 characters.
  for (const longest of ['k'.repeat(512), '🔑'.repeat(512), 'é'.repeat(300) + '🔑'.repeat(212)]) {
    const issued = await fx.plane.issueCapabilityToken({
      ...planeIssue(),
      subject: { id: 'u', kind: longest },
    });
    using accepted = fx.session('svc-a.echo', { token: issued.token });
    const report = await accepted.whoami({}) as Report;
    assert.deepEqual(report.identity.subject, { id: 'u', kind: longest });
  }
  for (const principalKind of ['🔑'.repeat(512), '🔑'.repeat(513)]) {
    const open = () =>
      fx.plane.abilitySession({
        abilityId: 'svc-a.echo',
        targetServiceId: 'svc-a',
        scopes: ['svc-a.read'],
        caller: { id: 'u', kind: 'user', principalKind },
      });
    if ([...principalKind].length > 512) {
      assert.throws(open, SvcConfigurationError);
      continue;
    }
    using session = open();
    const report = await session.whoami({}) as Report;
    assert.deepEqual(report.identity.subject, { id: 'u', kind: principalKind });
  }
  // A malformed spk that reaches a service is rejected there, not dropped.
  const delegated = { sub: 'u', act: { sub: PLANE_ID }, spa: 'plane', scp: ['svc-a.read'] };
  for (const spk of ['', 'x'.repeat(513), '🔑'.repeat(513), 5]) {
    using session = fx.session('svc-a.echo', { token: await forged({ ...delegated, spk }) });
    await assertRefusal(session.whoami({}), { status: 401, reason: 'invalid_claims' });
  }
});

test('Claims r4: an absent kind keeps the legacy user-subject shape', async () => {
  const fx = await createPlaneDeployment();
  const issued = await fx.plane.issueCapabilityToken({ ...planeIssue(), subject: { id: 'bob' } });
  assert.equal('spk' in decodeJws(issued.token).claims, false);
  using session = fx.session('svc-a.echo', { token: issued.token });
  const report = await session.whoami({}) as Report;
  assert.deepEqual(report.identity.subject, { id: 'bob' });
});

test('Claims r4: spk never influences spa or service access', async () => {
  const fx = await createPlaneDeployment();
  const issued = await fx.plane.issueCapabilityToken({
    ...planeIssue(['svc-a.internal']),
    subject: { id: 'carol', kind: 'service' },
  });
  assert.equal(decodeJws(issued.token).claims.spa, 'plane');
  using direct = fx.session('svc-a.internal', { token: issued.token });
  await assertRefusal(direct.whoami({}), { status: 403, reason: 'access_class_mismatch' });
  using viaPlane = fx.plane.abilitySession({
    abilityId: 'svc-a.internal',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.internal'],
    caller: { id: 'carol', kind: 'user', principalKind: 'service' },
  });
  await assertRefusal(viaPlane.whoami({}), { status: 403, reason: 'access_class_mismatch' });
  assert.equal(fx.count('factories', 'svc-a.internal'), 0);
});

test('Claims r5: the token endpoint is not an OAuth token-exchange endpoint', async () => {
  const fx = await createPlaneDeployment();
  const exchange = new URLSearchParams({
    grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
    subject_token: 'anything',
    subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
    audience: 'svc-a',
    scope: 'svc-a.read',
  }).toString();
  const form = await fx.send(await hmacTokenRequest(exchange));
  assert.equal(form.status, 400);
  assert.equal(form.body.access_token, undefined);
  const jsonExchange = await fx.send(
    await hmacTokenRequest({
      grant_type: 'token-exchange',
      audience: 'svc-a',
      scope: 'svc-a.read',
    }),
  );
  assert.equal(jsonExchange.status, 400);
  const issued = await fx.send(await hmacTokenRequest(tokenBody()));
  assert.equal(issued.body.tokenType, 'svc-capability');
  for (const oauth of ['access_token', 'token_type', 'issued_token_type', 'expires_in']) {
    assert.equal(oauth in issued.body, false, oauth);
  }
  const { claims } = decodeJws(issued.body.token);
  assert.deepEqual(claims.scp, ['svc-a.read']);
  assert.equal('scope' in claims, false, 'scp, not the OAuth scope claim');
});
