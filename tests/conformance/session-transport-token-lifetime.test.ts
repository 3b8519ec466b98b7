// "A token is valid until it expires or its signing key stops being published" (States), and
// Signing-key rotation r8 ("all outstanding tokens signed with it fail"), for a session transport,
// where one authentication serves many calls: the service checks the token again on every call,
// and the caller authenticates again on the same connection with each renewed token (renewed in
// the background from 5 s before expiry), and after a refused authentication.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { svcErrorInfo } from '../../src/core/errors.ts';
import { abilitySession } from '../../src/caller/ability-session.ts';
import { websocketRpc } from '../../src/caller/transports/websocket.ts';
import { memoryWebSocketFactory } from '../../src/testing/mod.ts';
import {
  assertRefusal,
  createPlaneDeployment,
  forgedToken,
  type PlaneDeployment,
  sleep,
} from './plane-fixture.ts';

type Report = { identity: { tokenId: string } };
type Echo = { whoami(input: object): Promise<Report> };

const WHOAMI = 'svc-a.echo#whoami';

/** A WebSocket session with svc-a.echo, its tokens from `requestToken`. */
function echoSession(fx: PlaneDeployment, requestToken: () => Promise<string>) {
  const sockets = memoryWebSocketFactory(fx.serviceFetch('svc-a'));
  const session = abilitySession<Echo>({
    abilityId: 'svc-a.echo',
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    requestToken,
    transport: websocketRpc('ws://svc-a.internal/rpc/svc-a.echo', {
      createWebSocket: sockets.createWebSocket,
    }),
  });
  return { session, sockets };
}

/** A token for svc-caller minted in process; `target` svc-a unless told otherwise. */
async function mint(fx: PlaneDeployment, ttlSeconds?: number, target = 'svc-a') {
  const { token } = await fx.plane.issueCapabilityToken({
    callerServiceId: 'svc-caller',
    targetServiceId: target,
    scopes: [`${target}.read`],
    callerAccess: 'service',
    ...(ttlSeconds !== undefined ? { ttlSeconds } : {}),
  });
  return token;
}

/**
 * An echo session whose requester mints tokens with the given lifetimes in turn (the last one
 * for every later token), recording each.
 */
function renewingSession(fx: PlaneDeployment, ...ttlSeconds: number[]) {
  const issued: string[] = [];
  const opened = echoSession(fx, async () => {
    const token = await mint(fx, ttlSeconds[Math.min(issued.length, ttlSeconds.length - 1)]);
    issued.push(token);
    return token;
  });
  return { ...opened, issued };
}

test('States: an open WebSocket session refuses calls once its token has expired', async () => {
  const fx = await createPlaneDeployment();
  const now = Math.floor(Date.now() / 1000);
  // Expired 27 s ago: inside the 30 s skew for 2 s at least, outside it within 4 s.
  const exp = now - 27;
  const token = await forgedToken({ iat: now - 100, nbf: now - 100, exp });
  using session = fx.session('svc-a.echo', { token, transport: 'websocket' });
  await session.whoami({});
  const served = fx.count('calls', WHOAMI);
  for (let waited = 0; Date.now() / 1000 <= exp + 30 && waited < 5000; waited += 100) {
    await sleep(100);
  }
  await assertRefusal(session.whoami({}), { status: 401, reason: 'token_expired' });
  assert.equal(fx.count('calls', WHOAMI), served, 'the handler never ran for the refused call');
});

test('Rotation r8: an open WebSocket session refuses calls once its signing key is removed', async () => {
  const fx = await createPlaneDeployment();
  const token = await forgedToken({}, { key: fx.keys.k1 });
  using session = fx.session('svc-a.echo', { token, transport: 'websocket' });
  await session.whoami({});
  const served = fx.count('calls', WHOAMI);
  await fx.redeploy(['k2']);
  // The service's JWKS cache (0.3 s in the fixture) must expire before the key is gone for it.
  await sleep(800);
  await assertRefusal(session.whoami({}), {
    status: 401,
    reason: 'unknown_capability_key_id',
  });
  assert.equal(fx.count('calls', WHOAMI), served, 'the handler never ran for the refused call');
});

test('States: a WebSocket session authenticates again on the same connection before its token expires', async () => {
  const fx = await createPlaneDeployment();
  // A 6 s token first: the session renews 5 s before expiry, so 0 to 1 s after the mint. Then a
  // 60 s token, used until long after the test.
  const { session: opened, sockets, issued } = renewingSession(fx, 6, 60);
  using session = opened;
  const first = await session.whoami({});
  await sleep(1100);
  // The first call due for renewal starts it in the background and uses the still-valid token;
  // once the new token is in, the next call authenticates with it.
  const due = await session.whoami({});
  assert.equal(due.identity.tokenId, first.identity.tokenId, 'the valid token served meanwhile');
  let renewed = due;
  for (let i = 0; i < 50 && renewed.identity.tokenId === first.identity.tokenId; i++) {
    await sleep(10);
    renewed = await session.whoami({});
  }
  assert.equal(issued.length, 2, 'a second token was requested');
  assert.notEqual(renewed.identity.tokenId, first.identity.tokenId, 'the call used the new token');
  assert.equal(sockets.connections.length, 1, 'on the same connection');
  const again = await session.whoami({});
  assert.equal(again.identity.tokenId, renewed.identity.tokenId);
});

test('States: a refused authentication does not stop a WebSocket session for good', async () => {
  const fx = await createPlaneDeployment();
  let refuse = true;
  // First a token for another audience (refused at authenticate), then a good one.
  const { session: opened, sockets } = echoSession(fx, () => {
    const token = mint(fx, undefined, refuse ? 'svc-b' : 'svc-a');
    refuse = false;
    return token;
  });
  using session = opened;
  const refused = await session.whoami({}).then(() => undefined, (error) => svcErrorInfo(error));
  assert.equal(refused?.status, 401, 'the refusal itself reaches the caller');
  const report = await session.whoami({});
  assert.ok(report.identity.tokenId, 'the next call authenticates again and succeeds');
  assert.equal(sockets.connections.length, 1, 'on the same connection');
});

test('States: a WebSocket session whose connection broke opens a new one on the next call', async () => {
  const fx = await createPlaneDeployment();
  const { session: opened, sockets } = renewingSession(fx, 60);
  using session = opened;
  await session.whoami({});
  sockets.connections[0].drop();
  // A call racing the close may fail with it; within a few calls one succeeds again.
  let report: Report | undefined;
  for (let attempt = 0; attempt < 3 && report === undefined; attempt++) {
    report = await session.whoami({}).catch(() => undefined);
  }
  assert.ok(report?.identity.tokenId, 'a call succeeds after the connection broke');
  assert.equal(sockets.connections.length, 2, 'on a second connection');
});
