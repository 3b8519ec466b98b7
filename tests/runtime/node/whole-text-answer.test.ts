// `serveNode` writes an answer built whole from a string (an HTTP batch's) straight to the
// socket: what reaches the client must be exactly what the response says, headers included.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { serveNode } from '../../../src/adapters/node.ts';
import { wholeTextResponse } from '../../../src/core/whole-text-body.ts';

const BOUND = { timeout: 30_000 };

test(
  'a whole-text answer reaches the client with its status, headers and cookies',
  BOUND,
  async () => {
    const server = await serveNode({
      fetch() {
        const response = wholeTextResponse('line one\nligne deux é', {
          status: 207,
          headers: { 'Content-Type': 'text/plain; charset=utf-8' },
        });
        // What a middleware adds after the route answered.
        response.headers.set('X-Request-Id', 'req-1');
        response.headers.append('Set-Cookie', 'a=1');
        response.headers.append('Set-Cookie', 'b=2');
        return response;
      },
    });
    try {
      const response = await fetch(`${server.url}/rpc`, { method: 'POST', body: 'x' });
      assert.equal(response.status, 207);
      assert.equal(response.headers.get('x-request-id'), 'req-1');
      assert.deepEqual(response.headers.getSetCookie(), ['a=1', 'b=2']);
      assert.equal(response.headers.get('content-type'), 'text/plain; charset=utf-8');
      const text = await response.text();
      assert.equal(text, 'line one\nligne deux é');
      assert.equal(response.headers.get('content-length'), String(Buffer.byteLength(text)));
    } finally {
      await server.close();
    }
  },
);

test('a whole-text answer rebuilt by a middleware is sent from its body', BOUND, async () => {
  const server = await serveNode({
    fetch() {
      const answered = wholeTextResponse('from the route', { headers: { 'X-From': 'route' } });
      return new Response(answered.body, { status: 202, headers: answered.headers });
    },
  });
  try {
    const response = await fetch(`${server.url}/rpc`, { method: 'POST', body: 'x' });
    assert.equal(response.status, 202);
    assert.equal(response.headers.get('x-from'), 'route');
    assert.equal(await response.text(), 'from the route');
  } finally {
    await server.close();
  }
});
