// A service adopts a propagated request id from the `X-Request-Id` header or, where a client
// cannot set headers, the `request_id` query parameter; the header wins; anything else gets a
// fresh UUID. Both the Hono routes (discovery) and the direct RPC route answer alike.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createService, SERVICE_DISCOVERY_PATH } from '../../src/service/service.ts';
import { createTestTokenIssuer } from '../../src/testing/test-token-issuer.ts';
import { echoAbility } from '../support/ability-fixtures.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

async function service() {
  const tokens = await createTestTokenIssuer();
  return createService({
    id: 'svc-a',
    title: 'Service A',
    version: '1',
    auth: tokens.auth,
    abilities: [echoAbility().ability],
    logger: false,
  });
}

const ORIGIN = 'https://svc-a.internal';
const RPC_PATH = '/rpc/svc-a.echo';

function requestsTo(path: string, url: string, headers: HeadersInit = {}): Request {
  return path === RPC_PATH
    ? new Request(`${ORIGIN}${url}`, { method: 'POST', headers, body: '' })
    : new Request(`${ORIGIN}${url}`, { headers });
}

for (const path of [SERVICE_DISCOVERY_PATH, RPC_PATH]) {
  test(`${path}: the request id comes from the query when no header carries one`, async () => {
    const svc = await service();
    const response = await svc.fetch(requestsTo(path, `${path}?request_id=from-query-1`));
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('X-Request-Id'), 'from-query-1');
  });

  test(`${path}: the header wins over the query`, async () => {
    const svc = await service();
    const response = await svc.fetch(
      requestsTo(path, `${path}?request_id=from-query-2`, { 'X-Request-Id': 'from-header-2' }),
    );
    assert.equal(response.headers.get('X-Request-Id'), 'from-header-2');
  });

  test(`${path}: without either, or with a query that carries none, the id is fresh`, async () => {
    const svc = await service();
    for (const url of [path, `${path}?other=1`, `${path}?request_id=`]) {
      const response = await svc.fetch(requestsTo(path, url));
      assert.match(response.headers.get('X-Request-Id') ?? '', UUID, url);
    }
  });
}
