import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  CAPABILITY_TOKEN_CLOCK_SKEW_SECONDS,
  CAPABILITY_TOKEN_TYP,
  type CapabilityKeySet,
  capabilityKeySetFromJwks,
  capabilityKeyThumbprint,
  type CapabilityTokenClaims,
  MAX_CAPABILITY_TOKEN_BYTES,
  readCapabilityClaims,
  recheckVerifiedToken,
  signCapabilityToken,
  verifyCapabilityClaims,
  verifyCapabilityToken,
} from '../../src/core/capability-token.ts';
import {
  CapabilityAuthError,
  SvcConfigurationError,
  SvcInternalError,
} from '../../src/core/errors.ts';
import { VerifiedTokenCache, verifiedTokenCacheFor } from '../../src/core/verified-token-cache.ts';
import {
  b64url,
  baselineClaims,
  decodeSegment,
  fromB64url,
  nowSeconds,
  TEST_ISSUER,
} from '../support/forge.ts';
import { testKeys } from '../support/keys.ts';
import { assertRefused, tokenFixture } from '../support/token-fixture.ts';

function claims(overrides: Record<string, unknown> = {}): CapabilityTokenClaims {
  return baselineClaims(overrides) as unknown as CapabilityTokenClaims;
}

async function k1Signer() {
  const { k1 } = await testKeys();
  return { kid: 'k1', privateKey: k1.privateKey };
}

async function expectSignRefused(input: CapabilityTokenClaims, pattern: RegExp) {
  await assert.rejects(signCapabilityToken(input, await k1Signer()), (error: unknown) => {
    assert.ok(error instanceof SvcConfigurationError, String(error));
    assert.match(error.message, pattern);
    return true;
  });
}

test('signed tokens carry exactly { alg ES256, kid, typ } and only the closed claim set', async () => {
  const input = { ...claims({ spb: 'svc-plane' }), admin: true } as CapabilityTokenClaims;
  const token = await signCapabilityToken(input, await k1Signer());
  assert.deepEqual(decodeSegment(token, 0), { alg: 'ES256', kid: 'k1', typ: CAPABILITY_TOKEN_TYP });
  const payload = decodeSegment(token, 1);
  assert.equal('admin' in payload, false);
  assert.deepEqual(Object.keys(payload).sort(), [
    'aud',
    'exp',
    'iat',
    'iss',
    'jti',
    'nbf',
    'scp',
    'spa',
    'spb',
    'sub',
  ]);
  assert.equal(token.split('.')[2].length, 86, '64-byte R||S signature');
});

test('the issuer refuses spk or spo on a plain token', async () => {
  await expectSignRefused(claims({ spk: 'api_key' }), /spk.*delegated/);
  await expectSignRefused(claims({ spo: 'org-1' }), /spk.*delegated/);
});

test('the issuer refuses a delegated token with spa service', async () => {
  await expectSignRefused(
    claims({ act: { sub: 'svc-x' }, sub: 'user-7', spa: 'service' }),
    /plane-class/,
  );
});

test('the issuer enforces spk length in characters: 512 passes, 513 is refused', async () => {
  const { verify } = await tokenFixture();
  const delegated = { act: { sub: 'svc-x' }, sub: 'user-7', spa: 'plane' };
  // Astral characters are two UTF-16 units each; the limit counts characters.
  const wide = '\u{1F511}'.repeat(512);
  const token = await signCapabilityToken(claims({ ...delegated, spk: wide }), await k1Signer());
  assert.equal((await verify(token)).identity.subject?.kind, wide);
  await expectSignRefused(claims({ ...delegated, spk: `${wide}x` }), /at most 512/);
  await expectSignRefused(claims({ ...delegated, spk: '' }), /spk/);
});

test('the issuer refuses malformed claim types and oversized tokens', async () => {
  await expectSignRefused(claims({ scp: ['ok', ''] }), /scp/);
  await expectSignRefused(claims({ exp: 1.5 }), /exp/);
  await expectSignRefused(claims({ aud: ['svc-a'] }), /aud/);
  await expectSignRefused(claims({ cnf: { jkt: 'short' } }), /cnf/);
  const many = Array.from({ length: 800 }, (_, i) => `svc-a.scope-${i}`);
  await expectSignRefused(claims({ scp: many }), /larger than 8192/);
});

test('the size limit is decided on the encoded token: at 8192 bytes it is signed, one more is refused', async () => {
  const signer = await k1Signer();
  const encoder = new TextEncoder();
  const base = claims({ sub: '' });
  // Token length for a subject: header and signature segments are fixed, the payload is the
  // UTF-8 of its JSON in base64url.
  const headerLength =
    b64url(JSON.stringify({ alg: 'ES256', kid: 'k1', typ: CAPABILITY_TOKEN_TYP }))
      .length;
  const tokenLength = (sub: string) =>
    headerLength + 1 +
    Math.ceil((encoder.encode(JSON.stringify({ ...base, sub })).length * 4) / 3) + 1 + 86;
  for (const unit of ['a', '\u20ac', '\u{1f511}']) {
    let sub = unit;
    while (tokenLength(sub + unit) <= MAX_CAPABILITY_TOKEN_BYTES) sub += unit;
    const token = await signCapabilityToken({ ...base, sub }, signer);
    assert.equal(token.length, tokenLength(sub), `${unit}: predicted length`);
    assert.ok(token.length <= MAX_CAPABILITY_TOKEN_BYTES);
    const { claims: verified } = await (await tokenFixture()).verify(token, {
      audience: base.aud,
    });
    assert.equal(verified.sub, sub, `${unit}: the subject survives signing and verification`);
    await expectSignRefused({ ...base, sub: sub + unit }, /larger than 8192/);
  }
});

test('concurrent mints never share signing bytes: each token verifies and carries its own claims', async () => {
  const signer = await k1Signer();
  const { verify } = await tokenFixture();
  const subjects = Array.from({ length: 48 }, (_, i) => `svc-caller-${i}-${'x'.repeat(i * 7)}`);
  const tokens = await Promise.all(
    subjects.map((sub) => signCapabilityToken(claims({ sub, jti: `jti-${sub}` }), signer)),
  );
  const verified = await Promise.all(tokens.map((token) => verify(token)));
  verified.forEach(({ claims: got }, i) => {
    assert.equal(got.sub, subjects[i]);
    assert.equal(got.jti, `jti-${subjects[i]}`);
  });
});

test('successive tokens sharing their first claims or not each sign exactly their own claim set', async () => {
  const { keys, verify } = await tokenFixture();
  // A third signer whose header is longer: the payload starts elsewhere in the signing input.
  const signers = {
    k1: { kid: 'k1', privateKey: keys.k1.privateKey },
    k2: { kid: 'k2', privateKey: keys.k2.privateKey },
    long: { kid: 'k1-under-a-longer-kid', privateKey: keys.k1.privateKey },
  };
  const refuse = (problem: string): never => {
    throw new Error(problem);
  };
  // Each token is signed after the one before it and differs from it in one thing only: the jti
  // (everything else shared), one character or one second of one other claim, an optional claim
  // present or not, the order or number of scopes, or the signer.
  const steps: { signer: keyof typeof signers; overrides: Record<string, unknown> }[] = [];
  const push = (overrides: Record<string, unknown>, signer: keyof typeof signers = 'k1') =>
    steps.push({ signer, overrides });
  // The shared part ends at each remainder modulo three, and each is followed by tokens that
  // share it with a longer or shorter jti.
  for (const sub of ['svc-caller', 'svc-caller1', 'svc-caller12']) {
    push({ sub, jti: 'jti-1' });
    push({ sub, jti: 'jti-22' });
    push({ sub, jti: 'j' });
  }
  push({});
  push({ iss: 'https://plane.tesu' });
  push({});
  push({ sub: 'svc-callex' });
  push({});
  push({ aud: 'svc-b' });
  push({});
  push({ scp: ['svc-a.reae'] });
  push({ scp: ['svc-a.read', 'svc-a.writd'] });
  push({ scp: ['svc-a.writd', 'svc-a.read'] });
  push({ scp: ['svc-a.writd'] });
  push({ scp: ['svc-a.writd', 'svc-a.writd'] });
  const at = nowSeconds();
  push({ iat: at, nbf: at, exp: at + 60 });
  push({ iat: at - 1, nbf: at, exp: at + 60 });
  push({ iat: at - 1, nbf: at - 1, exp: at + 60 });
  push({ iat: at - 1, nbf: at - 1, exp: at + 61 });
  push({ spa: 'plane' });
  push({ spa: undefined });
  push({});
  const thumbprint = 'A'.repeat(43);
  push({ cnf: { jkt: thumbprint } });
  push({ cnf: { jkt: 'B'.repeat(43) } });
  push({ cnf: { jkt: thumbprint }, spb: 'svc-plane' });
  push({ cnf: { jkt: thumbprint }, spb: 'svc-planf' });
  const delegated = { spa: 'plane', sub: 'user-1', act: { sub: 'svc-caller' } };
  push(delegated);
  push({ ...delegated, act: { sub: 'svc-callex' } });
  push({ ...delegated, spk: 'user' });
  push({ ...delegated, spk: 'usex' });
  push({ ...delegated, spk: 'usex', spo: 'org-1' });
  push({ ...delegated, spk: 'usex', spo: 'org-2' });
  push({});
  push({}, 'k2');
  push({}, 'long');
  push({}, 'k1');
  push({}, 'long');
  for (const [i, { signer, overrides }] of steps.entries()) {
    const input = claims(overrides);
    const token = await signCapabilityToken(input, signers[signer]);
    const expected = JSON.stringify(readCapabilityClaims(input, refuse));
    const [header, payload] = token.split('.');
    assert.equal(payload, b64url(expected), `step ${i}: ${JSON.stringify(overrides)}`);
    const kid = JSON.parse(new TextDecoder().decode(fromB64url(header))).kid;
    assert.equal(kid, signers[signer].kid);
    // The published key set knows k1 and k2; the longer kid's token is checked by its bytes.
    if (signer !== 'long') {
      const { claims: verified } = await verify(token, {
        audience: input.aud as string,
        issuer: input.iss as string,
      });
      assert.equal(JSON.stringify(verified), expected, `step ${i} verifies`);
    }
    if (i === 1) {
      // A refused token in between writes over the shared part before it is refused; the next
      // token shares its first claims with this one.
      const many = Array.from({ length: 800 }, (_, n) => `svc-a.scope-${n}`);
      await expectSignRefused(claims({ scp: many }), /larger than 8192/);
    }
  }
});

test('the issuer refuses a signer that is not a P-256 private key', async () => {
  const { k1 } = await testKeys();
  const input = claims();
  for (
    const signer of [
      { kid: '', privateKey: k1.privateKey },
      { kid: 'k1', privateKey: k1.publicKey },
      { kid: 'k1', privateKey: undefined as unknown as CryptoKey },
    ]
  ) {
    await assert.rejects(signCapabilityToken(input, signer), SvcConfigurationError);
  }
});

test('verification maps spb, cnf and the closed claims; identity never has confirmation', async () => {
  const { verify } = await tokenFixture();
  const jkt = b64url(new Uint8Array(32));
  const token = await signCapabilityToken(
    claims({ spb: 'svc-plane', cnf: { jkt } }),
    await k1Signer(),
  );
  const verified = await verify(token);
  assert.equal(verified.identity.brokerServiceId, 'svc-plane');
  assert.equal(verified.confirmationJkt, jkt);
  assert.equal('confirmation' in verified.identity, false);
  assert.deepEqual(verified.claims.cnf, { jkt });
  assert.ok(Object.isFrozen(verified.claims) && Object.isFrozen(verified.claims.scp));
});

test('token size limit: one byte over is too large, at the limit it is parsed', async () => {
  const { verify } = await tokenFixture();
  await assertRefused(verify('a'.repeat(MAX_CAPABILITY_TOKEN_BYTES + 1)), 'token_too_large');
  await assertRefused(verify('a'.repeat(MAX_CAPABILITY_TOKEN_BYTES)), 'token_malformed');
});

test('clock skew of 30 s applies to exp, nbf and iat', async () => {
  const { verify } = await tokenFixture();
  const skew = CAPABILITY_TOKEN_CLOCK_SKEW_SECONDS;
  const t = 1_900_000_000;
  const token = await signCapabilityToken(
    claims({ iat: t, nbf: t, exp: t + 60 }),
    await k1Signer(),
  );
  const at = (seconds: number) => ({ now: () => seconds * 1000 });
  await verify(token, at(t + 60 + skew - 1));
  await assertRefused(verify(token, at(t + 60 + skew)), 'token_expired');
  await verify(token, at(t - skew));
  await assertRefused(verify(token, at(t - skew - 1)), 'token_not_yet_valid');
  const futureIat = await signCapabilityToken(
    claims({ iat: t + 10, nbf: t - 100, exp: t + 60 }),
    await k1Signer(),
  );
  await verify(futureIat, at(t + 10 - skew));
  await assertRefused(verify(futureIat, at(t + 10 - skew - 1)), 'token_issued_in_future');
});

test('a verified token is cached until exp, and a cache hit still checks issuer and audience', async () => {
  const { keySet, verify } = await tokenFixture();
  const input = claims();
  const token = await signCapabilityToken(input, await k1Signer());
  await verify(token);
  const cache = verifiedTokenCacheFor(keySet);
  const entry = cache.get(token, Date.now());
  assert.equal(entry?.kid, 'k1');
  assert.equal(entry?.claims.jti, input.jti);
  await assertRefused(verify(token, { audience: 'svc-c' }), 'audience_mismatch');
  await assertRefused(verify(token, { issuer: 'https://other.test' }), 'issuer_mismatch');
  const expiry = (input.exp + CAPABILITY_TOKEN_CLOCK_SKEW_SECONDS) * 1000;
  assert.equal(cache.get(token, expiry), undefined, 'never outlives exp');
  assert.equal(cache.get(token, Date.now()), undefined, 'dropped once expired');
});

test('a cache hit checks the time claims against now', async () => {
  const { verify } = await tokenFixture();
  const input = claims();
  const token = await signCapabilityToken(input, await k1Signer());
  await verify(token);
  // A clock that moved back before nbf refuses, even though the token is cached.
  await assertRefused(
    verify(token, { now: () => (input.nbf - 600) * 1000 }),
    'token_not_yet_valid',
  );
  await verify(token);
});

test('a cached verification is dropped when the kid maps to another key or none', async () => {
  const { keys, keySet } = await tokenFixture();
  let mapping: 'k1' | 'k2' | 'none' = 'k1';
  const swapping: CapabilityKeySet = {
    getKey: () => mapping === 'none' ? Promise.resolve(undefined) : keySet.getKey(mapping),
  };
  const options = { keys: swapping, issuer: TEST_ISSUER, audience: 'svc-a' };
  const token = await signCapabilityToken(claims(), { kid: 'k1', privateKey: keys.k1.privateKey });
  await verifyCapabilityToken(token, options);
  mapping = 'k2'; // same kid, different key: must be verified again, and fails
  await assertRefused(verifyCapabilityToken(token, options), 'bad_signature');
  assert.equal(verifiedTokenCacheFor(swapping).get(token, Date.now()), undefined);
  mapping = 'k1';
  await verifyCapabilityToken(token, options);
  mapping = 'none';
  await assertRefused(verifyCapabilityToken(token, options), 'unknown_capability_key_id');
});

test('a synchronous recheck refuses an expired token and leaves a changed or removed key to the full check', async () => {
  const { keys, keySet } = await tokenFixture();
  let mapping: 'k1' | 'k2' | 'none' = 'k1';
  const current = (kid: string) => mapping === 'none' ? undefined : mapping === kid ? kid : mapping;
  const imported = new Map<string, CryptoKey>();
  for (const kid of ['k1', 'k2']) imported.set(kid, (await keySet.getKey(kid))!);
  const swapping: CapabilityKeySet = {
    getKey: (kid) => Promise.resolve(mapping === 'none' ? undefined : imported.get(current(kid)!)),
    currentKey: (kid) => mapping === 'none' ? undefined : imported.get(current(kid)!),
  };
  const options = { keys: swapping, issuer: TEST_ISSUER, audience: 'svc-a' };
  const input = claims();
  const token = await signCapabilityToken(input, { kid: 'k1', privateKey: keys.k1.privateKey });
  assert.equal(recheckVerifiedToken(token, options), undefined, 'never verified: no answer');
  const verified = await verifyCapabilityClaims(token, options);
  assert.equal(recheckVerifiedToken(token, options), verified, 'the same frozen claims');
  assert.equal(await verifyCapabilityClaims(token, options), verified);
  // For another audience, or before nbf: refused at once.
  assert.throws(
    () => recheckVerifiedToken(token, { ...options, audience: 'svc-c' }),
    (error: unknown) => (error as CapabilityAuthError).reason === 'audience_mismatch',
  );
  assert.throws(
    () => recheckVerifiedToken(token, { ...options, now: () => (input.nbf - 600) * 1000 }),
    (error: unknown) => (error as CapabilityAuthError).reason === 'token_not_yet_valid',
  );
  // Expired: never a synchronous pass; the full check refuses it.
  const expiresAtMs = (input.exp + CAPABILITY_TOKEN_CLOCK_SKEW_SECONDS) * 1000;
  assert.equal(recheckVerifiedToken(token, { ...options, now: () => expiresAtMs - 1 }), verified);
  const late = { ...options, now: () => expiresAtMs };
  assert.equal(recheckVerifiedToken(token, late), undefined);
  await assertRefused(verifyCapabilityClaims(token, late), 'token_expired');
  await verifyCapabilityClaims(token, options);
  // The kid now names another key, or none: no synchronous answer, and the full check refuses.
  mapping = 'k2';
  assert.equal(recheckVerifiedToken(token, options), undefined);
  await assertRefused(verifyCapabilityClaims(token, options), 'bad_signature');
  mapping = 'none';
  assert.equal(recheckVerifiedToken(token, options), undefined);
  await assertRefused(verifyCapabilityClaims(token, options), 'unknown_capability_key_id');
  // A key set that cannot answer at once never gets a synchronous verdict.
  const asyncOnly: CapabilityKeySet = { getKey: (kid) => keySet.getKey(kid) };
  const asyncOptions = { keys: asyncOnly, issuer: TEST_ISSUER, audience: 'svc-a' };
  await verifyCapabilityClaims(token, asyncOptions);
  assert.equal(recheckVerifiedToken(token, asyncOptions), undefined);
});

test('refused tokens are never cached', async () => {
  const { keySet, keys, verify } = await tokenFixture();
  const token = await signCapabilityToken(claims({ aud: 'svc-b' }), {
    kid: 'k1',
    privateKey: keys.k1.privateKey,
  });
  await assertRefused(verify(token), 'audience_mismatch');
  assert.equal(verifiedTokenCacheFor(keySet).get(token, Date.now()), undefined);
});

test('the verified-token cache is bounded and evicts the oldest entry', async () => {
  const { k1 } = await testKeys();
  const cache = new VerifiedTokenCache(2);
  const entry = {
    kid: 'k1',
    key: k1.publicKey,
    claims: claims(),
    expiresAtMs: Date.now() + 60_000,
  };
  cache.set('a', entry);
  cache.set('b', entry);
  cache.set('c', entry);
  assert.equal(cache.size, 2);
  assert.equal(cache.get('a', Date.now()), undefined);
  assert.ok(cache.get('c', Date.now()));
});

test('a key set failure surfaces as a retryable 503 jwks_unavailable', async () => {
  const { authority } = await tokenFixture();
  const token = await signCapabilityToken(claims(), authority.signer);
  const broken: CapabilityKeySet = { getKey: () => Promise.reject(new Error('socket hang up')) };
  await assert.rejects(
    verifyCapabilityToken(token, { keys: broken, issuer: TEST_ISSUER, audience: 'svc-a' }),
    (error: unknown) => {
      assert.ok(error instanceof SvcInternalError);
      assert.equal(error.status, 503);
      assert.equal(error.retryable, true);
      assert.equal(error.reason, 'jwks_unavailable');
      assert.doesNotMatch(error.message, /socket/);
      return true;
    },
  );
});

test('verification options are checked', async () => {
  const { keySet } = await tokenFixture();
  const bad = [
    { keys: undefined, issuer: TEST_ISSUER, audience: 'svc-a' },
    { keys: keySet, issuer: '', audience: 'svc-a' },
    { keys: keySet, issuer: TEST_ISSUER, audience: undefined },
  ];
  for (const options of bad) {
    await assert.rejects(verifyCapabilityToken('x.y.z', options as never), SvcConfigurationError);
  }
  await assert.rejects(
    verifyCapabilityToken('x.y.z', {
      keys: keySet,
      issuer: TEST_ISSUER,
      audience: 'svc-a',
      now: () => Number.NaN,
    }),
    SvcConfigurationError,
    'a NaN clock must not disable the time checks',
  );
  await assert.rejects(
    verifyCapabilityToken(undefined, { keys: keySet, issuer: TEST_ISSUER, audience: 'svc-a' }),
    CapabilityAuthError,
  );
});

test('capabilityKeyThumbprint follows RFC 7638: crv, kty, x, y in that order, nothing else', async () => {
  const { k1 } = await testKeys();
  const { x, y } = k1.publicJwk;
  const canonical = `{"crv":"P-256","kty":"EC","x":"${x}","y":"${y}"}`;
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(canonical));
  const expected = b64url(new Uint8Array(digest));
  assert.equal(expected.length, 43);
  assert.equal(await capabilityKeyThumbprint({ y, x, kty: 'EC', crv: 'P-256' }), expected);
  assert.equal(await capabilityKeyThumbprint(k1.publicJwk), expected, 'kid, alg, use ignored');
  assert.equal(await capabilityKeyThumbprint(k1.privateJwk), expected, 'd ignored');
  await assert.rejects(
    capabilityKeyThumbprint({ kty: 'RSA', n: 'x', e: 'AQAB' }),
    SvcConfigurationError,
  );
});

test('capabilityKeySetFromJwks imports ES256 public keys and selects by kid', async () => {
  const { k1, k2 } = await testKeys();
  const keySet = await capabilityKeySetFromJwks({
    keys: [
      k1.publicJwk,
      { ...k2.publicJwk, alg: undefined, use: undefined },
      { kty: 'RSA', kid: 'rsa', n: 'AQAB', e: 'AQAB' },
      { ...k2.publicJwk, kid: 'enc', use: 'enc' },
      { ...k2.publicJwk, kid: 'es384', alg: 'ES384' },
      { ...k2.publicJwk, kid: 'ops', key_ops: ['encrypt'] },
    ],
  });
  const key = await keySet.getKey('k1');
  assert.equal(key?.type, 'public');
  assert.deepEqual(key?.usages, ['verify']);
  assert.ok(await keySet.getKey('k2'));
  for (const kid of ['rsa', 'enc', 'es384', 'ops', 'k3', '']) {
    assert.equal(await keySet.getKey(kid), undefined, kid);
  }
});

test('capabilityKeySetFromJwks refuses private material, duplicate or missing kids, bad points', async () => {
  const { k1, k2 } = await testKeys();
  const refusals: [string, unknown][] = [
    ['not a JWKS', [k1.publicJwk]],
    ['keys not an array', { keys: k1.publicJwk }],
    ['private d', { keys: [k1.privateJwk] }],
    ['symmetric k', { keys: [{ kty: 'oct', kid: 'h', k: 'c2VjcmV0' }] }],
    ['duplicate kid', { keys: [k1.publicJwk, { ...k2.publicJwk, kid: 'k1' }] }],
    ['missing kid', { keys: [{ ...k1.publicJwk, kid: undefined }] }],
    ['short x', { keys: [{ ...k1.publicJwk, x: k1.publicJwk.x.slice(0, 40) }] }],
    ['point not on the curve', { keys: [{ ...k1.publicJwk, y: k1.publicJwk.x }] }],
  ];
  for (const [label, jwks] of refusals) {
    await assert.rejects(
      capabilityKeySetFromJwks(JSON.parse(JSON.stringify(jwks))),
      SvcConfigurationError,
      label,
    );
  }
});
