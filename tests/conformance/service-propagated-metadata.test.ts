// Contract: Propagated request metadata, caller side. A caller session writes the request id,
// connection info, deadline budget and idempotency key on each channel the contract names, and
// never writes anything invalid or the token itself.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SVC_CONN_INFO_QUERY_PARAM } from '../../src/core/conn-info.ts';
import { SVC_TIMEOUT_QUERY_PARAM } from '../../src/core/deadline.ts';
import { SVC_REQUEST_ID_QUERY_PARAM } from '../../src/core/request-id.ts';
import { cloudflareServiceBindingRpc } from '../../src/caller/transports/http-batch.ts';
import { createFixture } from './fixture.ts';

const CONN_INFO = JSON.stringify({ address: '198.51.100.4', addressType: 'IPv4', port: 4433 });
const METADATA = {
  requestId: 'req-propagated',
  timeoutMs: 5000,
  idempotencyKey: 'idem-1=',
  connInfo: CONN_INFO,
};

test('Propagated metadata: HTTP-batch writes X-Request-Id, X-Svc-Conn-Info, X-Svc-Timeout, X-Svc-Idempotency-Key', async () => {
  const fx = await createFixture();
  const token = await fx.tokenFor('svc-a', ['svc-a.read']);
  const batch = fx.httpBatch('svc-a');
  using session = fx.session('svc-a.echo', { token, transport: batch.transport, ...METADATA });
  const report = (await session.whoami({})) as Record<string, unknown>;
  const headers = batch.exchanges[0].request.headers;
  assert.equal(headers.get('x-request-id'), 'req-propagated');
  assert.equal(headers.get('x-svc-conn-info'), CONN_INFO);
  assert.equal(headers.get('x-svc-idempotency-key'), 'idem-1=');
  const budget = Number(headers.get('x-svc-timeout'));
  assert.ok(Number.isInteger(budget) && budget > 4000 && budget <= 5000, String(budget));
  // The service read them from the same channel.
  assert.equal(report.requestId, 'req-propagated');
  assert.equal(report.idempotencyKey, 'idem-1=');
  // The token rides inside the session only.
  assert.equal(batch.exchanges[0].request.url.includes(token), false);
  headers.forEach((value) => assert.equal(value.includes(token), false));
});

test('Propagated metadata: WebSocket writes request_id, conn_info, timeout, idempotency_key in the URL', async () => {
  const fx = await createFixture();
  const token = await fx.tokenFor('svc-a', ['svc-a.read']);
  const socket = fx.webSocket('svc-a.echo');
  using session = fx.session('svc-a.echo', { token, transport: socket.transport, ...METADATA });
  const report = (await session.whoami({})) as Record<string, unknown>;
  assert.equal(socket.connections.length, 1);
  const url = new URL(socket.connections[0].url);
  assert.equal(url.pathname, '/rpc/svc-a.echo');
  assert.equal(url.searchParams.get(SVC_REQUEST_ID_QUERY_PARAM), 'req-propagated');
  assert.equal(SVC_REQUEST_ID_QUERY_PARAM, 'request_id');
  assert.equal(url.searchParams.get(SVC_CONN_INFO_QUERY_PARAM), CONN_INFO);
  assert.equal(SVC_CONN_INFO_QUERY_PARAM, 'conn_info');
  const budget = Number(url.searchParams.get(SVC_TIMEOUT_QUERY_PARAM));
  assert.equal(SVC_TIMEOUT_QUERY_PARAM, 'timeout');
  assert.ok(Number.isInteger(budget) && budget > 4000 && budget <= 5000, String(budget));
  assert.equal(url.searchParams.get('idempotency_key'), 'idem-1=');
  assert.deepEqual([...url.searchParams.keys()].sort(), [
    'conn_info',
    'idempotency_key',
    'request_id',
    'timeout',
  ]);
  assert.equal(url.href.includes(token), false);
  assert.equal(report.requestId, 'req-propagated');
  assert.equal(report.idempotencyKey, 'idem-1=');
});

test('Propagated metadata: the service-binding transport uses the HTTP-batch headers', async () => {
  const fx = await createFixture();
  const seen: Request[] = [];
  const binding = {
    fetch(request: Request) {
      seen.push(request.clone());
      return fx.services['svc-a'].fetch(request);
    },
  };
  using session = fx.session('svc-a.echo', {
    transport: cloudflareServiceBindingRpc(binding),
    ...METADATA,
  });
  await session.whoami({});
  assert.equal(new URL(seen[0].url).pathname, '/rpc/svc-a.echo');
  assert.equal(seen[0].headers.get('x-request-id'), 'req-propagated');
  assert.equal(seen[0].headers.get('x-svc-conn-info'), CONN_INFO);
  assert.equal(seen[0].headers.get('x-svc-idempotency-key'), 'idem-1=');
  assert.ok(Number(seen[0].headers.get('x-svc-timeout')) > 4000);
});

test('Propagated metadata: each batch carries what is left of its call budget, in whole ms', async () => {
  const fx = await createFixture();
  const token = await fx.tokenFor('svc-a', ['svc-a.read']);
  const batch = fx.httpBatch('svc-a');
  using session = fx.session('svc-a.echo', { token, transport: batch.transport, timeoutMs: 2500 });
  await session.whoami({});
  await session.sleep({ ms: 50 });
  const budgets = batch.exchanges.map((exchange) =>
    Number(exchange.request.headers.get('x-svc-timeout'))
  );
  // Per call over HTTP-batch: each call starts from its own full budget, rounded down.
  for (const budget of budgets) {
    assert.ok(Number.isInteger(budget) && budget > 2000 && budget <= 2500, String(budget));
  }
  // Time spent obtaining the token is spent from the budget before it is forwarded.
  const slowBatch = fx.httpBatch('svc-a');
  using slow = fx.session('svc-a.echo', {
    requester: async () => (await new Promise((resolve) => setTimeout(resolve, 300)), token),
    transport: slowBatch.transport,
    timeoutMs: 2500,
  });
  await slow.whoami({});
  const forwarded = Number(slowBatch.exchanges[0].request.headers.get('x-svc-timeout'));
  assert.ok(forwarded > 1500 && forwarded <= 2200, String(forwarded));
});

test('Propagated metadata: invalid values are never sent', async () => {
  const fx = await createFixture();
  const token = await fx.tokenFor('svc-a', ['svc-a.read']);
  const batch = fx.httpBatch('svc-a');
  using session = fx.session('svc-a.echo', {
    token,
    transport: batch.transport,
    requestId: 'has space',
    idempotencyKey: 'a:b',
    connInfo: 'line\nbreak',
  });
  const report = (await session.whoami({})) as Record<string, unknown>;
  const headers = batch.exchanges[0].request.headers;
  assert.equal(headers.get('x-svc-idempotency-key'), null);
  assert.equal(headers.get('x-svc-conn-info'), null);
  assert.equal(headers.get('x-svc-timeout'), null);
  assert.notEqual(headers.get('x-request-id'), 'has space');
  assert.equal(report.idempotencyKey, null);
  const socket = fx.webSocket('svc-a.echo');
  using overSocket = fx.session('svc-a.echo', {
    token,
    transport: socket.transport,
    requestId: 'bad\r\nid',
    idempotencyKey: 'k'.repeat(256),
  });
  await overSocket.whoami({});
  assert.deepEqual([...new URL(socket.connections[0].url).searchParams.keys()], []);
});
