// Contract "Sender-constrained tokens" r4, end to end: client jc1 has two registered keys (K1,
// K2). A requester bound to K1 caches tokens while the client switches to K2. Each requester's
// tokens stay bound to the key that authenticated them and are proved with that key; a cached
// K1 token paired with the K2 prover is refused locally before anything reaches the service;
// and once K1 is deregistered the K1 requester gets no new tokens while the tokens it already
// holds keep working until they expire (why both keys stay registered until then).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SvcLogEvent } from '../../src/core/logging.ts';
import { jwkServiceClientAuth } from '../../src/plane/caller-auth-jwk.ts';
import { jwkCapabilityProofSigner } from '../../src/caller/proof-signer.ts';
import {
  assertRefusal,
  createPlaneDeployment,
  decodeJws,
  harnessThumbprint,
  type PlaneDeployment,
} from './plane-fixture.ts';

type Report = { identity: Record<string, unknown> };

const ECHO = { callerServiceId: 'svc-jwk' } as const;

async function confirmedKey(
  fx: PlaneDeployment,
  requester: ReturnType<PlaneDeployment['jwkRequester']>,
  abilityId = 'svc-a.echo',
): Promise<unknown> {
  using session = fx.session(abilityId, { requester: requester as never, ...ECHO });
  if (abilityId === 'svc-a.other') {
    assert.deepEqual(await session.ping({}), { pong: true });
    return decodeJws(fx.tokensAt('svc-a').at(-1)!).claims.cnf;
  }
  return ((await session.whoami({})) as Report).identity.confirmation;
}

test('Sender-constrained r4: a K1 requester keeps its cached K1 tokens while the client switches to K2', async () => {
  const fx = await createPlaneDeployment();
  const jkt1 = { jkt: await harnessThumbprint(fx.keys.K1.publicJwk) };
  const jkt2 = { jkt: await harnessThumbprint(fx.keys.K2.publicJwk) };
  const onK1 = fx.jwkRequester(fx.keys.K1);
  assert.deepEqual(await confirmedKey(fx, onK1), jkt1);
  assert.equal(fx.counters.requesterFetches, 1);
  const k1Token = fx.tokensAt('svc-a')[0];

  const onK2 = fx.jwkRequester(fx.keys.K2);
  assert.deepEqual(await confirmedKey(fx, onK2), jkt2, 'the K2 requester never reuses K1 tokens');
  assert.equal(fx.counters.requesterFetches, 2);
  const k2Token = fx.tokensAt('svc-a')[1];
  assert.notEqual(k2Token, k1Token);

  // Both keys are registered: the K1 requester still serves its cached token, proved with K1.
  assert.deepEqual(await confirmedKey(fx, onK1), jkt1);
  assert.equal(fx.counters.requesterFetches, 2, 'served from the K1 cache');
  assert.equal(fx.tokensAt('svc-a')[2], k1Token);
  assert.equal(fx.count('calls', 'svc-a.echo#whoami'), 3);
});

test('Sender-constrained r4: a cached K1 token with the K2 prover is refused locally, nothing sent', async () => {
  const fx = await createPlaneDeployment();
  const onK1 = fx.jwkRequester(fx.keys.K1);
  const onK2 = fx.jwkRequester(fx.keys.K2);
  // Warm both caches so the sessions below fail at the proof, not at the token request.
  await onK1({
    ...ECHO,
    targetServiceId: 'svc-a',
    abilityId: 'svc-a.echo',
    scopes: ['svc-a.read'],
  });
  await onK2({
    ...ECHO,
    targetServiceId: 'svc-a',
    abilityId: 'svc-a.echo',
    scopes: ['svc-a.read'],
  });
  const fetches = fx.counters.requesterFetches;

  const pairs = [
    { requester: onK1, prover: fx.keys.K2, label: 'K1 token, K2 prover' },
    { requester: onK2, prover: fx.keys.K1, label: 'K2 token, K1 prover' },
  ];
  for (const { requester, prover, label } of pairs) {
    using session = fx.session('svc-a.echo', {
      requester: requester as never,
      ...ECHO,
      proveTokenPossession: jwkCapabilityProofSigner({ privateJwk: prover.privateJwk }),
    });
    await assertRefusal(session.whoami({}), {
      code: 'capability_auth',
      status: 401,
      reason: 'proof_key_mismatch',
    }, label);
  }
  assert.equal(fx.counters.requesterFetches, fetches, 'the cached tokens were used');
  assert.equal(fx.rpcRequests('svc-a').length, 0, 'no proof was emitted, nothing was sent');
  assert.equal(fx.count('factories', 'svc-a.echo'), 0);
});

test('Sender-constrained r4: once K1 is deregistered, cached K1 tokens work until expiry but none are issued', async () => {
  const fx = await createPlaneDeployment();
  const jkt1 = { jkt: await harnessThumbprint(fx.keys.K1.publicJwk) };
  const jkt2 = { jkt: await harnessThumbprint(fx.keys.K2.publicJwk) };
  const onK1 = fx.jwkRequester(fx.keys.K1);
  assert.deepEqual(await confirmedKey(fx, onK1), jkt1);

  // The plane now knows jc1 by K2 only; the signing keys are unchanged.
  const authEvents: SvcLogEvent[] = [];
  await fx.redeploy(['k1', 'k2'], {
    authenticateCaller: [
      jwkServiceClientAuth({
        clients: { jc1: { serviceId: 'svc-jwk', keys: [fx.keys.K2.publicJwk] } },
        log: (event) => authEvents.push(event),
      }),
    ],
  });
  const fetches = fx.counters.requesterFetches;

  // The service never asks the plane which caller keys are registered: the cached K1 token and
  // its K1 proof still pass there.
  assert.deepEqual(await confirmedKey(fx, onK1), jkt1);
  assert.equal(fx.counters.requesterFetches, fetches, 'served from the cache');

  // A token the K1 requester does not hold yet is refused by the plane.
  await assertRefusal(
    onK1({ ...ECHO, targetServiceId: 'svc-a', abilityId: 'svc-a.other', scopes: ['svc-a.read'] }),
    { code: 'capability_auth', status: 401 },
  );
  assert.deepEqual(
    authEvents.map((event) => [event.event, (event as { reason?: unknown }).reason]),
    [['svc.caller_auth.jwk_unauthorized', 'unknown_key']],
  );
  using refused = fx.session('svc-a.other', { requester: onK1 as never, ...ECHO });
  await assertRefusal(refused.ping({}), { code: 'capability_auth', status: 401 });
  assert.equal(fx.count('factories', 'svc-a.other'), 0);

  // The client on K2 carries on.
  assert.deepEqual(await confirmedKey(fx, fx.jwkRequester(fx.keys.K2), 'svc-a.other'), jkt2);
  assert.equal(fx.count('calls', 'svc-a.other#ping'), 1);
});
