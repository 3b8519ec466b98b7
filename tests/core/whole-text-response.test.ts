import assert from 'node:assert/strict';
import { test } from 'node:test';
import { untouchedWholeText, wholeTextResponse } from '../../src/core/whole-text-response.ts';

const INIT = { headers: { 'Content-Type': 'text/plain; charset=utf-8' } };

test('a whole-text response is an ordinary response whose body is the text', async () => {
  const response = wholeTextResponse('a\nb', INIT);
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('content-type'), 'text/plain; charset=utf-8');
  assert.equal(untouchedWholeText(response), 'a\nb');
  assert.equal(await response.text(), 'a\nb');
});

test('once its body is read, locked or rebuilt, a whole-text response offers no text', async () => {
  const read = wholeTextResponse('read', INIT);
  await read.text();
  assert.equal(untouchedWholeText(read), undefined);

  const locked = wholeTextResponse('locked', INIT);
  const reader = locked.body!.getReader();
  assert.equal(untouchedWholeText(locked), undefined);
  await reader.cancel();

  const original = wholeTextResponse('original', INIT);
  const rebuilt = new Response(original.body, original);
  assert.equal(untouchedWholeText(rebuilt), undefined);
  assert.equal(await rebuilt.text(), 'original');

  assert.equal(untouchedWholeText(new Response('plain')), undefined);
});
