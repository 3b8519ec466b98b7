/**
 * Limits and sanity checks on a fetched control-plane JWKS: more than `MAX_CAPABILITY_JWKS_KEYS`
 * keys, a key that is not a point on P-256, and a `kid` published twice. Each refuses the whole
 * set, fail-closed: verification fails with `jwks_unavailable` (503) and never falls back to a
 * subset of the answer or to the keys of an earlier fetch.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  isP256Point,
  MAX_CAPABILITY_JWKS_KEYS,
  readCapabilityJwks,
} from '../../src/core/capability-key-set.ts';
import { signCapabilityToken, verifyCapabilityToken } from '../../src/core/capability-token.ts';
import { SvcConfigurationError, SvcInternalError } from '../../src/core/errors.ts';
import { jwksFromServiceBinding, jwksFromUrl, staticJwks } from '../../src/service/jwks-sources.ts';
import {
  b64url,
  baselineClaims,
  bytesInteger,
  fromB64url,
  integerBytes,
  P256_P,
  TEST_ISSUER,
} from '../support/forge.ts';
import { type TestKey, testKeys } from '../support/keys.ts';

const JWKS_URL = 'https://plane.test/.well-known/svc/jwks.json';

/** A JWKS fetch whose answer the test switches; counts requests. */
function switchableFetch(initial: unknown) {
  const state = { calls: 0, jwks: initial };
  const fetchImpl = (() => {
    state.calls++;
    return Promise.resolve(Response.json(state.jwks));
  }) as typeof fetch;
  return { state, fetch: fetchImpl };
}

async function tokenSignedBy(key: TestKey, kid = key.kid): Promise<string> {
  return await signCapabilityToken(baselineClaims() as never, { kid, privateKey: key.privateKey });
}

/** Expects the fail-closed refusal of an unusable fetched JWKS, with `problem` in its message. */
async function assertJwksRefused(pending: Promise<unknown>, problem: RegExp, label: string) {
  await assert.rejects(pending, (error: unknown) => {
    assert.ok(error instanceof SvcInternalError, `${label}: ${String(error)}`);
    assert.equal(error.code, 'internal', label);
    assert.equal(error.status, 503, label);
    assert.equal(error.retryable, true, label);
    assert.equal(error.reason, 'jwks_unavailable', label);
    assert.match(error.message, problem, label);
    return true;
  });
}

/** `jwk` with `y` replaced by y + 1 (mod p): a point that is not on the curve. */
function offCurve(jwk: TestKey['publicJwk']): TestKey['publicJwk'] {
  const y = (bytesInteger(fromB64url(jwk.y)) + 1n) % P256_P;
  return { ...jwk, y: b64url(integerBytes(y, 32)) };
}

/** `jwk` with `y` replaced by p − y: the negated point, which is on the curve. */
function negated(jwk: TestKey['publicJwk']): TestKey['publicJwk'] {
  const y = P256_P - bytesInteger(fromB64url(jwk.y));
  return { ...jwk, y: b64url(integerBytes(y, 32)) };
}

/** `count` publishable keys sharing k1's coordinates under distinct kids. */
function manyKeys(k1: TestKey, count: number) {
  return Array.from({ length: count }, (_, index) => ({
    ...k1.publicJwk,
    kid: index === 0 ? 'k1' : `k1-copy-${index}`,
  }));
}

test('isP256Point accepts real keys and their negation, refuses a nudged y and coordinates past p', async () => {
  const { k1, k2 } = await testKeys();
  for (const key of [k1, k2]) {
    const x = bytesInteger(fromB64url(key.publicJwk.x));
    const y = bytesInteger(fromB64url(key.publicJwk.y));
    assert.equal(isP256Point(x, y), true, `${key.kid} is on the curve`);
    assert.equal(isP256Point(x, P256_P - y), true, `${key.kid} negated is on the curve`);
    assert.equal(isP256Point(x, (y + 1n) % P256_P), false, `${key.kid} with y + 1`);
    assert.equal(isP256Point(x, y + P256_P), false, `${key.kid} with y + p (same residue)`);
    assert.equal(isP256Point(x + P256_P, y), false, `${key.kid} with x + p (same residue)`);
  }
  assert.equal(isP256Point(0n, 0n), false);
});

test('a fetched JWKS with more than MAX_CAPABILITY_JWKS_KEYS keys is refused whole; the limit itself is accepted', async () => {
  const { k1 } = await testKeys();
  const token = await tokenSignedBy(k1);
  const atLimit = { keys: manyKeys(k1, MAX_CAPABILITY_JWKS_KEYS) };
  const fake = switchableFetch(atLimit);
  // No failure cooldown: every lookup here must see the JWKS as it is now.
  const keySet = jwksFromUrl(JWKS_URL, {
    fetch: fake.fetch,
    cacheTtlSeconds: 0,
    failureCooldownMs: 0,
  });
  const options = { keys: keySet, issuer: TEST_ISSUER, audience: 'svc-a' };
  assert.equal((await verifyCapabilityToken(token, options)).identity.serviceId, 'svc-caller');
  assert.ok(await keySet.getKey(`k1-copy-${MAX_CAPABILITY_JWKS_KEYS - 1}`));

  // One more key, even one that verifies nothing, refuses the set: k1 (the first entry) is not
  // served from it, and the earlier answer is not served either.
  fake.state.jwks = {
    keys: [...manyKeys(k1, MAX_CAPABILITY_JWKS_KEYS), { kty: 'oct', kid: 'extra' }],
  };
  const calls = fake.state.calls;
  await assertJwksRefused(keySet.getKey('k1'), /more than 100 keys/, 'getKey');
  await assertJwksRefused(verifyCapabilityToken(token, options), /more than 100 keys/, 'verify');
  assert.ok(fake.state.calls > calls, 'each lookup fetched again: the refusal is not cached');

  fake.state.jwks = atLimit;
  assert.equal((await verifyCapabilityToken(token, options)).identity.serviceId, 'svc-caller');
});

test('a fetched JWKS with a key off the P-256 curve is refused whole, never partly used', async () => {
  const { k1, k2 } = await testKeys();
  const token = await tokenSignedBy(k1);
  const binding = { jwks: { keys: [k1.publicJwk, k2.publicJwk] } as unknown, calls: 0 };
  const keySet = jwksFromServiceBinding({
    fetch() {
      binding.calls++;
      return Promise.resolve(Response.json(binding.jwks));
    },
  }, { cacheTtlSeconds: 0 });
  const options = { keys: keySet, issuer: TEST_ISSUER, audience: 'svc-a' };
  await verifyCapabilityToken(token, options);

  // The negated point is a valid key (it simply verifies nothing of ours): accepted.
  binding.jwks = { keys: [k1.publicJwk, negated(k2.publicJwk)] };
  await verifyCapabilityToken(token, options);

  // k1 itself is intact; only k2 is off the curve. The token signed by k1 is still refused.
  binding.jwks = { keys: [k1.publicJwk, offCurve(k2.publicJwk)] };
  await assertJwksRefused(
    verifyCapabilityToken(token, options),
    /key 1 is not a point on the P-256 curve/,
    'off-curve k2',
  );
  binding.jwks = { keys: [offCurve(k1.publicJwk)] };
  await assertJwksRefused(keySet.getKey('k1'), /not a point on the P-256 curve/, 'off-curve k1');
  const pastP = { ...k1.publicJwk, x: b64url(integerBytes(P256_P, 32)) };
  binding.jwks = { keys: [pastP] };
  await assertJwksRefused(keySet.getKey('k1'), /not a point on the P-256 curve/, 'x = p');
});

test('a fetched JWKS naming one kid twice is refused whole, even when one copy is the real key', async () => {
  const { k1, attacker } = await testKeys();
  const genuine = await tokenSignedBy(k1);
  const forged = await tokenSignedBy(attacker, 'k1');
  const fake = switchableFetch({ keys: [k1.publicJwk] });
  // No failure cooldown: every lookup here must see the JWKS as it is now.
  const keySet = jwksFromUrl(JWKS_URL, {
    fetch: fake.fetch,
    cacheTtlSeconds: 0,
    failureCooldownMs: 0,
  });
  const options = { keys: keySet, issuer: TEST_ISSUER, audience: 'svc-a' };
  await verifyCapabilityToken(genuine, options);

  const impostor = { ...attacker.publicJwk, kid: 'k1' };
  const duplicated: [string, unknown[]][] = [
    ['real key first', [k1.publicJwk, impostor]],
    ['impostor first', [impostor, k1.publicJwk]],
    ['same key twice', [k1.publicJwk, k1.publicJwk]],
    ['a non-ES256 key sharing the kid', [k1.publicJwk, { kty: 'RSA', kid: 'k1', n: 'AQAB' }]],
  ];
  for (const [label, keys] of duplicated) {
    fake.state.jwks = { keys };
    // The verification of `genuine` is cached against k1's CryptoKey; the refused refresh must
    // not let that cached verification stand.
    await assertJwksRefused(
      verifyCapabilityToken(genuine, options),
      /duplicate key id "k1"/,
      label,
    );
    await assertJwksRefused(verifyCapabilityToken(forged, options), /duplicate key id "k1"/, label);
  }
  fake.state.jwks = { keys: [k1.publicJwk] };
  await verifyCapabilityToken(genuine, options);
  await assert.rejects(verifyCapabilityToken(forged, options), { reason: 'bad_signature' });
});

test('an inline JWKS with these problems is refused at construction as invalid_jwks', async () => {
  const { k1, k2 } = await testKeys();
  const problems: [string, unknown, RegExp][] = [
    ['too many keys', { keys: manyKeys(k1, MAX_CAPABILITY_JWKS_KEYS + 1) }, /more than 100 keys/],
    ['off the curve', { keys: [offCurve(k1.publicJwk)] }, /not a point on the P-256 curve/],
    ['duplicate kid', { keys: [k1.publicJwk, { ...k2.publicJwk, kid: 'k1' }] }, /duplicate key id/],
  ];
  for (const [label, jwks, problem] of problems) {
    for (const read of [() => staticJwks(jwks), () => readCapabilityJwks(jwks)]) {
      assert.throws(read, (error: unknown) => {
        assert.ok(error instanceof SvcConfigurationError, `${label}: ${String(error)}`);
        assert.equal(error.reason, 'invalid_jwks', label);
        assert.match(error.message, problem, label);
        return true;
      });
    }
  }
  assert.equal(readCapabilityJwks({ keys: manyKeys(k1, MAX_CAPABILITY_JWKS_KEYS) }).length, 100);
});
