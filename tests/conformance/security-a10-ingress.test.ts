// Security checklist A10: ingress. svc-b accepts only tokens whose signed `spb` names the plane;
// forwarded connection info reaches handlers only there, and only on brokered tokens.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ConnInfo } from '../../src/core/conn-info.ts';
import { assertRefusal, createFixture, PLANE_ID } from './fixture.ts';
import { createPlaneDeployment, decodeJws, FIXTURE_CONN_INFO } from './plane-fixture.ts';

interface Report {
  identity: Record<string, unknown>;
  connInfo: ConnInfo | null;
}

const LOOPBACK: ConnInfo = {
  remote: { address: '127.0.0.1', addressType: 'IPv4', port: 50123, transport: 'tcp' },
};

const INGRESS_REFUSAL = { code: 'capability_auth', status: 403, retryable: false } as const;

test('ING-01 svc-b refuses an HMAC-issued token (no spb) before the handler', async () => {
  const fx = await createFixture();
  using session = fx.session('svc-b.echo', { scopes: ['svc-b.read'] });
  await assertRefusal(session.whoami({}), { ...INGRESS_REFUSAL, reason: 'ingress_required' });
  assert.equal(fx.count('factories', 'svc-b.echo'), 0);
});

test('ING-02 svc-b refuses a token brokered by another plane (spb evil-plane)', async () => {
  const fx = await createFixture();
  const token = await fx.forgeToken(
    fx.baselineClaims({ aud: 'svc-b', scp: ['svc-b.read'], spb: 'evil-plane' }),
  );
  using session = fx.session('svc-b.echo', { token });
  await assertRefusal(session.whoami({}), { ...INGRESS_REFUSAL, reason: 'ingress_required' });
  assert.equal(fx.count('factories', 'svc-b.echo'), 0);
});

test('ING-03 control: svc-b through the plane gets a brokered token and the conn info', async () => {
  const fx = await createFixture();
  using session = fx.plane.abilitySession<{ whoami(input: unknown): Report }>({
    abilityId: 'svc-b.echo',
    targetServiceId: 'svc-b',
    scopes: ['svc-b.read'],
    caller: { id: 'alice', kind: 'user', orgId: 'org-1', principalKind: 'api_key' },
    connInfo: LOOPBACK,
  });
  const report = await session.whoami({});
  assert.equal(report.identity.brokerServiceId, PLANE_ID);
  assert.equal(report.identity.callerAccess, 'plane');
  assert.deepEqual(report.connInfo, LOOPBACK);
});

test('ING-04 svc-a (no ingress) drops forwarded conn info on HTTP-batch and WebSocket', async () => {
  const fx = await createFixture();
  const json = JSON.stringify(LOOPBACK.remote);
  {
    const batch = fx.httpBatch('svc-a', { headers: { 'X-Svc-Conn-Info': json } });
    using session = fx.session('svc-a.echo', { transport: batch.transport });
    const report = (await session.whoami({})) as Report;
    assert.equal(report.connInfo, null);
    assert.equal(batch.exchanges[0].request.headers.get('x-svc-conn-info'), json);
  }
  {
    // Even a brokered token does not make svc-a trust it: svc-a has no ingress.
    const token = await fx.forgeToken(fx.baselineClaims({ spb: PLANE_ID }));
    const socket = fx.webSocket('svc-a.echo', { query: { conn_info: json } });
    using session = fx.session('svc-a.echo', { token, transport: socket.transport });
    const report = (await session.whoami({})) as Report;
    assert.equal(report.connInfo, null);
    assert.equal(report.identity.brokerServiceId, PLANE_ID);
    assert.equal(new URL(socket.connections[0].url).searchParams.get('conn_info'), json);
  }
});

test('ING-05 svc-b refuses a delegated token that was not brokered', async () => {
  const fx = await createFixture();
  const issued = await fx.plane.issueCapabilityToken({
    callerServiceId: PLANE_ID,
    targetServiceId: 'svc-b',
    scopes: ['svc-b.read'],
    callerAccess: 'plane',
    subject: { id: 'alice' },
  });
  assert.equal(issued.claims.spb, undefined);
  using session = fx.session('svc-b.echo', { token: issued.token });
  await assertRefusal(session.whoami({}), { ...INGRESS_REFUSAL, reason: 'ingress_required' });
  assert.equal(fx.count('factories', 'svc-b.echo'), 0);
});

test('ING-06 control: svc-b advertises ingress and the plane picks the brokered path', async () => {
  const fx = await createFixture();
  assert.deepEqual(fx.services['svc-b'].discovery().ingress, {
    required: true,
    brokerServiceId: PLANE_ID,
  });
  assert.equal(fx.services['svc-a'].discovery().ingress, undefined);
  // No caller: a plane-class call under the plane's own id, still brokered for svc-b.
  using session = fx.plane.abilitySession<{ whoami(input: unknown): Report }>({
    abilityId: 'svc-b.echo',
    targetServiceId: 'svc-b',
    scopes: ['svc-b.read'],
  });
  const report = await session.whoami({});
  assert.equal(report.identity.serviceId, PLANE_ID);
  assert.equal(report.identity.brokerServiceId, PLANE_ID);
  assert.equal(report.connInfo, null);
  assert.equal(fx.count('calls', 'svc-b.echo#whoami'), 1);
});

test('ING-03 (REST) control: svc-b through REST gets a brokered token and the loopback conn info', async () => {
  const fx = await createPlaneDeployment();
  const response = await fx.rest('GET', '/svc-b/whoami', { bearer: 't-alice' });
  assert.equal(response.status, 200);
  const report = response.body as Report;
  assert.equal(report.identity.brokerServiceId, PLANE_ID);
  assert.deepEqual(report.connInfo, FIXTURE_CONN_INFO);
  assert.equal(fx.count('calls', 'svc-b.echo#whoami'), 1);
});

test('ING-06 (REST) control: svc-b advertises ingress and REST calls take the brokered path automatically', async () => {
  const fx = await createPlaneDeployment();
  for (const bearer of ['t-alice', 't-robot']) {
    const response = await fx.rest('GET', '/svc-b/whoami', { bearer });
    assert.equal(response.status, 200, bearer);
  }
  const claims = fx.tokensAt('svc-b').map((token) => decodeJws(token).claims);
  assert.equal(claims.length, 2);
  for (const claim of claims) assert.equal(claim.spb, PLANE_ID);
  // svc-a has no ingress: its REST tokens stay unbrokered.
  await fx.rest('GET', '/whoami', { bearer: 't-alice' });
  assert.equal(decodeJws(fx.tokensAt('svc-a')[0]).claims.spb, undefined);
});
