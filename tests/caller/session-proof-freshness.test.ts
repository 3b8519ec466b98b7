// A session transport presents a bound token's proof only when it authenticates, which may be
// long after a background renewal brought the token: a proof past its freshness window is never
// presented; the call waits for credentials with a fresh one.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CapabilityAuthError } from '../../src/core/errors.ts';
import {
  abilitySession,
  disposeAbilitySession,
  type TokenRequester,
} from '../../src/caller/ability-session.ts';
import { CAPABILITY_PROOF_FRESHNESS_SECONDS } from '../../src/service/proof-verify.ts';
import { CAPABILITY_TOKEN_CLOCK_SKEW_SECONDS } from '../../src/core/capability-token.ts';
import { websocketRpc } from '../../src/caller/transports/websocket.ts';
import type { RpcMainMeta } from '../../src/service/rpc-serve.ts';
import { memoryWebSocketFactory } from '../../src/testing/mod.ts';
import {
  FakeMain,
  type FakeMainRecord,
  fakeRpcEndpoint,
  newFakeRecord,
  renewableFakeJwt,
} from '../support/fake-main.ts';
import { steppableWallClock } from '../support/wall-clock.ts';

interface FakeApi {
  echo(input: { value: string }): { value: string };
}

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A proof the fake can age: `proof@<epoch ms when signed>`. */
const PROOF_PREFIX = 'proof@';

/**
 * The fake gateway, refusing a proof older than the service's freshness window plus skew, as
 * proof-verify.ts does (`proof_not_fresh`).
 */
class FreshProofMain extends FakeMain {
  override authenticate(token: unknown, proof?: unknown) {
    if (typeof proof === 'string' && proof.startsWith(PROOF_PREFIX)) {
      const ageMs = Date.now() - Number(proof.slice(PROOF_PREFIX.length));
      const windowMs = (CAPABILITY_PROOF_FRESHNESS_SECONDS + CAPABILITY_TOKEN_CLOCK_SKEW_SECONDS) *
        1000;
      if (ageMs > windowMs) {
        throw new CapabilityAuthError(`Proof is ${ageMs} ms old`, { reason: 'proof_not_fresh' });
      }
    }
    return super.authenticate(token, proof);
  }
}

function freshProofEndpoint(record: FakeMainRecord) {
  return fakeRpcEndpoint(record, {
    createMain: (meta: RpcMainMeta) => new FreshProofMain(record, meta),
  });
}

test('WebSocket: a token renewed in the background is never presented with a proof past its freshness window', async () => {
  const clock = steppableWallClock();
  const record = newFakeRecord();
  const sockets = memoryWebSocketFactory(freshProofEndpoint(record).fetch);
  let requests = 0;
  const requestToken: TokenRequester = () => {
    requests++;
    const nowSeconds = Math.floor(Date.now() / 1000);
    // First token: 10 s left. Renewal: the default 120 s lifetime.
    const exp = nowSeconds + (requests === 1 ? 10 : 120);
    return Promise.resolve(renewableFakeJwt({ exp, jti: `t${requests}`, cnf: { jkt: 'k' } }));
  };
  const session = abilitySession<FakeApi>({
    abilityId: 'fake.echo',
    callerServiceId: 'caller',
    targetServiceId: 'fake',
    scopes: ['read'],
    requestToken,
    proveTokenPossession: () => Promise.resolve(`${PROOF_PREFIX}${Date.now()}`),
    transport: websocketRpc('ws://fake.internal/rpc/fake.echo', {
      createWebSocket: sockets.createWebSocket,
    }),
  });
  try {
    assert.deepEqual(await session.echo({ value: 'first' }), { value: 'first' });
    // Within 5 s of expiry: this call starts the renewal in the background (its proof is signed
    // now) and travels with the first token.
    clock.advance(6_000);
    assert.deepEqual(await session.echo({ value: 'renewing' }), { value: 'renewing' });
    await delay(20);
    assert.equal(requests, 2, 'the renewal answered');
    // The session then idles for 100 s: the renewed token is valid for 14 s more, but the proof
    // signed with it is 100 s old when the next call authenticates with it.
    clock.advance(100_000);
    assert.deepEqual(
      await session.echo({ value: 'after idle' }),
      { value: 'after idle' },
      'the call authenticates with a fresh proof',
    );
    assert.equal(requests, 3, 'fresh credentials (and a fresh proof) were asked for');
    // Presented once on the open session, the same credentials need no new proof.
    clock.advance(40_000);
    assert.deepEqual(await session.echo({ value: 'again' }), { value: 'again' });
    assert.equal(requests, 3);
  } finally {
    clock.restore();
    disposeAbilitySession(session);
  }
});
