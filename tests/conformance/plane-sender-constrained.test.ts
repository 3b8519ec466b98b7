// Contract "Sender-constrained tokens": JWK callers always get `cnf.jkt`, HMAC callers and
// brokered calls never; a bound token needs a proof at the service (session-scoped, fresh,
// one token / service / ability); unbound tokens cost no signature; a prover holding another
// key refuses locally.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ProofSigner } from '../../src/caller/ability-session.ts';
import { jwkCapabilityProofSigner } from '../../src/caller/proof-signer.ts';
import {
  assertRefusal,
  createPlaneDeployment,
  decodeJws,
  harnessThumbprint,
  jwkTokenRequest,
  type PlaneDeployment,
  tokenBody,
} from './plane-fixture.ts';

type Report = { identity: Record<string, unknown> };

function countingProver(inner: ProofSigner) {
  const counter = { calls: 0 };
  const prover: ProofSigner = (input) => {
    counter.calls++;
    return inner(input);
  };
  return { prover, counter };
}

async function jwkToken(
  fx: PlaneDeployment,
  key = fx.keys.K1,
  body = tokenBody({ callerServiceId: 'svc-jwk' }),
) {
  const response = await fx.send(await jwkTokenRequest(body, { key }));
  assert.equal(response.status, 200);
  return response.body.token as string;
}

test('Sender-constrained: a JWK caller always gets cnf.jkt of the key that authenticated', async () => {
  const fx = await createPlaneDeployment();
  for (const key of [fx.keys.K1, fx.keys.K2]) {
    const { claims } = decodeJws(await jwkToken(fx, key));
    assert.deepEqual(claims.cnf, { jkt: await harnessThumbprint(key.publicJwk) }, key.kid);
  }
  const viaRequester = await fx.jwkRequester(fx.keys.K2)({
    callerServiceId: 'svc-jwk',
    targetServiceId: 'svc-c',
    abilityId: 'svc-c.echo',
    scopes: ['svc-c.read'],
  });
  assert.deepEqual(decodeJws(viaRequester).claims.cnf, {
    jkt: await harnessThumbprint(fx.keys.K2.publicJwk),
  });
});

test('Sender-constrained: HMAC and brokered in-process tokens are not bound', async () => {
  const fx = await createPlaneDeployment();
  const hmac = await fx.hmacRequester()({
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    abilityId: 'svc-a.echo',
    scopes: ['svc-a.read'],
  });
  assert.equal('cnf' in decodeJws(hmac).claims, false);
  using brokered = fx.plane.abilitySession({
    abilityId: 'svc-b.echo',
    targetServiceId: 'svc-b',
    scopes: ['svc-b.read'],
    caller: { id: 'alice', kind: 'user' },
  });
  const { identity } = await brokered.whoami({}) as Report;
  assert.equal('confirmation' in identity, false);
  assert.equal('cnf' in decodeJws(fx.tokensAt('svc-b')[0]).claims, false);
});

test('Sender-constrained r1: a bound token needs a proof; the shipped requester supplies it', async () => {
  const fx = await createPlaneDeployment();
  using automatic = fx.session('svc-a.echo', {
    requester: fx.jwkRequester() as never,
    callerServiceId: 'svc-jwk',
  });
  const { identity } = await automatic.whoami({}) as Report;
  assert.deepEqual(identity.confirmation, { jkt: await harnessThumbprint(fx.keys.K1.publicJwk) });
  const token = await jwkToken(fx);
  using explicit = fx.session('svc-a.echo', {
    token,
    proveTokenPossession: jwkCapabilityProofSigner({ privateJwk: fx.keys.K1.privateJwk }),
  });
  assert.ok(((await explicit.whoami({})) as Report).identity.confirmation);
  const factories = fx.count('factories', 'svc-a.echo');
  using withoutProver = fx.session('svc-a.echo', {
    token,
    proveTokenPossession: undefined as never,
    requester: Object.assign(async () => token, {}) as never,
  });
  await assertRefusal(withoutProver.whoami({}), { reason: 'proof_signer_missing' });
  using withoutProof = fx.session('svc-a.echo', {
    token,
    proveTokenPossession: (() => Promise.resolve(undefined)) as unknown as ProofSigner,
  });
  await assertRefusal(withoutProof.whoami({}), {
    code: 'capability_auth',
    status: 401,
    reason: 'proof_required',
  });
  assert.equal(fx.count('factories', 'svc-a.echo'), factories, 'no handler without a proof');
});

test('Sender-constrained r2: a proof is fresh for 60 s plus skew and bound to one ability', async () => {
  const fx = await createPlaneDeployment();
  const token = await jwkToken(fx);
  const proverAt = (offsetMs: number) =>
    jwkCapabilityProofSigner({
      privateJwk: fx.keys.K1.privateJwk,
      now: () => Date.now() + offsetMs,
    });
  using recent = fx.session('svc-a.echo', { token, proveTokenPossession: proverAt(-80_000) });
  assert.ok(((await recent.whoami({})) as Report).identity.confirmation);
  using stale = fx.session('svc-a.echo', { token, proveTokenPossession: proverAt(-100_000) });
  await assertRefusal(stale.whoami({}), { status: 401, reason: 'proof_not_fresh' });
  const forEcho = await proverAt(0)({ token, targetServiceId: 'svc-a', abilityId: 'svc-a.echo' });
  using other = fx.session('svc-a.other', {
    token,
    proveTokenPossession: () => Promise.resolve(forEcho),
  });
  await assertRefusal(other.ping({}), { status: 401, reason: 'proof_ability_mismatch' });
});

test('Sender-constrained r2: the proof is signed once, at session open', async () => {
  const fx = await createPlaneDeployment();
  const { prover, counter } = countingProver(
    jwkCapabilityProofSigner({ privateJwk: fx.keys.K1.privateJwk }),
  );
  using session = fx.session('svc-a.echo', {
    requester: fx.jwkRequester() as never,
    callerServiceId: 'svc-jwk',
    proveTokenPossession: prover,
    transport: 'websocket',
  });
  for (let i = 0; i < 3; i++) await session.whoami({});
  assert.equal(counter.calls, 1);
  assert.equal(fx.rpcRequests('svc-a').length, 1, 'one socket carried every call');
  assert.equal(fx.count('calls', 'svc-a.echo#whoami'), 3);
});

test('Sender-constrained r3: unbound tokens cost no signature', async () => {
  const fx = await createPlaneDeployment();
  const { prover, counter } = countingProver(
    jwkCapabilityProofSigner({ privateJwk: fx.keys.K1.privateJwk }),
  );
  using session = fx.session('svc-a.echo', { proveTokenPossession: prover });
  await session.whoami({});
  await session.whoami({});
  assert.equal(counter.calls, 0);
  using brokered = fx.plane.abilitySession({
    abilityId: 'svc-b.echo',
    targetServiceId: 'svc-b',
    scopes: ['svc-b.read'],
  });
  await brokered.whoami({});
  assert.equal(counter.calls, 0);
});

test('Sender-constrained r4: during caller key rotation a mismatching prover raises locally', async () => {
  const fx = await createPlaneDeployment();
  const k2Token = await jwkToken(fx, fx.keys.K2);
  const k1Prover = jwkCapabilityProofSigner({ privateJwk: fx.keys.K1.privateJwk });
  await assertRefusal(
    k1Prover({ token: k2Token, targetServiceId: 'svc-a', abilityId: 'svc-a.echo' }),
    { code: 'capability_auth', reason: 'proof_key_mismatch' },
  );
  using session = fx.session('svc-a.echo', { token: k2Token, proveTokenPossession: k1Prover });
  await assertRefusal(session.whoami({}), { reason: 'proof_key_mismatch' });
  assert.equal(fx.rpcRequests('svc-a').length, 0, 'no proof was emitted, nothing was sent');
  using rotated = fx.session('svc-a.echo', {
    requester: fx.jwkRequester(fx.keys.K2) as never,
    callerServiceId: 'svc-jwk',
  });
  const { identity } = await rotated.whoami({}) as Report;
  assert.deepEqual(identity.confirmation, { jkt: await harnessThumbprint(fx.keys.K2.publicJwk) });
});
