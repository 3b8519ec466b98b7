// Contract: Ingress and forwarded connection info (r1, r2). Handlers receive `connInfo` only at
// an ingress service and only on a brokered token; it is advisory and never gates access.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ConnInfo } from '../../src/core/conn-info.ts';
import { assertRefusal, createFixture, PLANE_ID } from './fixture.ts';

interface Report {
  connInfo: ConnInfo | null;
  identity: { brokerServiceId?: string };
}

const FORWARDED: ConnInfo = {
  remote: { address: '2001:db8::7', addressType: 'IPv6', port: 8443, transport: 'tcp' },
};
const FORWARDED_JSON = JSON.stringify(FORWARDED.remote);

test('Ingress r1: an ingress service hands brokered callers the forwarded conn info (both transports)', async () => {
  const fx = await createFixture();
  const brokered = await fx.tokenFor('svc-b', ['svc-b.read'], { spb: PLANE_ID });
  using batch = fx.session('svc-b.echo', { token: brokered, connInfo: FORWARDED_JSON });
  assert.deepEqual(((await batch.whoami({})) as Report).connInfo, FORWARDED);
  const socket = fx.webSocket('svc-b.echo');
  using overSocket = fx.session('svc-b.echo', {
    token: brokered,
    connInfo: FORWARDED_JSON,
    transport: socket.transport,
  });
  assert.deepEqual(((await overSocket.whoami({})) as Report).connInfo, FORWARDED);
  assert.equal(new URL(socket.connections[0].url).searchParams.get('conn_info'), FORWARDED_JSON);
});

test('Ingress r1: without ingress, or without a brokered token, conn info is dropped', async () => {
  const fx = await createFixture();
  for (const spb of [undefined, PLANE_ID]) {
    const token = await fx.tokenFor('svc-a', ['svc-a.read'], spb === undefined ? {} : { spb });
    using session = fx.session('svc-a.echo', { token, connInfo: FORWARDED_JSON });
    const report = (await session.whoami({})) as Report;
    assert.equal(report.connInfo, null, `spb ${spb}`);
  }
  // At the ingress service a non-brokered token never gets that far.
  using direct = fx.session('svc-b.echo', { scopes: ['svc-b.read'], connInfo: FORWARDED_JSON });
  await assertRefusal(direct.whoami({}), { code: 'capability_auth', status: 403 });
  assert.equal(fx.count('factories', 'svc-b.echo'), 0);
});

test('Ingress r2: forwarded conn info is advisory and never gates access', async () => {
  const fx = await createFixture();
  const brokered = await fx.tokenFor('svc-b', ['svc-b.read'], { spb: PLANE_ID });
  for (const connInfo of [undefined, '{', '{"address":"<script>"}', '[]']) {
    using session = fx.session('svc-b.echo', {
      token: brokered,
      ...(connInfo !== undefined ? { connInfo } : {}),
    });
    const report = (await session.whoami({})) as Report;
    assert.equal(report.connInfo, null, String(connInfo));
    assert.equal(report.identity.brokerServiceId, PLANE_ID);
  }
  // Nor does it unlock anything: a loopback address beside a foreign broker is still refused.
  const foreign = await fx.tokenFor('svc-b', ['svc-b.read'], { spb: 'other-plane' });
  using refused = fx.session('svc-b.echo', {
    token: foreign,
    connInfo: JSON.stringify({ address: '127.0.0.1', addressType: 'IPv4' }),
  });
  await assertRefusal(refused.whoami({}), { code: 'capability_auth', status: 403 });
  assert.equal(fx.count('calls', 'svc-b.echo#whoami'), 4);
});
