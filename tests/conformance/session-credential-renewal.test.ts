// "A token is valid until it expires" (States), from the caller's side: a session renews its
// token before expiry, in the background, and keeps using the valid token it holds while the
// renewal is under way, so a slow, stalled or failing renewal fails no call before the token
// actually expires.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  abilitySession,
  RENEWAL_RETRY_MS,
  type TokenRequester,
} from '../../src/caller/ability-session.ts';
import { httpBatchRpc } from '../../src/caller/transports/http-batch.ts';
import type { RpcTransportFactory } from '../../src/caller/transports/outbound-metadata.ts';
import { createFixture, type Fixture } from './fixture.ts';

type Whoami = { whoami(input: object): Promise<{ identity: { tokenId: string } }> };

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A token for svc-caller to svc-a.echo, minted by the fixture's plane. */
async function mint(fx: Fixture, ttlSeconds: number): Promise<string> {
  const issued = await fx.plane.issueCapabilityToken({
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    callerAccess: 'service',
    ttlSeconds,
  });
  return issued.token;
}

function echoSession(transport: RpcTransportFactory, requestToken: TokenRequester) {
  return abilitySession<Whoami>({
    abilityId: 'svc-a.echo',
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    requestToken,
    transport,
  });
}

/** Calls until the session presents a token other than `first`'s (a renewal answered). */
async function callUntilRenewed(session: Whoami, first: { identity: { tokenId: string } }) {
  let report = first;
  for (let i = 0; i < 20 && report.identity.tokenId === first.identity.tokenId; i++) {
    await delay(10);
    report = await session.whoami({});
  }
  return report;
}

test('States: an HTTP-batch session renews its token before expiry, in the background', async () => {
  const fx = await createFixture();
  let requests = 0;
  // 8 s lifetime: the session renews it from 5 s before expiry, i.e. 2 to 3 s from now (iat is
  // whole seconds), and may use it until it expires.
  const requestToken = () => (requests++, mint(fx, 8));
  using session = echoSession(httpBatchRpc(fx.serviceFetch('svc-a')), requestToken);
  const first = await session.whoami({});
  const again = await session.whoami({});
  assert.equal(requests, 1, 'a fresh token is reused across batches');
  assert.equal(again.identity.tokenId, first.identity.tokenId);
  await delay(3100);
  const due = await session.whoami({});
  assert.equal(requests, 2, 'the first call due for renewal asked for a new token');
  assert.equal(due.identity.tokenId, first.identity.tokenId, 'and went out with the valid one');
  const renewed = await callUntilRenewed(session, first);
  assert.notEqual(renewed.identity.tokenId, first.identity.tokenId, 'later batches use the new');
  assert.equal(requests, 2, 'one renewal served them');
});

for (const kind of ['http-batch', 'websocket'] as const) {
  test(`States (${kind}): a renewal that stalls holds no call while the token in hand is valid`, async () => {
    const fx = await createFixture();
    let requests = 0;
    // The first token lives 6 s, so it is due for renewal within 1 s; the renewal never answers
    // (the plane accepted the connection and went silent).
    const requestToken = () => ++requests === 1 ? mint(fx, 6) : new Promise<string>(() => {});
    const transport = kind === 'websocket'
      ? fx.webSocket('svc-a.echo').transport
      : httpBatchRpc(fx.serviceFetch('svc-a'));
    using session = echoSession(transport, requestToken);
    const first = await session.whoami({});
    await delay(1100);
    for (let i = 0; i < 3; i++) {
      const started = Date.now();
      const report = await session.whoami({});
      assert.ok(Date.now() - started < 1000, `call ${i} waited ${Date.now() - started} ms`);
      assert.equal(report.identity.tokenId, first.identity.tokenId, 'with the token in hand');
    }
    assert.equal(requests, 2, 'one renewal under way, shared by every call');
  });

  test(`States (${kind}): a failed renewal fails no call and a later call renews again`, async () => {
    const fx = await createFixture();
    const lifetimes: (number | 'fail')[] = [6, 'fail', 60];
    let requests = 0;
    const requestToken = () => {
      const lifetime = lifetimes[Math.min(requests++, lifetimes.length - 1)];
      return lifetime === 'fail'
        ? Promise.reject(new Error('plane unavailable'))
        : mint(fx, lifetime);
    };
    const webSocket = kind === 'websocket' ? fx.webSocket('svc-a.echo') : undefined;
    using session = echoSession(
      webSocket?.transport ?? httpBatchRpc(fx.serviceFetch('svc-a')),
      requestToken,
    );
    const first = await session.whoami({});
    await delay(1100);
    // Due for renewal: the renewal fails in the background; the call succeeds with the first
    // token, and so does the next one, which does not ask again at once (the renewal pauses for
    // RENEWAL_RETRY_MS after a failure); a call after the pause renews again.
    assert.equal((await session.whoami({})).identity.tokenId, first.identity.tokenId);
    assert.equal(requests, 2);
    assert.equal((await session.whoami({})).identity.tokenId, first.identity.tokenId);
    assert.equal(requests, 2, 'not asked again at once after the failure');
    await delay(RENEWAL_RETRY_MS + 100);
    assert.equal((await session.whoami({})).identity.tokenId, first.identity.tokenId);
    assert.equal(requests, 3, 'the call after the pause asked again');
    const renewed = await callUntilRenewed(session, first);
    assert.notEqual(renewed.identity.tokenId, first.identity.tokenId, 'and its token is used');
    if (webSocket !== undefined) {
      assert.equal(webSocket.connections.length, 1, 'on the same connection');
    }
  });
}
