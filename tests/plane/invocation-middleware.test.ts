// The invocation-middleware runner (src/plane/invocation-middleware.ts) in a bare Hono app: the
// caller it requires before the door's handler runs, what a middleware may answer by itself,
// and the one configuration event of a plane without a middleware.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Hono, type MiddlewareHandler } from 'hono';
import { bearerAuth } from 'hono/bearer-auth';
import type { SvcLogEvent } from '../../src/core/logging.ts';
import { generateRequestId } from '../../src/core/request-id.ts';
import {
  createInvocationMiddlewareRunner,
  INVOCATION_CALLER_MISSING,
  INVOCATION_MIDDLEWARE_MISSING_EVENT,
  type SvcInvocation,
} from '../../src/plane/invocation-middleware.ts';
import type { BrokerCaller } from '../../src/plane/broker-caller.ts';
import type { ConnInfo } from '../../src/core/conn-info.ts';
import { installRequestIdAndProblemJson } from '../../src/service/problem-json-app.ts';

const invocation: SvcInvocation = {
  surface: 'rest',
  serviceId: 'svc-a',
  abilityId: 'svc-a.echo',
  method: 'whoami',
  scopes: ['svc-a.read'],
  path: '/whoami',
};

/** An app whose one route runs `middleware` around a handler that records what it received. */
function appWith(middleware: MiddlewareHandler | undefined) {
  const events: SvcLogEvent[] = [];
  const seen: { caller: BrokerCaller; connInfo: ConnInfo | undefined }[] = [];
  const run = createInvocationMiddlewareRunner(middleware, (event) => void events.push(event));
  const app = new Hono();
  installRequestIdAndProblemJson(app, { requestIdOf: () => generateRequestId() });
  app.get('/whoami', (c) =>
    run(c, invocation, (caller, connInfo) => {
      seen.push({ caller, connInfo });
      return Promise.resolve(Response.json({ ok: true }));
    }));
  const get = async (headers: Record<string, string> = {}) => {
    const response = await app.fetch(new Request('https://plane.test/whoami', { headers }));
    const text = await response.text();
    let body: Record<string, unknown> | undefined;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    return {
      status: response.status,
      headers: response.headers, // deno-lint-ignore no-explicit-any
      body: body as any,
      text,
    };
  };
  return { get, seen, events };
}

test('invocation middleware: the caller it sets reaches the handler; svcInvocation is set before it runs', async () => {
  let observed: unknown;
  const { get, seen } = appWith(async (c, next) => {
    observed = c.get('svcInvocation' as never);
    c.set('svcCaller' as never, { id: 'alice', kind: 'user' } as never);
    c.set('svcConnInfo' as never, {
      remote: { address: '198.51.100.4', port: 99999, extra: 'dropped' },
    } as never);
    await next();
  });
  const response = await get();
  assert.equal(response.status, 200);
  assert.deepEqual(observed, invocation);
  assert.deepEqual(seen[0].caller, { id: 'alice', kind: 'user' });
  // Sanitised: the out-of-range port and the unknown field are gone.
  assert.deepEqual(seen[0].connInfo, { remote: { address: '198.51.100.4' } });
});

test('invocation middleware: next() without a caller is a 500 invocation_caller_missing; the handler never runs', async () => {
  const { get, seen } = appWith(async (_c, next) => {
    await next();
  });
  const response = await get();
  assert.equal(response.status, 500);
  assert.equal(response.headers.get('content-type'), 'application/problem+json');
  assert.equal(response.body.reason, INVOCATION_CALLER_MISSING);
  assert.equal(seen.length, 0);
});

test('invocation middleware: a malformed caller is refused like a missing one', async () => {
  for (const caller of [{ id: 'x', kind: 'admin' }, { id: '', kind: 'user' }, 'alice']) {
    const { get, seen } = appWith(async (c, next) => {
      c.set('svcCaller' as never, caller as never);
      await next();
    });
    const response = await get();
    assert.equal(response.status, 500, JSON.stringify(caller));
    assert.equal(response.body.reason, INVOCATION_CALLER_MISSING);
    assert.equal(seen.length, 0);
  }
});

test('invocation middleware: its own 401 keeps WWW-Authenticate (returned, or thrown by hono/bearer-auth)', async () => {
  const returned = appWith((c) =>
    Promise.resolve(
      c.json({ error: 'no credential' }, 401, { 'WWW-Authenticate': 'Bearer realm="fixture"' }),
    )
  );
  const first = await returned.get();
  assert.equal(first.status, 401);
  assert.equal(first.headers.get('www-authenticate'), 'Bearer realm="fixture"');
  assert.deepEqual(first.body, { error: 'no credential' });
  assert.equal(returned.seen.length, 0);

  const thrown = appWith(bearerAuth({ token: 't-alice', realm: 'fixture' }));
  const second = await thrown.get();
  assert.equal(second.status, 401);
  assert.equal(second.text, 'Unauthorized');
  assert.match(second.headers.get('www-authenticate') ?? '', /^Bearer realm="fixture"/);
  assert.equal(thrown.seen.length, 0);
});

test('invocation middleware: headers it adds after next() stay on the answer', async () => {
  const { get } = appWith(async (c, next) => {
    c.set('svcCaller' as never, { id: 'svc-robot', kind: 'service' } as never);
    await next();
    c.res.headers.set('X-Audit', 'seen');
  });
  const response = await get();
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('x-audit'), 'seen');
});

test('invocation middleware: without one, every front-door request is a 500, reported once', async () => {
  const { get, seen, events } = appWith(undefined);
  for (let i = 0; i < 3; i++) {
    const response = await get();
    assert.equal(response.status, 500);
    assert.equal(response.body.reason, INVOCATION_CALLER_MISSING);
  }
  assert.equal(seen.length, 0);
  assert.equal(
    events.filter((event) => event.event === INVOCATION_MIDDLEWARE_MISSING_EVENT).length,
    1,
  );
});
