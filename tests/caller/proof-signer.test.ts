/**
 * The proof-of-possession signer, round-tripped through the service's verifier
 * (`proof-verify.ts`), including the proof half of JWKA-13 (caller key rotation).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { capabilityKeyThumbprint } from '../../src/core/capability-token.ts';
import { CapabilityAuthError, SvcConfigurationError } from '../../src/core/errors.ts';
import { jwkCapabilityProofSigner } from '../../src/caller/proof-signer.ts';
import { tokenHashForProof, verifyCapabilityProof } from '../../src/service/proof-verify.ts';
import { signCompactEs256 } from '../../src/caller/token-request-signing.ts';
import {
  assertIssued,
  endpointFixture,
  generateKey,
  requestFrom,
  signedJwkParts,
  tokenClaims,
} from '../support/token-endpoint-fixture.ts';

function decodePart(compact: string, index: 0 | 1): Record<string, unknown> {
  const segment = compact.split('.')[index];
  const padded = segment.replace(/-/g, '+').replace(/_/g, '/');
  const binary = atob(padded + '='.repeat((4 - (padded.length % 4)) % 4));
  return JSON.parse(new TextDecoder().decode(Uint8Array.from(binary, (c) => c.charCodeAt(0))));
}

/** A real bound token from the endpoint, requested by jc1 with the given key. */
async function boundToken(keyName: 'jk1' | 'jk2') {
  const fixture = await endpointFixture();
  const key = fixture.keys[keyName];
  const response = await fixture.handle(requestFrom(await signedJwkParts(fixture, { key })));
  const { body } = await assertIssued(response);
  return {
    fixture,
    token: body.token as string,
    jkt: await capabilityKeyThumbprint(key.publicJwk),
  };
}

test('a proof signed for a bound token verifies at the service (round trip)', async () => {
  const { fixture, token, jkt } = await boundToken('jk1');
  const prove = jwkCapabilityProofSigner({ privateJwk: fixture.keys.jk1.privateJwk });
  const proof = await prove({ token, targetServiceId: 'svc-a', abilityId: 'svc-a.echo' });
  await verifyCapabilityProof(proof, { token, jkt, audience: 'svc-a', abilityId: 'svc-a.echo' });

  const header = decodePart(proof, 0);
  assert.deepEqual(Object.keys(header).sort(), ['alg', 'jwk', 'typ']);
  assert.equal(header.alg, 'ES256');
  assert.equal(header.typ, 'svc-pop+jwt');
  assert.deepEqual(Object.keys(header.jwk as object).sort(), ['crv', 'kty', 'x', 'y']);
  assert.equal(await capabilityKeyThumbprint(header.jwk), jkt);
  const claims = decodePart(proof, 1);
  assert.equal(claims.ath, await tokenHashForProof(token));
  assert.equal(claims.aud, 'svc-a');
  assert.equal(claims.ab, 'svc-a.echo');
  assert.equal(typeof claims.jti, 'string');
  assert.ok(Math.abs((claims.iat as number) - Date.now() / 1000) < 5);
  assert.equal(JSON.stringify(header).includes(String(fixture.keys.jk1.privateJwk.d)), false);
});

test('a proof is bound to one service and one ability', async () => {
  const { fixture, token, jkt } = await boundToken('jk1');
  const prove = jwkCapabilityProofSigner({ privateJwk: fixture.keys.jk1.privateJwk });
  const proof = await prove({ token, targetServiceId: 'svc-a', abilityId: 'svc-a.echo' });
  await assert.rejects(
    verifyCapabilityProof(proof, { token, jkt, audience: 'svc-c', abilityId: 'svc-a.echo' }),
    { reason: 'proof_audience_mismatch' },
  );
  await assert.rejects(
    verifyCapabilityProof(proof, { token, jkt, audience: 'svc-a', abilityId: 'svc-a.other' }),
    { reason: 'proof_ability_mismatch' },
  );
});

test('JWKA-13 (proof) after rotation to K2 the K1 signer refuses locally; a K1 proof is refused', async () => {
  const { fixture, token, jkt } = await boundToken('jk2');
  assert.equal((tokenClaims(token).cnf as { jkt: string }).jkt, jkt);
  const oldSigner = jwkCapabilityProofSigner({ privateJwk: fixture.keys.jk1.privateJwk });
  await assert.rejects(
    oldSigner({ token, targetServiceId: 'svc-a', abilityId: 'svc-a.echo' }),
    (error: unknown) =>
      error instanceof CapabilityAuthError && error.status === 401 &&
      error.reason === 'proof_key_mismatch',
  );
  // A proof made with K1 anyway (bypassing the local check) does not pass the service.
  const k1 = fixture.keys.jk1;
  const forced = await signCompactEs256(
    {
      alg: 'ES256',
      typ: 'svc-pop+jwt',
      jwk: { kty: 'EC', crv: 'P-256', x: k1.publicJwk.x, y: k1.publicJwk.y },
    },
    {
      ath: await tokenHashForProof(token),
      aud: 'svc-a',
      ab: 'svc-a.echo',
      iat: Math.floor(Date.now() / 1000),
      jti: crypto.randomUUID(),
    },
    k1.privateKey,
  );
  await assert.rejects(
    verifyCapabilityProof(forced, { token, jkt, audience: 'svc-a', abilityId: 'svc-a.echo' }),
    { status: 401, reason: 'proof_key_mismatch' },
  );
  const newSigner = jwkCapabilityProofSigner({ privateJwk: fixture.keys.jk2.privateJwk });
  const proof = await newSigner({ token, targetServiceId: 'svc-a', abilityId: 'svc-a.echo' });
  await verifyCapabilityProof(proof, { token, jkt, audience: 'svc-a', abilityId: 'svc-a.echo' });
});

test('an unbound token gets no proof (the signer refuses instead of signing)', async () => {
  const fixture = await endpointFixture();
  const iat = Math.floor(Date.now() / 1000);
  const unbound = await signCompactEs256(
    { alg: 'ES256', kid: 'k1', typ: 'svc-capability+jwt' },
    { iss: 'x', sub: 'svc', aud: 'svc-a', scp: ['s'], jti: 'j', iat, nbf: iat, exp: iat + 60 },
    fixture.keys.k1.privateKey,
  );
  const prove = jwkCapabilityProofSigner({ privateJwk: fixture.keys.jk1.privateJwk });
  await assert.rejects(
    prove({ token: unbound, targetServiceId: 'svc-a', abilityId: 'svc-a.echo' }),
    { reason: 'proof_key_mismatch' },
  );
  await assert.rejects(
    prove({ token: 'not-a-token', targetServiceId: 'svc-a', abilityId: 'svc-a.echo' }),
    { status: 401, reason: 'token_malformed' },
  );
});

test('jwkCapabilityProofSigner refuses a key that is not a private P-256 JWK', async () => {
  const key = await generateKey('k');
  const bad: unknown[] = [
    undefined,
    key.publicJwk,
    { ...key.privateJwk, crv: 'P-384' },
    { ...key.privateJwk, kty: 'RSA' },
    'jwk-text',
  ];
  for (const privateJwk of bad) {
    assert.throws(
      () => jwkCapabilityProofSigner({ privateJwk: privateJwk as JsonWebKey }),
      SvcConfigurationError,
    );
  }
  // A JWK carrying alg/key_ops/kid members still imports.
  const decorated = { ...key.privateJwk, alg: 'ES256', key_ops: ['sign'], kid: 'k', ext: true };
  const prove = jwkCapabilityProofSigner({ privateJwk: decorated });
  await assert.rejects(
    prove({ token: 'a.e30.c', targetServiceId: 's', abilityId: 'a' }),
    { reason: 'proof_key_mismatch' },
  );
});
