// Security checklist A3 (claims: types and values), at the verifier level. Every token here is
// correctly signed by k1, so each refusal comes from the claim under test.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  baselineClaims,
  claimsWithout,
  nowSeconds,
  PLANE_ID,
  signedToken,
  TEST_ISSUER,
} from '../support/forge.ts';
import { assertRefused, tokenFixture } from '../support/token-fixture.ts';

async function k1Token(payload: unknown): Promise<string> {
  const { keys } = await tokenFixture();
  return signedToken(keys.k1.privateKey, payload);
}

function delegatedClaims(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return baselineClaims({
    sub: 'user-7',
    act: { sub: 'svc-x' },
    spa: 'plane',
    spo: 'org-1',
    spk: 'api_key',
    ...overrides,
  });
}

test('CLM-01 expired tokens', async () => {
  const { verify } = await tokenFixture();
  for (const ago of [120, 3600]) {
    const now = nowSeconds();
    const token = await k1Token(
      baselineClaims({ iat: now - ago - 60, nbf: now - ago - 60, exp: now - ago }),
    );
    await assertRefused(verify(token), 'token_expired', `exp now-${ago}`);
  }
});

test('CLM-02 nbf in the future', async () => {
  const { verify } = await tokenFixture();
  const now = nowSeconds();
  const token = await k1Token(baselineClaims({ nbf: now + 600, exp: now + 900 }));
  await assertRefused(verify(token), 'token_not_yet_valid');
});

test('CLM-03 iat in the future', async () => {
  const { verify } = await tokenFixture();
  const now = nowSeconds();
  const token = await k1Token(baselineClaims({ iat: now + 600, exp: now + 900 }));
  await assertRefused(verify(token), 'token_issued_in_future');
});

test('CLM-04 each required claim removed in turn', async () => {
  const { verify } = await tokenFixture();
  for (const name of ['exp', 'iat', 'nbf', 'jti', 'sub', 'iss', 'aud', 'scp']) {
    await assertRefused(verify(await k1Token(claimsWithout(name))), 'invalid_claims', name);
  }
});

test('CLM-05 exp that is not a positive integer NumericDate', async () => {
  const { verify } = await tokenFixture();
  // 8.64e12 s is the last second a Date holds: past it, expiresAt would be an Invalid Date.
  for (const exp of ['9999999999', null, true, -1, 0, 1.5e9 + 0.5, 8_640_000_000_001]) {
    await assertRefused(
      verify(await k1Token(baselineClaims({ exp }))),
      'invalid_claims',
      JSON.stringify(exp),
    );
  }
});

test('CLM-06 token substitution: aud svc-b presented at svc-a', async () => {
  const { verify } = await tokenFixture();
  const token = await k1Token(baselineClaims({ aud: 'svc-b' }));
  await assertRefused(verify(token), 'audience_mismatch');
  // The same token is fine where it belongs.
  assert.equal((await verify(token, { audience: 'svc-b' })).identity.audience, 'svc-b');
});

test('CLM-07 aud near-misses and arrays', async () => {
  const { verify } = await tokenFixture();
  for (const aud of ['SVC-A', 'svc-a ', 'svc-a\u0000']) {
    await assertRefused(
      verify(await k1Token(baselineClaims({ aud }))),
      'audience_mismatch',
      JSON.stringify(aud),
    );
  }
  for (const aud of [['svc-a'], ['svc-b', 'svc-a']]) {
    await assertRefused(
      verify(await k1Token(baselineClaims({ aud }))),
      'invalid_claims',
      JSON.stringify(aud),
    );
  }
});

test('CLM-08 foreign, empty or case-variant issuer', async () => {
  const { verify } = await tokenFixture();
  for (const iss of ['control-plane-evil', TEST_ISSUER.toUpperCase(), `${TEST_ISSUER}/`]) {
    await assertRefused(verify(await k1Token(baselineClaims({ iss }))), 'issuer_mismatch', iss);
  }
  await assertRefused(verify(await k1Token(baselineClaims({ iss: '' }))), 'invalid_claims', '""');
});

test('CLM-09 (verifier) scopes are reported exactly as granted', async () => {
  const { verify } = await tokenFixture();
  const { identity, claims } = await verify(await k1Token(baselineClaims()));
  assert.deepEqual(identity.scopes, ['svc-a.read']);
  assert.deepEqual(claims.scp, ['svc-a.read']);
  assert.equal(identity.scopes.includes('svc-a.write'), false);
});

test('CLM-10 (verifier) scope look-alikes are never expanded', async () => {
  const { verify } = await tokenFixture();
  for (const scope of ['*', 'svc-a.*', 'SVC-A.WRITE', 'svc-a.write ', 'svc-a.writ']) {
    const { identity } = await verify(await k1Token(baselineClaims({ scp: [scope] })));
    assert.deepEqual(identity.scopes, [scope]);
    assert.equal(identity.scopes.includes('svc-a.write'), false);
  }
});

test('CLM-11 scp of the wrong type; empty scp grants nothing', async () => {
  const { verify } = await tokenFixture();
  for (const scp of [[1], [null], [['svc-a.write']], { 0: 'svc-a.write' }, [''], 'svc-a.write']) {
    await assertRefused(
      verify(await k1Token(baselineClaims({ scp }))),
      'invalid_claims',
      JSON.stringify(scp),
    );
  }
  const { identity } = await verify(await k1Token(baselineClaims({ scp: [] })));
  assert.deepEqual(identity.scopes, []);
});

test('CLM-12 (verifier) unknown claims are dropped', async () => {
  const { verify } = await tokenFixture();
  const token = await k1Token(
    baselineClaims({ admin: true, roles: ['root'], scope: 'svc-a.write', 'x-tenant': 't1' }),
  );
  const { identity, claims } = await verify(token);
  for (const name of ['admin', 'roles', 'scope', 'x-tenant']) {
    assert.equal(name in identity, false, `identity.${name}`);
    assert.equal(name in claims, false, `claims.${name}`);
  }
  assert.deepEqual(identity.scopes, ['svc-a.read'], 'OAuth `scope` is not `scp`');
  assert.doesNotMatch(JSON.stringify({ identity, claims }), /root|t1|admin/);
});

test('CLM-13 spa values other than "service" or "plane"', async () => {
  const { verify } = await tokenFixture();
  for (const spa of ['SERVICE', 'Service', 'admin', ['service'], true, '']) {
    await assertRefused(
      verify(await k1Token(baselineClaims({ spa }))),
      'invalid_claims',
      JSON.stringify(spa),
    );
  }
});

test('CLM-14 (verifier) spa absent reads as plane', async () => {
  const { verify } = await tokenFixture();
  const claims = baselineClaims();
  delete claims.spa;
  const { identity } = await verify(await k1Token(claims));
  assert.equal(identity.callerAccess, 'plane');
});

test('CLM-15 spk or spo on a plain token', async () => {
  const { verify } = await tokenFixture();
  for (const extra of [{ spk: 'api_key' }, { spo: 'org-1' }]) {
    await assertRefused(
      verify(await k1Token(baselineClaims({ spa: 'plane', ...extra }))),
      'invalid_claims',
      Object.keys(extra)[0],
    );
  }
});

test('CLM-16 spk on a delegated token: malformed refused, 512 characters accepted', async () => {
  const { verify } = await tokenFixture();
  for (const spk of ['', 'k'.repeat(513), 5, {}, []]) {
    await assertRefused(
      verify(await k1Token(delegatedClaims({ spk }))),
      'invalid_claims',
      `spk ${JSON.stringify(spk).slice(0, 20)}`,
    );
  }
  const kind = 'k'.repeat(512);
  const { identity } = await verify(await k1Token(delegatedClaims({ spk: kind })));
  assert.equal(identity.subject?.kind, kind);
});

test('CLM-17 (verifier) spk "service" never changes the access class', async () => {
  const { verify } = await tokenFixture();
  const { identity } = await verify(await k1Token(delegatedClaims({ spk: 'service' })));
  assert.equal(identity.callerAccess, 'plane');
  assert.equal(identity.subject?.kind, 'service');
  assert.equal(identity.serviceId, 'svc-x');
});

test('CLM-18 act that is not { sub: non-empty string }', async () => {
  const { verify } = await tokenFixture();
  for (const act of ['svc-x', {}, { sub: '' }, { sub: 5 }, null, [], { sub: 'svc-x', extra: 1 }]) {
    await assertRefused(
      verify(await k1Token(delegatedClaims({ act }))),
      'invalid_claims',
      JSON.stringify(act),
    );
  }
  // A delegated token is always plane-class.
  await assertRefused(
    verify(await k1Token(delegatedClaims({ spa: 'service' }))),
    'invalid_claims',
    'act with spa service',
  );
});

test('CLM-19 control: delegated token identity', async () => {
  const { verify } = await tokenFixture();
  const claims = delegatedClaims();
  const { identity } = await verify(await k1Token(claims));
  assert.deepEqual(identity, {
    serviceId: 'svc-x',
    audience: 'svc-a',
    scopes: ['svc-a.read'],
    tokenId: claims.jti,
    issuer: TEST_ISSUER,
    expiresAt: new Date((claims.exp as number) * 1000),
    callerAccess: 'plane',
    subject: { id: 'user-7', orgId: 'org-1', kind: 'api_key' },
  });
});

test('CLM-20 spb that is not a non-empty string', async () => {
  const { verify } = await tokenFixture();
  for (const spb of [5, [PLANE_ID], {}, '']) {
    await assertRefused(
      verify(await k1Token(baselineClaims({ spb }))),
      'invalid_claims',
      JSON.stringify(spb),
    );
  }
  const { identity } = await verify(await k1Token(baselineClaims({ spb: PLANE_ID })));
  assert.equal(identity.brokerServiceId, PLANE_ID);
});

test('CLM-21 duplicate claim names: the last member wins, and is what is reported', async () => {
  const { verify } = await tokenFixture();
  const now = nowSeconds();
  const json = (first: string, last: string, name: 'aud' | 'scp') =>
    `{"iss":"${TEST_ISSUER}","sub":"svc-caller",${
      name === 'aud' ? `"aud":${first},` : '"aud":"svc-a",'
    }"scp":${
      name === 'scp' ? first : '["svc-a.read"]'
    },"spa":"service","jti":"${crypto.randomUUID()}",` +
    `"iat":${now - 5},"nbf":${now - 5},"exp":${now + 120},"${name}":${last}}`;
  const audLast = await verify(await k1Token({ raw: json('"svc-b"', '"svc-a"', 'aud') }));
  assert.equal(audLast.identity.audience, 'svc-a');
  assert.equal(audLast.claims.aud, 'svc-a');
  await assertRefused(
    verify(await k1Token({ raw: json('"svc-a"', '"svc-b"', 'aud') })),
    'audience_mismatch',
    'aud svc-a then svc-b',
  );
  const scpLast = await verify(
    await k1Token({ raw: json('["svc-a.write"]', '["svc-a.read"]', 'scp') }),
  );
  assert.deepEqual(scpLast.identity.scopes, ['svc-a.read']);
  assert.deepEqual(scpLast.claims.scp, ['svc-a.read']);
  const scpWrite = await verify(
    await k1Token({ raw: json('["svc-a.read"]', '["svc-a.write"]', 'scp') }),
  );
  assert.deepEqual(scpWrite.identity.scopes, ['svc-a.write']);
});
