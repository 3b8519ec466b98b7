import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_SVC_TIMEOUT_MS, parseTimeoutBudget } from '../../src/core/deadline.ts';
import { abilitySession } from '../../src/caller/ability-session.ts';
import { httpBatchRpc } from '../../src/caller/transports/http-batch.ts';
import {
  applyMetadataHeaders,
  withMetadataQuery,
} from '../../src/caller/transports/outbound-metadata.ts';
import { FAKE_TOKEN, fakeRpcEndpoint, newFakeRecord } from '../support/fake-main.ts';

test('every metadata item maps to its header', () => {
  const headers = applyMetadataHeaders(new Headers(), {
    requestId: 'rid-1',
    timeoutMs: 1234,
    idempotencyKey: 'key_1-=',
    connInfo: '{"address":"192.0.2.1"}',
  });
  assert.deepEqual(Object.fromEntries(headers), {
    'x-request-id': 'rid-1',
    'x-svc-timeout': '1234',
    'x-svc-idempotency-key': 'key_1-=',
    'x-svc-conn-info': '{"address":"192.0.2.1"}',
  });
});

test('every metadata item maps to its query parameter, replacing one already there', () => {
  const url = withMetadataQuery(new URL('wss://svc.example/rpc/a.b?timeout=99999&keep=1'), {
    requestId: 'rid-2',
    timeoutMs: 500,
    idempotencyKey: 'k',
    connInfo: '{"port":443}',
  });
  assert.equal(url.searchParams.get('request_id'), 'rid-2');
  assert.equal(url.searchParams.getAll('timeout').join(), '500');
  assert.equal(url.searchParams.get('idempotency_key'), 'k');
  assert.equal(url.searchParams.get('conn_info'), '{"port":443}');
  assert.equal(url.searchParams.get('keep'), '1');
});

test('budgets go out as positive whole milliseconds; a spent or absurd budget is not sent', () => {
  const budget = (timeoutMs: number) =>
    applyMetadataHeaders(new Headers(), { timeoutMs }).get('x-svc-timeout');
  assert.equal(budget(0.4), '1');
  assert.equal(budget(99.9), '99');
  assert.equal(budget(0), null);
  assert.equal(budget(-5), null);
  assert.equal(budget(Number.NaN), null);
  assert.equal(budget(Infinity), null);
});

test('a budget past MAX_SVC_TIMEOUT_MS goes out clamped, never in exponent notation', () => {
  const budget = (timeoutMs: number) =>
    applyMetadataHeaders(new Headers(), { timeoutMs }).get('x-svc-timeout');
  assert.equal(budget(MAX_SVC_TIMEOUT_MS), String(MAX_SVC_TIMEOUT_MS));
  for (const timeoutMs of [MAX_SVC_TIMEOUT_MS + 1, 2 ** 40, 1e21, 1e300]) {
    const sent = budget(timeoutMs);
    assert.equal(sent, String(MAX_SVC_TIMEOUT_MS), String(timeoutMs));
    // What the receiving service reads back from the header.
    assert.equal(parseTimeoutBudget(sent), MAX_SVC_TIMEOUT_MS, String(timeoutMs));
  }
  const url = withMetadataQuery(new URL('wss://svc.example/rpc/a.b'), { timeoutMs: 1e21 });
  assert.equal(url.searchParams.get('timeout'), String(MAX_SVC_TIMEOUT_MS));
});

test('invalid request ids, keys and connection info are dropped, not sent', () => {
  const headers = applyMetadataHeaders(new Headers(), {
    requestId: 'has space',
    idempotencyKey: 'ключ',
    connInfo: 'line\nbreak',
  });
  assert.deepEqual([...headers.keys()], []);
});

test('HTTP-batch: the budget is per call and shrinks by the time spent obtaining the token', async () => {
  const record = newFakeRecord();
  const endpoint = fakeRpcEndpoint(record);
  let first = true;
  const session = abilitySession<{ echo(input: { v: number }): { v: number } }>({
    abilityId: 'fake.echo',
    callerServiceId: 'caller',
    targetServiceId: 'fake',
    scopes: ['read'],
    timeoutMs: 2_000,
    requestToken: async () => {
      if (first) {
        first = false;
        await new Promise((resolve) => setTimeout(resolve, 150));
      }
      return FAKE_TOKEN;
    },
    transport: httpBatchRpc(endpoint.fetch),
  });
  await session.echo({ v: 1 });
  await new Promise((resolve) => setTimeout(resolve, 150));
  await session.echo({ v: 2 });
  const budgets = record.sessions.map((s) => Number(s.headers['x-svc-timeout']));
  assert.equal(budgets.length, 2);
  assert.ok(budgets[0] <= 2_000 - 140, `first batch carried ${budgets[0]}`);
  assert.ok(budgets[1] > 2_000 - 100, `second batch carried ${budgets[1]}`);
});
