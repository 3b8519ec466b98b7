// DESIGN "Error bodies": every service HTTP error body carries `requestId`, the RPC route's own
// refusals (wrong method, oversized batch) included, and it is the id echoed in `X-Request-Id`.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createFixture } from './fixture.ts';

const RPC_URL = 'https://svc-a.fixture.test/rpc/svc-a.echo';

test('Errors an RPC route refusal carries the request id in its problem body', async () => {
  const fx = await createFixture();
  const svc = fx.services['svc-a'];
  const refusals: [string, number, RequestInit][] = [
    ['GET without an upgrade', 405, { headers: { 'X-Request-Id': 'rid-get' } }],
    ['PUT', 405, { method: 'PUT', body: 'x', headers: { 'X-Request-Id': 'rid-put' } }],
    ['upgrade by POST', 405, {
      method: 'POST',
      body: 'x',
      headers: { 'X-Request-Id': 'rid-post-upgrade', Upgrade: 'websocket' },
    }],
    ['oversized batch', 413, {
      method: 'POST',
      body: 'x',
      headers: { 'X-Request-Id': 'rid-413', 'Content-Length': String(5 * 1024 * 1024) },
    }],
    ['no incoming id', 405, {}],
  ];
  for (const [label, status, init] of refusals) {
    const response = await svc.fetch(new Request(RPC_URL, init));
    assert.equal(response.status, status, label);
    assert.equal(response.headers.get('Content-Type'), 'application/problem+json', label);
    const echoed = response.headers.get('X-Request-Id');
    assert.ok(echoed, label);
    assert.equal((await response.json()).requestId, echoed, label);
  }
  assert.equal(fx.count('factories', 'svc-a.echo'), 0);
});
