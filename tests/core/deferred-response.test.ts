import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  deferredTextResponse,
  markTakesDeferredResponses,
  takesDeferredResponses,
} from '../../src/core/deferred-response.ts';
import { untouchedWholeText, wholeTextResponse } from '../../src/core/whole-text-body.ts';

const INIT = { status: 201, headers: { 'Content-Type': 'text/plain; charset=utf-8' } };

test('a deferred response reads as the response it stands for', async () => {
  const response = deferredTextResponse('a\nb é', INIT);
  assert.ok(response instanceof Response);
  assert.equal(response.status, 201);
  assert.equal(response.ok, true);
  assert.equal(response.bodyUsed, false);
  assert.equal(response.headers.get('content-type'), 'text/plain; charset=utf-8');
  assert.equal(response.type, 'default');
  assert.equal(await response.clone().text(), 'a\nb é');
  assert.equal(
    new TextDecoder().decode(await response.clone().arrayBuffer()),
    'a\nb é',
  );
  assert.equal(await response.text(), 'a\nb é');
  assert.equal(response.bodyUsed, true);
  await assert.rejects(response.text(), TypeError);
});

test('a deferred response streams its body and parses as JSON', async () => {
  const streamed = deferredTextResponse('{"n":1}', { headers: {} });
  const reader = streamed.body!.getReader();
  const chunks: Uint8Array[] = [];
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
  }
  assert.equal(new TextDecoder().decode(chunks[0]), '{"n":1}');
  assert.equal(streamed.bodyUsed, true);
  assert.deepEqual(await deferredTextResponse('{"n":1}', { headers: {} }).json(), { n: 1 });
});

test('headers changed before the body is read are the built response headers', async () => {
  const response = deferredTextResponse('x', INIT);
  const early = response.headers;
  early.set('X-Request-Id', 'req-1');
  early.append('Set-Cookie', 'a=1');
  const copy = new Response(response.body, response);
  assert.equal(copy.status, 201);
  assert.equal(copy.headers.get('x-request-id'), 'req-1');
  assert.deepEqual(copy.headers.getSetCookie(), ['a=1']);
  assert.equal(await copy.text(), 'x');
  // Once built, `headers` is the built response's own.
  assert.equal(response.headers.get('x-request-id'), 'req-1');
  assert.equal(response.status, 201);
});

test('a non-2xx deferred response is not ok, and keeps the status text it was given', () => {
  const response = deferredTextResponse('no', { status: 503, headers: {} });
  assert.equal(response.status, 503);
  assert.equal(response.ok, false);
  assert.equal(response.statusText, new Response('no', { status: 503 }).statusText);
  const named = deferredTextResponse('no', { status: 503, statusText: 'Resting', headers: {} });
  assert.equal(named.statusText, 'Resting');
});

test('only an env marked by a serving helper takes deferred responses', () => {
  assert.equal(takesDeferredResponses(undefined), false);
  assert.equal(takesDeferredResponses(null), false);
  assert.equal(takesDeferredResponses('env'), false);
  assert.equal(takesDeferredResponses({ takesDeferredResponses: true }), false);
  const env = markTakesDeferredResponses({ binding: 1 });
  assert.equal(takesDeferredResponses(env), true);
  assert.deepEqual(Object.keys(env), ['binding']);
  // A copy of a marked env (as Hono or a helper spreads it) keeps the mark.
  assert.equal(takesDeferredResponses({ ...env, incoming: {} }), true);
});

test('a whole-text response is deferred only for a marked env', async () => {
  const plain = wholeTextResponse('body', INIT);
  assert.equal(Object.getPrototypeOf(plain), Response.prototype);
  const marked = wholeTextResponse('body', INIT, markTakesDeferredResponses({}));
  assert.notEqual(Object.getPrototypeOf(marked), Response.prototype);
  assert.ok(marked instanceof Response);
  assert.equal(untouchedWholeText(marked), 'body');
  assert.equal(await marked.text(), 'body');
  // Read once, its text is no longer offered to anyone.
  assert.equal(untouchedWholeText(marked), undefined);
});
