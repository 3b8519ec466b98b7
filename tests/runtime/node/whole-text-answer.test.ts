// `serveNode` writes an answer built whole from a string (an HTTP batch's) straight to the
// socket: what reaches the client must be exactly what the response says, headers included.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { serveNode } from '../../../src/adapters/node.ts';
import { wholeTextResponse } from '../../../src/core/whole-text-body.ts';
import { Hono } from 'hono';

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

// Given the helper's env, the answer is deferred: the runtime's `Response` is built only if
// someone reads more than its status and headers.
test('a deferred whole-text answer reaches the client as a built one would', BOUND, async () => {
  const server = await serveNode({
    fetch(_request, env) {
      const response = wholeTextResponse('line one\nligne deux é', {
        status: 207,
        headers: { 'Content-Type': 'text/plain; charset=utf-8' },
      }, env);
      assert.notEqual(Object.getPrototypeOf(response), Response.prototype);
      response.headers.set('X-Request-Id', 'req-2');
      response.headers.append('Set-Cookie', 'a=1');
      return response;
    },
  });
  try {
    const response = await fetch(`${server.url}/rpc`, { method: 'POST', body: 'x' });
    assert.equal(response.status, 207);
    assert.equal(response.headers.get('x-request-id'), 'req-2');
    assert.deepEqual(response.headers.getSetCookie(), ['a=1']);
    const text = await response.text();
    assert.equal(text, 'line one\nligne deux é');
    assert.equal(response.headers.get('content-length'), String(Buffer.byteLength(text)));
  } finally {
    await server.close();
  }
});

test('middleware reading a deferred answer still sends it whole', BOUND, async () => {
  const seen: string[] = [];
  const app = new Hono();
  app.use('*', async (c, next) => {
    await next();
    seen.push(await c.res.clone().text());
    c.res.headers.set('X-Seen', 'yes');
  });
  app.post('/rpc', (c) => wholeTextResponse('from the route', { status: 202 }, c.env));
  const server = await serveNode({ fetch: (request, env) => app.fetch(request, env) });
  try {
    const response = await fetch(`${server.url}/rpc`, { method: 'POST', body: 'x' });
    assert.equal(response.status, 202);
    assert.equal(response.headers.get('x-seen'), 'yes');
    assert.equal(await response.text(), 'from the route');
    assert.deepEqual(seen, ['from the route']);
  } finally {
    await server.close();
  }
});

test('a deferred answer read through by a wrapper is sent from what it read', BOUND, async () => {
  const server = await serveNode({
    async fetch(_request, env) {
      const answered = wholeTextResponse('from the route', { headers: {} }, env);
      return new Response((await answered.text()).toUpperCase(), { status: answered.status });
    },
  });
  try {
    const response = await fetch(`${server.url}/rpc`, { method: 'POST', body: 'x' });
    assert.equal(response.status, 200);
    assert.equal(await response.text(), 'FROM THE ROUTE');
  } finally {
    await server.close();
  }
});
