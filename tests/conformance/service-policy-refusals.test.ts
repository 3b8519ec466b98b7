// Contract "What the service does" rule 1(a): HTTP policy middleware (sessions, rate limits) must
// be able to refuse a request. Hono's own middlewares refuse by throwing an HTTPException; the
// refusal keeps its status and headers, carries the request id, and no handler runs. The control
// plane installs the same request-id and problem layer, so a route mounted on its app does too.
// The policy refuses the plane's discovery request as well, so sessions carry a k1-signed token.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bearerAuth } from 'hono/bearer-auth';
import { HTTPException } from 'hono/http-exception';
import { createFixture } from './fixture.ts';
import { echoAbility } from './fixture-abilities.ts';

const OPS_TOKEN = 'ops-token-0123456789';

test('Roles r1a a bearerAuth refusal in service middleware is its own 401 with WWW-Authenticate', async () => {
  const fx = await createFixture();
  fx.deploy('svc-a', [echoAbility(fx.stats)], { middleware: bearerAuth({ token: OPS_TOKEN }) });
  const attacker = fx.httpBatch('svc-a');
  using refused = fx.session('svc-a.echo', {
    transport: attacker.transport,
    token: await fx.tokenFor('svc-a', ['svc-a.read']),
    requestId: 'rid-policy-401',
  });
  await assert.rejects(refused.whoami({}));
  const [{ response }] = attacker.exchanges;
  assert.equal(response.status, 401);
  assert.match(response.headers.get('WWW-Authenticate') ?? '', /^Bearer realm=/);
  assert.equal(response.headers.get('X-Request-Id'), 'rid-policy-401');
  assert.equal(fx.count('factories', 'svc-a.echo'), 0);
  assert.equal(fx.count('calls', 'svc-a.echo#whoami'), 0);
  assert.equal(fx.events.some((event) => event.event === 'svc.request.failed'), false);

  const operator = fx.httpBatch('svc-a', { headers: { Authorization: `Bearer ${OPS_TOKEN}` } });
  using allowed = fx.session('svc-a.echo', {
    transport: operator.transport,
    token: await fx.tokenFor('svc-a', ['svc-a.read']),
  });
  await allowed.whoami({});
  assert.equal(fx.count('calls', 'svc-a.echo#whoami'), 1);
});

test('Roles r1a an HTTPException without a response becomes a problem with its status and the request id', async () => {
  const fx = await createFixture();
  fx.deploy('svc-a', [echoAbility(fx.stats)], {
    middleware: () => {
      throw new HTTPException(429, { message: 'Slow down' });
    },
  });
  const attacker = fx.httpBatch('svc-a');
  using refused = fx.session('svc-a.echo', {
    transport: attacker.transport,
    token: await fx.tokenFor('svc-a', ['svc-a.read']),
    requestId: 'rid-policy-429',
  });
  await assert.rejects(refused.whoami({}));
  const [{ response, body }] = attacker.exchanges;
  assert.equal(response.status, 429);
  assert.equal(response.headers.get('Content-Type'), 'application/problem+json');
  assert.equal(response.headers.get('X-Request-Id'), 'rid-policy-429');
  const problem = JSON.parse(body);
  assert.equal(problem.status, 429);
  assert.equal(problem.code, 'internal');
  assert.equal(problem.reason, 'http_policy');
  assert.equal(problem.detail, 'Slow down');
  assert.equal(problem.retryable, true);
  assert.equal(problem.requestId, 'rid-policy-429');
  assert.equal(fx.count('factories', 'svc-a.echo'), 0);
  const requestEvents = fx.events.filter((event) => event.requestId === 'rid-policy-429');
  assert.deepEqual(requestEvents.map((event) => [event.event, event.status]), [
    ['svc.request.completed', 429],
  ]);
});

test('Roles r1a an HTTPException on a route mounted on the plane keeps its status and headers', async () => {
  const fx = await createFixture();
  let handled = 0;
  fx.plane.app.get('/ops/status', bearerAuth({ token: OPS_TOKEN }), (c) => {
    handled++;
    return c.json({ ok: true });
  });
  fx.plane.app.get('/ops/limited', () => {
    throw new HTTPException(429, { message: 'Slow down' });
  });

  const unauthorized = await fx.plane.fetch(
    new Request('https://plane.fixture.test/ops/status', {
      headers: { 'X-Request-Id': 'rid-plane-401' },
    }),
  );
  assert.equal(unauthorized.status, 401);
  assert.match(unauthorized.headers.get('WWW-Authenticate') ?? '', /^Bearer realm=/);
  assert.equal(unauthorized.headers.get('X-Request-Id'), 'rid-plane-401');
  await unauthorized.body?.cancel();
  assert.equal(handled, 0);

  const limited = await fx.plane.fetch(
    new Request('https://plane.fixture.test/ops/limited', {
      headers: { 'X-Request-Id': 'rid-plane-429' },
    }),
  );
  assert.equal(limited.status, 429);
  assert.equal(limited.headers.get('Content-Type'), 'application/problem+json');
  const problem = await limited.json();
  assert.equal(problem.requestId, 'rid-plane-429');
  assert.equal(problem.reason, 'http_policy');
});
