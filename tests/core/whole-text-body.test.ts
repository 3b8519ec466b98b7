import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readBoundedText } from '../../src/core/bounded-body.ts';
import {
  untouchedWholeText,
  wholeTextRequest,
  wholeTextResponse,
} from '../../src/core/whole-text-body.ts';

const INIT = { headers: { 'Content-Type': 'text/plain; charset=utf-8' } };

test('a whole-text response is an ordinary response whose body is the text', async () => {
  const response = wholeTextResponse('a\nb', INIT);
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('content-type'), 'text/plain; charset=utf-8');
  assert.equal(untouchedWholeText(response), 'a\nb');
  assert.equal(await response.text(), 'a\nb');
});

test('a whole-text request is an ordinary request whose body is the text', async () => {
  const request = wholeTextRequest('https://svc.internal/rpc/a.b', 'line\nnext', {
    method: 'POST',
    ...INIT,
  });
  assert.equal(request.method, 'POST');
  assert.equal(request.headers.get('content-type'), 'text/plain; charset=utf-8');
  assert.equal(untouchedWholeText(request), 'line\nnext');
  assert.equal(await request.text(), 'line\nnext');
});

test('once its body is read, or rebuilt, a whole-text message offers no text', async () => {
  const read = wholeTextResponse('read', INIT);
  await read.text();
  assert.equal(untouchedWholeText(read), undefined);

  const partly = wholeTextResponse('partly read', INIT);
  const reader = partly.body!.getReader();
  await reader.read();
  assert.equal(untouchedWholeText(partly), undefined);
  await reader.cancel();

  const original = wholeTextResponse('original', INIT);
  const rebuilt = new Response(original.body, original);
  assert.equal(untouchedWholeText(rebuilt), undefined);
  assert.equal(await rebuilt.text(), 'original');

  const request = wholeTextRequest('https://svc.internal/x', 'copied', { method: 'POST' });
  assert.equal(untouchedWholeText(new Request(request)), undefined);

  assert.equal(untouchedWholeText(new Response('plain')), undefined);
  assert.equal(
    untouchedWholeText(new Request('https://svc.internal/x', { method: 'POST', body: 'plain' })),
    undefined,
  );
});

test('a bounded read takes a whole text as it is, bounded by its UTF-8 length', async () => {
  // Four characters, seven bytes: "é" is two bytes, "€" three.
  const text = 'aé€b';
  assert.equal(await readBoundedText(wholeTextResponse(text, INIT), 7), text);
  assert.equal(await readBoundedText(wholeTextResponse(text, INIT), 6), undefined);
  const request = wholeTextRequest('https://svc.internal/x', text, { method: 'POST' });
  assert.equal(await readBoundedText(request, 6), undefined);
  // The same limits as the stream read of the same bytes.
  assert.equal(await readBoundedText(new Response(text), 7), text);
  assert.equal(await readBoundedText(new Response(text), 6), undefined);
});

test('a whole text with a lone surrogate reads as its encoding would: U+FFFD', async () => {
  const text = 'a\uD800b';
  const whole = await readBoundedText(wholeTextResponse(text, INIT), 1024);
  assert.equal(whole, 'a\uFFFDb');
});

test('a whole-text body read already is read through its stream, as any other', async () => {
  const response = wholeTextResponse('gone', INIT);
  await response.text();
  await assert.rejects(readBoundedText(response, 1024), TypeError);
});
