// Proofs of possession that verified are remembered, so a caller repeating one (a proof per
// session, a batch per call) costs no signature check. From the attacker's side: a remembered
// proof is still refused once stale, answers only the token, key, service and ability it was
// made for, and the memory is bounded.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { calculateJwkThumbprint } from 'jose';
import { encodeBase64UrlText } from '../../src/core/base64url.ts';
import { svcErrorInfo } from '../../src/core/errors.ts';
import { jwkCapabilityProofSigner } from '../../src/caller/proof-signer.ts';
import { verifyCapabilityProof } from '../../src/service/proof-verify.ts';
import { VerifiedProofCache } from '../../src/service/verified-proof-cache.ts';

async function callerKey() {
  const pair = await crypto.subtle.generateKey(
    { name: 'ECDSA', namedCurve: 'P-256' },
    true,
    ['sign', 'verify'],
  ) as CryptoKeyPair;
  const { kty, crv, x, y, d } = await crypto.subtle.exportKey('jwk', pair.privateKey);
  const publicJwk = { kty: kty!, crv: crv!, x: x!, y: y! };
  return { privateJwk: { ...publicJwk, d: d! }, jkt: await calculateJwkThumbprint(publicJwk) };
}

/** A token-shaped string bound to `jkt` (the proof binds its hash; its signature is not read). */
function boundToken(jkt: string, jti: string): string {
  const header = encodeBase64UrlText(JSON.stringify({ alg: 'ES256', typ: 'svc-capability+jwt' }));
  const payload = encodeBase64UrlText(JSON.stringify({ cnf: { jkt }, jti }));
  return `${header}.${payload}.c2ln`;
}

/** A proof for `svc-a.echo` with `token`, signed by `key` at `now()` (the clock by default). */
function echoProof(
  key: Awaited<ReturnType<typeof callerKey>>,
  token: string,
  now?: () => number,
): Promise<string> {
  return jwkCapabilityProofSigner({ privateJwk: key.privateJwk, ...(now ? { now } : {}) })({
    token,
    targetServiceId: 'svc-a',
    abilityId: 'svc-a.echo',
  });
}

async function reasonOf(promise: Promise<unknown>): Promise<string | undefined> {
  const error = await promise.then(() => assert.fail('accepted'), (caught: unknown) => caught);
  assert.equal(svcErrorInfo(error).status, 401);
  return svcErrorInfo(error).reason;
}

test('a remembered proof is refused once stale, and a replay after that stays refused', async () => {
  const key = await callerKey();
  const signedAt = Date.now();
  const token = boundToken(key.jkt, 'stale');
  const proof = await echoProof(key, token, () => signedAt);
  const expected = { token, jkt: key.jkt, audience: 'svc-a', abilityId: 'svc-a.echo' };
  for (const offsetMs of [0, 30_000, 89_000]) {
    await verifyCapabilityProof(proof, { ...expected, now: () => signedAt + offsetMs });
  }
  // 60 s of freshness plus 30 s of skew: past that the remembered verification does not help.
  const stale = () => signedAt + 92_000;
  assert.equal(
    await reasonOf(verifyCapabilityProof(proof, { ...expected, now: stale })),
    'proof_not_fresh',
  );
  assert.equal(
    await reasonOf(verifyCapabilityProof(proof, { ...expected, now: stale })),
    'proof_not_fresh',
  );
  // A proof from the future is refused whether or not it was seen before.
  const early = () => signedAt - 60_000;
  assert.equal(
    await reasonOf(verifyCapabilityProof(proof, { ...expected, now: early })),
    'proof_not_fresh',
  );
});

test('a remembered proof answers only the token, key, service and ability it was verified for', async () => {
  const key = await callerKey();
  const other = await callerKey();
  const token = boundToken(key.jkt, 'first');
  const proof = await echoProof(key, token);
  const expected = { token, jkt: key.jkt, audience: 'svc-a', abilityId: 'svc-a.echo' };
  await verifyCapabilityProof(proof, expected);
  await verifyCapabilityProof(proof, expected);
  const substitutions: [Partial<typeof expected>, string][] = [
    [{ token: boundToken(key.jkt, 'second') }, 'proof_token_mismatch'],
    [{ jkt: other.jkt }, 'proof_key_mismatch'],
    [{ audience: 'svc-c' }, 'proof_audience_mismatch'],
    [{ abilityId: 'svc-a.other' }, 'proof_ability_mismatch'],
  ];
  for (const [change, reason] of substitutions) {
    assert.equal(await reasonOf(verifyCapabilityProof(proof, { ...expected, ...change })), reason);
  }
  // The refusals did not evict or poison what verified: the original still passes.
  await verifyCapabilityProof(proof, expected);
});

test('a proof that failed is never remembered: it fails the same way every time', async () => {
  const key = await callerKey();
  const token = boundToken(key.jkt, 'fails');
  const proof = await echoProof(key, token);
  const wrongAbility = { token, jkt: key.jkt, audience: 'svc-a', abilityId: 'svc-a.admin' };
  for (let i = 0; i < 3; i++) {
    assert.equal(
      await reasonOf(verifyCapabilityProof(proof, wrongAbility)),
      'proof_ability_mismatch',
    );
  }
  const tampered = `${proof.slice(0, -4)}AAAA`;
  const expected = { ...wrongAbility, abilityId: 'svc-a.echo' };
  for (let i = 0; i < 2; i++) {
    assert.equal(await reasonOf(verifyCapabilityProof(tampered, expected)), 'proof_invalid');
  }
});

test('the proof cache is bounded: the oldest proof leaves first', () => {
  const cache = new VerifiedProofCache(2);
  const entry = (token: string) => ({
    token,
    jkt: 'j',
    audience: 'svc-a',
    abilityId: 'svc-a.echo',
    freshness: { iat: 0, jti: token },
  });
  const expected = (token: string) => ({
    token,
    jkt: 'j',
    audience: 'svc-a',
    abilityId: 'svc-a.echo',
  });
  for (const name of ['p1', 'p2', 'p3']) cache.set(name, entry(`t-${name}`));
  assert.equal(cache.size, 2);
  assert.equal(cache.match('p1', expected('t-p1')), undefined);
  assert.ok(cache.match('p2', expected('t-p2')));
  assert.ok(cache.match('p3', expected('t-p3')));
  // A different expectation never matches, whatever the proof string.
  assert.equal(cache.match('p3', expected('t-p2')), undefined);
  for (let i = 0; i < 1000; i++) cache.set(`flood-${i}`, entry(`t-${i}`));
  assert.equal(cache.size, 2);
});
