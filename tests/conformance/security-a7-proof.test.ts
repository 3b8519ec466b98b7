// Security checklist A7 (proof of possession) end to end: tokens bound by the real plane to
// jc1's keys, proofs presented with `authenticate(token, proof)` at the real services. The proof
// format is DESIGN.md's: compact JWS `{ alg: ES256, typ: svc-pop+jwt, jwk }` over
// `{ ath, aud, ab, iat, jti }`, fresh for 60 s plus 30 s of skew.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { encodeBase64Url, encodeBase64UrlText } from '../../src/core/base64url.ts';
import type { ProofSigner } from '../../src/caller/ability-session.ts';
import { jwkCapabilityProofSigner } from '../../src/caller/proof-signer.ts';
import { tokenHashForProof } from '../../src/service/proof-verify.ts';
import {
  assertRefusal,
  craftedProof,
  createPlaneDeployment,
  decodeJws,
  forgedToken,
  harnessThumbprint,
  jwkTokenRequest,
  type PlaneDeployment,
  sleep,
  tokenBody,
} from './plane-fixture.ts';

type Report = { identity: Record<string, unknown> };

async function boundToken(
  fx: PlaneDeployment,
  target: 'svc-a' | 'svc-c' = 'svc-a',
  key = fx.keys.K1,
): Promise<string> {
  const response = await fx.send(
    await jwkTokenRequest(
      tokenBody({
        callerServiceId: 'svc-jwk',
        targetServiceId: target,
        scopes: [`${target}.read`],
      }),
      { key },
    ),
  );
  assert.equal(response.status, 200);
  return response.body.token;
}

/** A session presenting `token` with exactly `proof` (whatever it is). */
function presenting(fx: PlaneDeployment, abilityId: string, token: string, proof: unknown) {
  return fx.session(abilityId, {
    token,
    proveTokenPossession: (() => Promise.resolve(proof)) as ProofSigner,
  });
}

async function assertProofRefused(
  fx: PlaneDeployment,
  abilityId: string,
  token: string,
  proof: unknown,
  reason?: string,
): Promise<void> {
  const method = abilityId === 'svc-a.other' ? 'ping' : 'whoami';
  const factories = fx.count('factories', abilityId);
  using session = presenting(fx, abilityId, token, proof);
  await assertRefusal(session[method]({}), {
    code: 'capability_auth',
    status: 401,
    retryable: false,
    ...(reason !== undefined ? { reason } : {}),
  });
  assert.equal(fx.count('factories', abilityId), factories, 'no handler ran');
}

async function stillHealthy(fx: PlaneDeployment, token: string): Promise<void> {
  using session = presenting(
    fx,
    'svc-a.echo',
    token,
    await craftedProof({ token, key: fx.keys.K1 }),
  );
  assert.ok(((await session.whoami({})) as Report).identity.confirmation);
}

test('POP-01 a bound token without a proof is refused', async () => {
  const fx = await createPlaneDeployment();
  await assertProofRefused(fx, 'svc-a.echo', await boundToken(fx), undefined, 'proof_required');
});

test('POP-02 a valid proof for this token, service and ability passes', async () => {
  const fx = await createPlaneDeployment();
  const token = await boundToken(fx);
  using session = presenting(
    fx,
    'svc-a.echo',
    token,
    await craftedProof({ token, key: fx.keys.K1 }),
  );
  const { identity } = await session.whoami({}) as Report;
  const jkt = await harnessThumbprint(fx.keys.K1.publicJwk);
  assert.deepEqual(decodeJws(token).claims.cnf, { jkt });
  assert.deepEqual(identity.confirmation, { jkt });
});

test('POP-03 a proof by another key is refused', async () => {
  const fx = await createPlaneDeployment();
  const token = await boundToken(fx);
  const attackerOwn = await craftedProof({ token, key: fx.keys.attacker });
  await assertProofRefused(fx, 'svc-a.echo', token, attackerOwn, 'proof_key_mismatch');
  const borrowedKey = await craftedProof({ token, key: fx.keys.K1, signWith: fx.keys.attacker });
  await assertProofRefused(fx, 'svc-a.echo', token, borrowedKey);
  await stillHealthy(fx, token);
});

test('POP-04 a proof made for another token is refused', async () => {
  const fx = await createPlaneDeployment();
  const first = await boundToken(fx);
  const second = await boundToken(fx);
  assert.notEqual(first, second);
  const proof = await craftedProof({ token: first, key: fx.keys.K1 });
  await assertProofRefused(fx, 'svc-a.echo', second, proof, 'proof_token_mismatch');
});

test('POP-05 a proof made for svc-a is refused at svc-c', async () => {
  const fx = await createPlaneDeployment();
  const svcAToken = await boundToken(fx, 'svc-a');
  const svcCToken = await boundToken(fx, 'svc-c');
  const reused = await craftedProof({ token: svcAToken, key: fx.keys.K1 });
  await assertProofRefused(fx, 'svc-c.echo', svcCToken, reused);
  const retargeted = await craftedProof({
    token: svcCToken,
    key: fx.keys.K1,
    audience: 'svc-a',
    abilityId: 'svc-c.echo',
  });
  await assertProofRefused(fx, 'svc-c.echo', svcCToken, retargeted, 'proof_audience_mismatch');
});

test('POP-06 a proof made for svc-a.echo is refused at svc-a.other', async () => {
  const fx = await createPlaneDeployment();
  const token = await boundToken(fx);
  const proof = await craftedProof({ token, key: fx.keys.K1, abilityId: 'svc-a.echo' });
  await assertProofRefused(fx, 'svc-a.other', token, proof, 'proof_ability_mismatch');
});

test('POP-07 stale or future proofs are refused', async () => {
  const fx = await createPlaneDeployment();
  const token = await boundToken(fx);
  const now = Math.floor(Date.now() / 1000);
  for (const claims of [{ iat: now - 200, exp: now - 140 }, { iat: now + 300 }]) {
    const proof = await craftedProof({ token, key: fx.keys.K1, claims });
    await assertProofRefused(fx, 'svc-a.echo', token, proof, 'proof_not_fresh');
  }
});

test('POP-08 a proof key carrying the private member d is refused', async () => {
  const fx = await createPlaneDeployment();
  const token = await boundToken(fx);
  const { kty, crv, x, y, d } = fx.keys.K1.privateJwk;
  const proof = await craftedProof({
    token,
    key: fx.keys.K1,
    header: { jwk: { kty, crv, x, y, d } },
  });
  await assertProofRefused(fx, 'svc-a.echo', token, proof, 'proof_invalid');
});

test('POP (advisory, explicit typing) a proof typed as anything but svc-pop+jwt is refused', async () => {
  const fx = await createPlaneDeployment();
  const token = await boundToken(fx);
  // A caller assertion or a capability token signed by the same key is never a proof.
  for (const typ of [undefined, 'JWT', 'svc-client+jwt', 'svc-capability+jwt', 'SVC-POP+JWT']) {
    const proof = await craftedProof({ token, key: fx.keys.K1, header: { typ } });
    await assertProofRefused(fx, 'svc-a.echo', token, proof, 'proof_invalid');
  }
});

test('POP-09 alg none and HS256 proofs are refused', async () => {
  const fx = await createPlaneDeployment();
  const token = await boundToken(fx);
  const jkt = await harnessThumbprint(fx.keys.K1.publicJwk);
  const { kty, crv, x, y } = fx.keys.K1.publicJwk;
  const claims = {
    ath: await tokenHashForProof(token),
    aud: 'svc-a',
    ab: 'svc-a.echo',
    iat: Math.floor(Date.now() / 1000),
    jti: crypto.randomUUID(),
  };
  const build = async (alg: string, secret?: string) => {
    const input = `${
      encodeBase64UrlText(JSON.stringify({ alg, typ: 'svc-pop+jwt', jwk: { kty, crv, x, y } }))
    }.${encodeBase64UrlText(JSON.stringify(claims))}`;
    if (secret === undefined) return `${input}.`;
    const key = await crypto.subtle.importKey(
      'raw',
      new TextEncoder().encode(secret),
      { name: 'HMAC', hash: 'SHA-256' },
      false,
      ['sign'],
    );
    const mac = await crypto.subtle.sign('HMAC', key, new TextEncoder().encode(input));
    return `${input}.${encodeBase64Url(new Uint8Array(mac))}`;
  };
  for (
    const proof of [
      await build('none'),
      await build('HS256', jkt),
      await build('HS256', JSON.stringify({ kty, crv, x, y })),
    ]
  ) {
    await assertProofRefused(fx, 'svc-a.echo', token, proof);
  }
});

test('POP-10 a proof that is not a string, or is oversized, is refused', async () => {
  const fx = await createPlaneDeployment();
  const token = await boundToken(fx);
  for (const proof of [42, {}, 'p'.repeat(1024 * 1024)]) {
    await assertProofRefused(fx, 'svc-a.echo', token, proof);
  }
  await stillHealthy(fx, token);
});

test('POP-11 a fresh proof does not extend an expired bound token', async () => {
  const fx = await createPlaneDeployment();
  const now = Math.floor(Date.now() / 1000);
  const expired = await forgedToken({
    sub: 'svc-jwk',
    scp: ['svc-a.read'],
    cnf: { jkt: await harnessThumbprint(fx.keys.K1.publicJwk) },
    iat: now - 300,
    nbf: now - 300,
    exp: now - 120,
  });
  const proof = await craftedProof({ token: expired, key: fx.keys.K1 });
  await assertProofRefused(fx, 'svc-a.echo', expired, proof, 'token_expired');
});

test('POP-12 a proof is session-scoped: the open session outlives it, a new session does not', async () => {
  const fx = await createPlaneDeployment();
  const token = await boundToken(fx);
  // The shipped signer with its clock 89 s behind: the proof is one second from going stale, so
  // the 60 + 30 s window passes during this test instead of in real minutes.
  const signer = jwkCapabilityProofSigner({
    privateJwk: fx.keys.K1.privateJwk,
    now: () => Date.now() - 89_000,
  });
  const proofs: string[] = [];
  const recording: ProofSigner = async (input) => {
    const proof = await signer(input);
    proofs.push(proof);
    return proof;
  };
  using open = fx.session('svc-a.echo', {
    token,
    proveTokenPossession: recording,
    transport: 'websocket',
  });
  assert.ok(((await open.whoami({})) as Report).identity.confirmation);
  await sleep(2100);
  const later = await open.whoami({}) as Report;
  assert.ok(later.identity.confirmation, 'the open session keeps serving');
  assert.equal(proofs.length, 1);
  using reused = fx.session('svc-a.echo', {
    token,
    proveTokenPossession: () => Promise.resolve(proofs[0]),
    transport: 'websocket',
  });
  await assertRefusal(reused.whoami({}), { status: 401, reason: 'proof_not_fresh' });
});

test('POP-13 an HMAC-issued token needs no proof', async () => {
  const fx = await createPlaneDeployment();
  using session = fx.session('svc-a.echo');
  const { identity } = await session.whoami({}) as Report;
  assert.equal(identity.serviceId, 'svc-caller');
  assert.equal('confirmation' in identity, false);
});

test('POP (malformed key) a proof whose jwk coordinate is wrapped in an array is a typed 401', async () => {
  // WebCrypto reads `["<x>"]` as `"<x>"`, so such a proof verifies under the bound key; it must
  // still be refused as a malformed proof, never fail as an internal error.
  const fx = await createPlaneDeployment();
  const token = await boundToken(fx);
  const { kty, crv, x, y } = fx.keys.K1.publicJwk;
  for (const jwk of [{ kty, crv, x: [x], y }, { kty, crv, x, y: [y] }, { kty, crv, x: 1, y }]) {
    const proof = await craftedProof({ token, key: fx.keys.K1, header: { jwk } });
    await assertProofRefused(fx, 'svc-a.echo', token, proof, 'proof_invalid');
  }
  await stillHealthy(fx, token);
});
