import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  acceptRequestId,
  generateRequestId,
  MAX_REQUEST_ID_LENGTH,
  SVC_REQUEST_ID_HEADER,
  SVC_REQUEST_ID_QUERY_PARAM,
} from '../../src/core/request-id.ts';

test('request id channel names match the propagation table', () => {
  assert.equal(SVC_REQUEST_ID_HEADER, 'X-Request-Id');
  assert.equal(SVC_REQUEST_ID_QUERY_PARAM, 'request_id');
  assert.equal(MAX_REQUEST_ID_LENGTH, 200);
});

test('acceptRequestId adopts visible ASCII ids up to 200 characters', () => {
  assert.equal(acceptRequestId('req-123'), 'req-123');
  const uuid = '3f1c2b9e-8d4a-4f6b-9c1e-2a7d5e8f0b13';
  assert.equal(acceptRequestId(uuid), uuid);
  const visible = '!"#$%&\'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~';
  assert.equal(acceptRequestId(visible), visible);
  assert.equal(acceptRequestId('x'.repeat(200)), 'x'.repeat(200));
});

test('acceptRequestId refuses empty, overlong and non-string ids', () => {
  assert.equal(acceptRequestId(''), undefined);
  assert.equal(acceptRequestId('x'.repeat(201)), undefined);
  for (const value of [undefined, null, 42, ['id'], { id: 'x' }]) {
    assert.equal(acceptRequestId(value), undefined);
  }
});

test('META-06 a request id carrying CR/LF, spaces or control characters is not adopted', () => {
  const url = new URL('wss://svc.example/rpc/a?request_id=abc%0D%0ASet-Cookie:%20x=1');
  const hostile = url.searchParams.get(SVC_REQUEST_ID_QUERY_PARAM);
  assert.equal(hostile, 'abc\r\nSet-Cookie: x=1');
  assert.equal(acceptRequestId(hostile), undefined);
  for (const raw of ['a b', 'a\tb', 'a\nb', 'a\rb', '\u0000', 'a\u007fb', 'ü', 'a\u2028b']) {
    assert.equal(acceptRequestId(raw), undefined, `id ${JSON.stringify(raw)}`);
  }
});

test('generateRequestId returns distinct UUIDs that acceptRequestId adopts', () => {
  const first = generateRequestId();
  const second = generateRequestId();
  assert.match(first, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.notEqual(first, second);
  assert.equal(acceptRequestId(first), first);
});
