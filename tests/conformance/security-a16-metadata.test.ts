// Security checklist A16, service side: forwarded connection info is sanitised field by field,
// and request ids are adopted only when they are safe to echo.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ConnInfo } from '../../src/core/conn-info.ts';
import { createFixture, type Fixture, PLANE_ID } from './fixture.ts';

interface Report {
  connInfo: ConnInfo | null;
  requestId: string | null;
}

/** What svc-b's handler receives for a raw `X-Svc-Conn-Info` value on a brokered token. */
async function connInfoAtSvcB(fx: Fixture, raw: string): Promise<ConnInfo | null> {
  const token = await fx.forgeToken(
    fx.baselineClaims({ aud: 'svc-b', scp: ['svc-b.read'], spb: PLANE_ID }),
  );
  const batch = fx.httpBatch('svc-b', { headers: { 'X-Svc-Conn-Info': raw } });
  using session = fx.session('svc-b.echo', { token, transport: batch.transport });
  return ((await session.whoami({})) as Report).connInfo;
}

const remote = (fields: Record<string, unknown>) =>
  JSON.stringify({
    address: '203.0.113.7',
    addressType: 'IPv4',
    port: 443,
    transport: 'tcp',
    ...fields,
  });

test('META-01 only the four known conn-info fields reach the handler', async () => {
  const fx = await createFixture();
  const connInfo = await connInfoAtSvcB(fx, remote({ evil: 'x' }));
  assert.deepEqual(connInfo, {
    remote: { address: '203.0.113.7', addressType: 'IPv4', port: 443, transport: 'tcp' },
  });
});

test('META-02 an address outside the bounded charset is dropped with its addressType', async () => {
  const fx = await createFixture();
  for (const address of ['1.2.3.4\r\nX: y', 'a b', '<script>', '1'.repeat(300)]) {
    const connInfo = await connInfoAtSvcB(fx, remote({ address }));
    assert.deepEqual(connInfo, { remote: { port: 443, transport: 'tcp' } }, address);
  }
});

test('META-03 out-of-range port, unknown transport and addressType are dropped', async () => {
  const fx = await createFixture();
  for (const port of [70000, -1, 1.5, '443']) {
    assert.deepEqual(
      await connInfoAtSvcB(fx, remote({ port })),
      { remote: { address: '203.0.113.7', addressType: 'IPv4', transport: 'tcp' } },
      JSON.stringify(port),
    );
  }
  assert.deepEqual(await connInfoAtSvcB(fx, remote({ transport: 'quic' })), {
    remote: { address: '203.0.113.7', addressType: 'IPv4', port: 443 },
  });
  assert.deepEqual(await connInfoAtSvcB(fx, remote({ addressType: 'IPv5' })), {
    remote: { address: '203.0.113.7', port: 443, transport: 'tcp' },
  });
});

test('META-04 conn info that is not an object yields none, and the call succeeds', async () => {
  const fx = await createFixture();
  for (const raw of ['[]', '"1.2.3.4"', 'null', '42', '{']) {
    assert.equal(await connInfoAtSvcB(fx, raw), null, raw);
  }
  assert.equal(fx.count('calls', 'svc-b.echo#whoami'), 5);
});

test('META-06 the plane forwards its request id and the service adopts and echoes it', async () => {
  const fx = await createFixture();
  using viaPlane = fx.plane.abilitySession<{ whoami(input: unknown): Report }>({
    abilityId: 'svc-a.echo',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    requestId: 'req-meta-06',
  });
  assert.equal((await viaPlane.whoami({})).requestId, 'req-meta-06');
  const served = fx.events.filter((event) =>
    event.event === 'svc.request.completed' && event.path === '/rpc/svc-a.echo'
  );
  assert.deepEqual(served.map((event) => event.requestId), ['req-meta-06']);

  const batch = fx.httpBatch('svc-a', { headers: { 'X-Request-Id': 'req-direct' } });
  using direct = fx.session('svc-a.echo', { transport: batch.transport });
  assert.equal(((await direct.whoami({})) as Report).requestId, 'req-direct');
  assert.equal(batch.exchanges[0].response.headers.get('x-request-id'), 'req-direct');
});

test('META-06 a hostile request_id on a WebSocket is not adopted and injects nothing', async () => {
  const fx = await createFixture();
  const hostile = 'abc\r\nSet-Cookie: x=1';
  const socket = fx.webSocket('svc-a.echo', { query: { request_id: hostile } });
  using session = fx.session('svc-a.echo', { transport: socket.transport });
  const report = (await session.whoami({})) as Report;
  assert.equal(new URL(socket.connections[0].url).searchParams.get('request_id'), hostile);
  assert.ok(report.requestId !== null && !/[\r\n]/.test(report.requestId), report.requestId ?? '');
  assert.notEqual(report.requestId, hostile);
  const upgrade = socket.upgrades[0];
  assert.equal(upgrade.headers.get('set-cookie'), null);
  const echoed = upgrade.headers.get('x-request-id');
  assert.ok(echoed === null || !/[\r\n]/.test(echoed));
  assert.equal(echoed ?? report.requestId, report.requestId);
});
