import assert from 'node:assert/strict';
import { test } from 'node:test';
import { signCapabilityToken, verifyCapabilityToken } from '../../src/core/capability-token.ts';
import { SvcConfigurationError, svcErrorInfo } from '../../src/core/errors.ts';
import {
  generateSigningKeyEntry,
  loadSigningAuthority,
  SIGNING_KEYS_TIMEOUT_MS,
  signingAuthorityFromOption,
  type SigningKeyEntry,
} from '../../src/plane/signing-keys.ts';
import { b64url, baselineClaims, decodeSegment, TEST_ISSUER } from '../support/forge.ts';
import { testKeys } from '../support/keys.ts';

async function assertConfigRefused(promise: Promise<unknown>, pattern: RegExp) {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof SvcConfigurationError, String(error));
    assert.match(error.message, pattern);
    return true;
  });
}

async function roundTrip(entries: SigningKeyEntry[]) {
  const authority = await loadSigningAuthority(entries);
  const token = await signCapabilityToken(baselineClaims() as never, authority.signer);
  const verified = await verifyCapabilityToken(token, {
    keys: authority.keySet,
    issuer: TEST_ISSUER,
    audience: 'svc-a',
  });
  return { authority, token, verified };
}

test('the first entry signs and every entry is published with public members only', async () => {
  const { k1, k2 } = await testKeys();
  const { authority, token } = await roundTrip([k2.entry, k1.entry]);
  assert.equal(authority.signer.kid, 'k2');
  assert.equal(decodeSegment(token, 0).kid, 'k2');
  assert.deepEqual(authority.kids, ['k2', 'k1']);
  assert.deepEqual(authority.jwks.keys, [k2.publicJwk, k1.publicJwk]);
  for (const key of authority.jwks.keys) {
    assert.deepEqual(Object.keys(key).sort(), ['alg', 'crv', 'kid', 'kty', 'use', 'x', 'y']);
  }
  assert.ok(Object.isFrozen(authority.jwks.keys));
});

test('the private key is imported non-extractable', async () => {
  const { k1 } = await testKeys();
  const authority = await loadSigningAuthority([k1.entry]);
  assert.equal(authority.signer.privateKey.extractable, false);
  await assert.rejects(crypto.subtle.exportKey('jwk', authority.signer.privateKey));
});

test('secrets may be JWK JSON text, a JWK object or a PKCS#8 PEM', async () => {
  const { k1 } = await testKeys();
  await roundTrip([{ kid: 'k1', secret: JSON.stringify(k1.privateJwk) }]);
  await roundTrip([{ kid: 'k1', secret: k1.privateJwk }]);
  const { privateJwk } = k1;
  await roundTrip([{ kid: 'other', secret: { ...privateJwk, kid: undefined } }]);
  const pem = await generateSigningKeyEntry({ kid: 'pem-key', format: 'pem' });
  assert.match(
    pem.secret,
    /^-----BEGIN PRIVATE KEY-----\n[A-Za-z0-9+/=\n]+\n-----END PRIVATE KEY-----$/,
  );
  const { authority, verified } = await roundTrip([pem]);
  assert.equal(authority.jwks.keys[0].kid, 'pem-key');
  assert.equal(verified.identity.serviceId, 'svc-caller');
});

test('generated JWK entries load, carry their kid, and are distinct per call', async () => {
  const first = await generateSigningKeyEntry({ kid: 'k-2030' });
  const second = await generateSigningKeyEntry();
  assert.equal(first.kid, 'k-2030');
  assert.equal(JSON.parse(first.secret).kid, 'k-2030');
  assert.match(second.kid, /^k-\d{8}-[A-Za-z0-9_-]{8}$/);
  assert.notEqual(JSON.parse(first.secret).d, JSON.parse(second.secret).d);
  const { authority } = await roundTrip([first, second]);
  assert.deepEqual(authority.kids, ['k-2030', second.kid]);
  await assertConfigRefused(generateSigningKeyEntry({ kid: 'has space' }), /visible ASCII/);
});

test('duplicate kids are refused with the contract message', async () => {
  const { k1, k2 } = await testKeys();
  await assertConfigRefused(
    loadSigningAuthority([k1.entry, k2.entry, { kid: 'k2', secret: k1.entry.secret }]),
    /^Duplicate capability signing key id: k2$/,
  );
});

test('empty lists, missing kids and malformed entries are refused', async () => {
  const { k1 } = await testKeys();
  await assertConfigRefused(loadSigningAuthority([]), /at least one/);
  await assertConfigRefused(loadSigningAuthority(undefined as never), /at least one/);
  await assertConfigRefused(
    loadSigningAuthority([{ kid: '', secret: k1.entry.secret }]),
    /explicit non-empty string kid/,
  );
  await assertConfigRefused(
    loadSigningAuthority([{ secret: k1.entry.secret } as never]),
    /explicit non-empty string kid/,
  );
  await assertConfigRefused(loadSigningAuthority([{ kid: 'k1', secret: 42 } as never]), /secret/);
  await assertConfigRefused(
    loadSigningAuthority([{ kid: 'k1', secret: 'hunter2' }]),
    /neither JWK/,
  );
});

test('a kid and secret given the wrong way round are refused without quoting the secret', async () => {
  const { k1 } = await testKeys();
  const swapped = { kid: k1.entry.secret as string, secret: 'k1' };
  await assert.rejects(loadSigningAuthority([swapped]), (error: unknown) => {
    assert.ok(error instanceof SvcConfigurationError);
    assert.match(error.message, /key 0: its kid must be/);
    assert.equal(error.message.includes(String(k1.privateJwk.d)), false, 'no private scalar');
    return true;
  });
});

test('keys that are not P-256 private keys are refused', async () => {
  const { k1, k2 } = await testKeys();
  const p384 = await crypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-384' }, true, [
    'sign',
    'verify',
  ]) as CryptoKeyPair;
  const p384Jwk = await crypto.subtle.exportKey('jwk', p384.privateKey);
  await assertConfigRefused(loadSigningAuthority([{ kid: 'k1', secret: p384Jwk }]), /P-256/);
  await assertConfigRefused(
    loadSigningAuthority([{ kid: 'k1', secret: k1.publicJwk as JsonWebKey }]),
    /public key/,
  );
  await assertConfigRefused(
    loadSigningAuthority([{ kid: 'k1', secret: { ...k1.privateJwk, d: k2.privateJwk.d } }]),
    /does not match|not a valid P-256 private key/,
  );
  await assertConfigRefused(
    loadSigningAuthority([{ kid: 'k1', secret: { ...k1.privateJwk, alg: 'ES384' } }]),
    /alg/,
  );
  await assertConfigRefused(
    loadSigningAuthority([{
      kid: 'k1',
      secret: { ...k1.privateJwk, d: b64url(new Uint8Array(8)) },
    }]),
    /32 bytes/,
  );
  await assertConfigRefused(
    loadSigningAuthority([{
      kid: 'k1',
      secret: '-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----',
    }]),
    /PKCS#8/,
  );
});

test("a kid that disagrees with the JWK's own kid is refused", async () => {
  const { k1 } = await testKeys();
  await assertConfigRefused(
    loadSigningAuthority([{ kid: 'k7', secret: k1.entry.secret }]),
    /own kid "k1" disagrees/,
  );
});

test('signingAuthorityFromOption imports once per distinct configuration', async () => {
  const { k1, k2 } = await testKeys();
  let calls = 0;
  const option = (env: unknown) => {
    calls++;
    return (env as { rotated: boolean }).rotated ? [k2.entry, k1.entry] : [k1.entry, k2.entry];
  };
  const first = await signingAuthorityFromOption(option, { rotated: false });
  const again = await signingAuthorityFromOption(option, { rotated: false });
  assert.equal(again, first, 'same content, same authority: no re-import per request');
  const rotated = await signingAuthorityFromOption(option, { rotated: true });
  assert.notEqual(rotated, first);
  assert.equal(rotated.signer.kid, 'k2');
  assert.equal(calls, 3, 'the option is evaluated per call; only the import is cached');
  const fromList = await signingAuthorityFromOption([k1.entry, k2.entry], undefined);
  assert.equal(fromList, first, 'a list with the same content shares the authority');
  await assertConfigRefused(signingAuthorityFromOption('keys' as never, {}), /signingKeys/);
  await assertConfigRefused(signingAuthorityFromOption(async () => [], {}), /at least one/);
});

test('a signingKeys(env) function that never answers fails closed within its bound', async () => {
  const started = Date.now();
  const error = await signingAuthorityFromOption(() => new Promise(() => {}), {}, 50).then(
    () => assert.fail('resolved'),
    (failure: unknown) => failure,
  );
  assert.deepEqual(svcErrorInfo(error), {
    code: 'internal',
    status: 500,
    retryable: false,
    reason: 'signing_keys_unavailable',
  });
  assert.ok(Date.now() - started < 1_000);
  assert.equal(SIGNING_KEYS_TIMEOUT_MS, 5000);
  // One that answers at once is not timed at all.
  const keys = await testKeys();
  const authority = await signingAuthorityFromOption(() => [keys.k1.entry], {}, 1);
  assert.equal(authority.signer.kid, keys.k1.entry.kid);
});
