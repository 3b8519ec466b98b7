import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  filterIdempotencyKey,
  MAX_IDEMPOTENCY_KEY_LENGTH,
  SVC_IDEMPOTENCY_KEY_HEADER,
  SVC_IDEMPOTENCY_KEY_QUERY_PARAM,
} from '../../src/core/idempotency.ts';

test('idempotency key channel names match the propagation table', () => {
  assert.equal(SVC_IDEMPOTENCY_KEY_HEADER, 'X-Svc-Idempotency-Key');
  assert.equal(SVC_IDEMPOTENCY_KEY_QUERY_PARAM, 'idempotency_key');
  assert.equal(MAX_IDEMPOTENCY_KEY_LENGTH, 255);
});

test('IDEM-01 a valid key passes unchanged from a header and a query parameter', () => {
  assert.equal(filterIdempotencyKey('retry-2026_01='), 'retry-2026_01=');
  const headers = new Headers({ [SVC_IDEMPOTENCY_KEY_HEADER]: 'retry-2026_01=' });
  assert.equal(filterIdempotencyKey(headers.get(SVC_IDEMPOTENCY_KEY_HEADER)), 'retry-2026_01=');
  const url = new URL('wss://svc.example/rpc/a?idempotency_key=retry-2026_01%3D');
  assert.equal(
    filterIdempotencyKey(url.searchParams.get(SVC_IDEMPOTENCY_KEY_QUERY_PARAM)),
    'retry-2026_01=',
  );
});

test('IDEM-02 length 255 is kept and length 256 is dropped', () => {
  const key255 = 'k'.repeat(255);
  assert.equal(filterIdempotencyKey(key255), key255);
  assert.equal(filterIdempotencyKey('k'.repeat(256)), undefined);
  assert.equal(filterIdempotencyKey('a'), 'a');
});

test('IDEM-03 character set filter', () => {
  for (const key of ['a b', 'a:b', 'a/b', 'a.b', 'a,b', 'a;b', 'ключ', '']) {
    assert.equal(filterIdempotencyKey(key), undefined, `key ${JSON.stringify(key)}`);
  }
  const url = new URL('wss://svc.example/rpc/a?idempotency_key=a%0Ab');
  assert.equal(url.searchParams.get(SVC_IDEMPOTENCY_KEY_QUERY_PARAM), 'a\nb');
  assert.equal(
    filterIdempotencyKey(url.searchParams.get(SVC_IDEMPOTENCY_KEY_QUERY_PARAM)),
    undefined,
  );
});

test('filterIdempotencyKey drops control characters, non-ASCII word characters and non-strings', () => {
  for (
    const key of ['a\r\nb', 'a\tb', 'abc\n', '\u0000', 'é', 'a\u00a0b', 'Ａ', '١٢٣', 'a+b', 'a%b']
  ) {
    assert.equal(filterIdempotencyKey(key), undefined, `key ${JSON.stringify(key)}`);
  }
  for (const value of [undefined, null, 42, ['abc'], { key: 'abc' }, true]) {
    assert.equal(filterIdempotencyKey(value), undefined);
  }
});

test('filterIdempotencyKey accepts every allowed character class', () => {
  const all = 'ABCXYZabcxyz0189_-=';
  assert.equal(filterIdempotencyKey(all), all);
  assert.equal(filterIdempotencyKey('==='), '===');
  assert.equal(filterIdempotencyKey('-'), '-');
});
