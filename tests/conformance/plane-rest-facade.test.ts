// Contract "REST rules", "Invocation middleware" and the REST rows of the error tables, end to
// end through the fixture plane. Every REST response is checked against the plane's own OpenAPI
// document by `fx.rest`.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_SVC_TIMEOUT_MS } from '../../src/core/deadline.ts';
import {
  createPlaneDeployment,
  discoveryDocumentOf,
  fakeService,
  FIXTURE_CONN_INFO,
  JWKS_URL,
  PLANE_ID,
  PLANE_URL,
  readResponse,
  TOKEN_URL,
} from './plane-fixture.ts';
import { assertReadResponseMatchesOpenApi } from '../support/openapi-response-check.ts';

const alice = { bearer: 't-alice' };

type Report = {
  identity: Record<string, unknown>;
  connInfo: unknown;
  idempotencyKey: string | null;
  remainingTimeoutMs: number | null;
  requestId: string | null;
};

test('REST r4 and Errors: every REST answer is no-store; failures are problem+json carrying the request id', async () => {
  const fx = await createPlaneDeployment();
  const answers = [
    await fx.rest('GET', '/items/x', alice),
    await fx.rest('POST', '/items/x', { ...alice, body: { name: 3 } }),
    await fx.rest('PATCH', '/internal/whoami', alice),
    await fx.rest('GET', '/items/x'),
    await fx.rest('POST', '/fail', { ...alice, body: { kind: 'error' } }),
  ];
  for (const answer of answers) {
    assert.equal(answer.headers.get('Cache-Control'), 'no-store', String(answer.status));
    assert.ok(answer.headers.get('X-Request-Id'));
    if (answer.status >= 400 && answer.status !== 401) {
      assert.equal(answer.headers.get('Content-Type'), 'application/problem+json');
      assert.equal(answer.body.requestId, answer.headers.get('X-Request-Id'));
      assert.equal(answer.body.status, answer.status);
    }
  }
});

test('Errors (REST): the handler chose the status: AbilityHandlerError keeps its status, reason and retryable', async () => {
  const fx = await createPlaneDeployment();
  const response = await fx.rest('POST', '/fail-shaped', {
    ...alice,
    body: { status: 418, reason: 'quota' },
  });
  assert.equal(response.status, 418);
  assert.equal(response.body.code, 'handler');
  assert.equal(response.body.reason, 'quota');
  assert.equal(response.body.detail, 'Quota exceeded');
  assert.equal(response.body.retryable, false);
});

test('Errors (REST): an unshaped handler failure is an opaque 500; an invalid output too', async () => {
  const fx = await createPlaneDeployment();
  for (const kind of ['error', 'string', 'cause', 'aggregate']) {
    const response = await fx.rest('POST', '/fail', { ...alice, body: { kind } });
    assert.equal(response.status, 500, kind);
    assert.equal(response.body.code, 'internal');
    assert.equal(JSON.stringify(response.body).includes(fx.stats.marker), false, kind);
  }
  const bad = await fx.rest('GET', '/bad-output', alice);
  assert.equal(bad.status, 500);
  assert.equal(bad.body.code, 'ability_validation');
  assert.equal(bad.body.issues, undefined);
  assert.equal(JSON.stringify(bad.body).includes(fx.stats.marker), false);
});

test('Errors (REST): a deadline that elapses is 504; the plane honours a filtered X-Svc-Timeout', async () => {
  const fx = await createPlaneDeployment();
  const response = await fx.rest('POST', '/sleep', {
    ...alice,
    body: { ms: 5000 },
    headers: { 'X-Svc-Timeout': '50' },
  });
  assert.equal(response.status, 504);
  assert.equal(response.body.code, 'timeout');
  assert.equal(response.body.retryable, true);
});

test('Propagated metadata (REST): X-Request-Id, X-Svc-Timeout and X-Svc-Idempotency-Key are filtered, then forwarded', async () => {
  const fx = await createPlaneDeployment();
  const forwarded = await fx.rest('GET', '/whoami', {
    ...alice,
    headers: {
      'X-Request-Id': 'req-rest-1',
      'X-Svc-Timeout': '30000',
      'X-Svc-Idempotency-Key': 'idem-1=',
    },
  });
  const report = forwarded.body as Report;
  assert.equal(report.requestId, 'req-rest-1');
  assert.equal(forwarded.headers.get('X-Request-Id'), 'req-rest-1');
  assert.equal(report.idempotencyKey, 'idem-1=');
  assert.ok(report.remainingTimeoutMs !== null && report.remainingTimeoutMs <= 30000);
  const [record] = fx.rpcRequests('svc-a');
  assert.equal(record.headers.get('X-Request-Id'), 'req-rest-1');
  assert.ok(Number(record.headers.get('X-Svc-Timeout')) <= 30000);

  const filtered = await fx.rest('GET', '/whoami', {
    ...alice,
    headers: {
      'X-Request-Id': 'bad id\twith tab',
      'X-Svc-Timeout': `${MAX_SVC_TIMEOUT_MS * 10}`,
      'X-Svc-Idempotency-Key': 'not a key!',
    },
  });
  const clamped = filtered.body as Report;
  assert.notEqual(clamped.requestId, 'bad id\twith tab');
  assert.equal(clamped.requestId, filtered.headers.get('X-Request-Id'));
  assert.equal(clamped.idempotencyKey, null);
  assert.ok(
    clamped.remainingTimeoutMs !== null && clamped.remainingTimeoutMs <= MAX_SVC_TIMEOUT_MS,
  );
  const last = fx.rpcRequests('svc-a').at(-1)!;
  assert.equal(last.headers.get('X-Svc-Idempotency-Key'), null);
  assert.ok(Number(last.headers.get('X-Svc-Timeout')) <= MAX_SVC_TIMEOUT_MS);

  await fx.rest('GET', '/whoami', { ...alice, headers: { 'X-Svc-Timeout': 'soon' } });
  assert.equal(fx.rpcRequests('svc-a').at(-1)!.headers.get('X-Svc-Timeout'), null);
});

test('REST body refusals: 413 with and without Content-Length, 415, 400 for bad JSON; nothing reaches the service', async () => {
  const fx = await createPlaneDeployment();
  const big = JSON.stringify({ name: 'x'.repeat(1024 * 1024) });
  const declared = await fx.rest('POST', '/items/x', {
    ...alice,
    body: big,
    headers: { 'Content-Length': String(new TextEncoder().encode(big).byteLength) },
  });
  assert.equal(declared.status, 413);
  assert.equal(declared.body.reason, 'body_too_large');
  // Streamed in chunks, no length declared: counted as it arrives.
  const chunk = new TextEncoder().encode('x'.repeat(64 * 1024));
  let sent = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent === 0) controller.enqueue(new TextEncoder().encode('{"name":"'));
      sent++;
      if (sent > 40) controller.close();
      else controller.enqueue(chunk);
    },
  });
  const streamed = await fx.checkedRest(
    new Request(`${PLANE_URL}/items/x`, {
      method: 'POST',
      body: stream,
      headers: { 'Authorization': 'Bearer t-alice', 'Content-Type': 'application/json' },
      duplex: 'half',
    } as RequestInit),
  );
  assert.equal(streamed.status, 413);
  assert.ok(sent < 40, `reading stopped at the limit (${sent} chunks pulled)`);
  const wrongType = await fx.rest('POST', '/items/x', {
    ...alice,
    body: 'name=n',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
  });
  assert.equal(wrongType.status, 415);
  for (const text of ['{"name":', '[1,2]', '"text"', 'null']) {
    const bad = await fx.rest('POST', '/items/x', { ...alice, body: text });
    assert.equal(bad.status, 400, text);
    assert.equal(bad.body.reason, 'invalid_json_body', text);
  }
  assert.equal(fx.rpcRequests('svc-a').length, 0);
  assert.equal(fx.count('calls', 'svc-a.echo#items.update'), 0);
  assert.equal(fx.middleware.runs, 0, 'refused before the middleware ran');
});

test('REST events: exactly one svc.rest.completed or svc.rest.failed per request the facade answers', async () => {
  const fx = await createPlaneDeployment();
  const outcomes = () =>
    fx.events.filter((event) =>
      event.event === 'svc.rest.completed' || event.event === 'svc.rest.failed'
    );
  const cases: [string, string, object, string, number][] = [
    ['GET', '/items/x', alice, 'svc.rest.completed', 200],
    ['POST', '/items/x', { ...alice, body: { name: 1 } }, 'svc.rest.failed', 422],
    ['GET', '/items/x', {}, 'svc.rest.failed', 401],
    ['PATCH', '/internal/whoami', alice, 'svc.rest.failed', 405],
    ['POST', '/fail', { ...alice, body: { kind: 'error' } }, 'svc.rest.failed', 500],
    ['GET', '/internal/whoami', alice, 'svc.rest.failed', 403],
  ];
  for (const [method, path, init, event, status] of cases) {
    const before = outcomes().length;
    const response = await fx.rest(method, path, init);
    assert.equal(response.status, status, `${method} ${path}`);
    const added = outcomes().slice(before);
    assert.equal(added.length, 1, `${method} ${path}`);
    assert.equal(added[0].event, event);
    assert.equal(added[0].status, status);
    assert.equal(added[0].requestId, response.headers.get('X-Request-Id'));
  }
  const before = outcomes().length;
  await fx.rest('GET', '/no/such/route', alice);
  assert.equal(outcomes().length, before, 'an unmatched path is not a REST request');
});

test('REST events: log: false silences them', async () => {
  const fx = await createPlaneDeployment({ plane: { log: false } });
  await fx.rest('GET', '/items/x', alice);
  assert.equal(fx.eventsNamed('svc.rest.completed').length, 0);
});

test('Invocation middleware: REST sets service, ability, method, scopes and path before it runs', async () => {
  const fx = await createPlaneDeployment();
  await fx.rest('GET', '/whoami', alice);
  assert.deepEqual(fx.middleware.invocations, [{
    surface: 'rest',
    serviceId: 'svc-a',
    abilityId: 'svc-a.echo',
    method: 'whoami',
    scopes: ['svc-a.read'],
    path: '/whoami',
  }]);
});

test('Invocation middleware: never for the token endpoint, the JWKS or the OpenAPI document', async () => {
  const fx = await createPlaneDeployment();
  await fx.plane.fetch(new Request(JWKS_URL, { headers: { Authorization: 'Bearer t-alice' } }));
  // The JWKS never resolves services: no discovery happened for it.
  assert.equal(fx.discoveryRequests('svc-a').length, 0);
  await fx.plane.fetch(
    new Request(TOKEN_URL, { method: 'POST', headers: { Authorization: 'Bearer t-alice' } }),
  );
  await fx.plane.fetch(new Request(`${PLANE_URL}/openapi.json`));
  assert.equal(fx.middleware.runs, 0);
});

test('Invocation middleware: connection info it sets reaches an ingress service, never a token', async () => {
  const fx = await createPlaneDeployment();
  const response = await fx.rest('GET', '/svc-b/whoami', alice);
  assert.equal(response.status, 200);
  assert.deepEqual((response.body as Report).connInfo, FIXTURE_CONN_INFO);
  const [token] = fx.tokensAt('svc-b');
  assert.equal(token.includes('127.0.0.1'), false);
  assert.equal(JSON.stringify(fx.events).includes(token), false, 'no token in the log');
});

test('Invocation middleware: a plane without one answers every REST request 500 invocation_caller_missing', async () => {
  const fx = await createPlaneDeployment({ plane: { invocationMiddleware: false } });
  const response = await fx.rest('GET', '/items/x', alice);
  assert.equal(response.status, 500);
  assert.equal(response.body.reason, 'invocation_caller_missing');
  assert.equal(fx.count('calls', 'svc-a.echo#items.get'), 0);
  await fx.rest('GET', '/items/y', alice);
  assert.equal(fx.eventsNamed('svc.plane.invocation_middleware_missing').length, 1);
});

/** A fake service whose whoami is projected at `GET <path>` with a string field `key`. */
async function fakeRoute(id: string, path: string) {
  const document = await discoveryDocumentOf(id);
  // deno-lint-ignore no-explicit-any
  const method = (document.abilities as any[])[0].methods.whoami;
  method.inputSchema = { type: 'object', properties: { key: { type: 'string' } } };
  method.rest = { method: 'get', path, status: 200 };
  return fakeService(id, document, [{ caller: PLANE_ID, scopes: [`${id}.read`] }]);
}

test('Catalog build: a REST route at a plane path, or one two services declare, is refused and never served', async () => {
  const twin = await fakeRoute('svc-e', '/items/{key}');
  const squatter = await fakeRoute('svc-f', '/openapi.json');
  const fx = await createPlaneDeployment({ extraServices: [twin.endpoint, squatter.endpoint] });
  const document = await fx.openapi();
  assert.equal(Object.hasOwn(document.paths?.['/items/{id}'] ?? {}, 'get'), false);
  const get = await fx.rest('GET', '/items/x', alice);
  assert.equal(get.status, 405, 'GET /items/{id} is ambiguous: neither service serves it');
  assert.equal(get.headers.get('Allow'), 'DELETE, PATCH, POST, PUT');
  assert.equal(fx.count('calls', 'svc-a.echo#items.get'), 0);
  const openapi = await fx.plane.fetch(new Request(`${PLANE_URL}/openapi.json`));
  assert.equal(openapi.headers.get('Content-Type'), 'application/json');
  assert.ok((await openapi.json()).openapi);
  const refused = fx.eventsNamed('svc.rest.route_refused');
  const routes = refused.map((event) => `${event.service} ${event.route} ${event.reason}`);
  assert.ok(routes.includes('svc-a GET /items/{id} duplicate_route'), routes.join('; '));
  assert.ok(routes.includes('svc-e GET /items/{key} duplicate_route'), routes.join('; '));
  assert.ok(routes.includes('svc-f GET /openapi.json plane_route'), routes.join('; '));
  assert.equal(refused.length, 3, 'each refusal reported once, though every request rebuilt');
  assert.equal(fx.middleware.runs, 0);
});

test('Errors (REST): a service refusing the plane-minted token is the plane failing (opaque 500), never a 401', async () => {
  const fx = await createPlaneDeployment();
  // A replica signing with k3, which the services' JWKS (from the deployed plane) lacks.
  const stray = fx.replica(['k3']);
  const response = await readResponse(
    await stray.fetch(
      new Request(`${PLANE_URL}/items/x`, { headers: { Authorization: 'Bearer t-alice' } }),
    ),
  );
  assertReadResponseMatchesOpenApi(await fx.openapi(), 'GET', '/items/x', response);
  assert.equal(response.status, 500);
  assert.equal(response.body.code, 'internal');
  assert.equal(response.body.reason, 'upstream_token_refused');
  assert.equal(response.headers.get('WWW-Authenticate'), null);
  assert.equal(fx.count('calls', 'svc-a.echo#items.get'), 0);
  // Authentication failed twice (a fresh token was tried once), the method never ran.
  assert.equal(fx.rpcRequests('svc-a').length, 2);
});

test('REST methods: GET, POST, PUT, PATCH, DELETE and QUERY each invoke their method, as the document declares', async () => {
  const fx = await createPlaneDeployment();
  const cases: [string, string, unknown, number, unknown][] = [
    ['GET', '/items/a', undefined, 200, { id: 'a' }],
    ['POST', '/items/a', { name: 'n' }, 201, { id: 'a', name: 'n' }],
    ['PUT', '/items/a', { name: 'm', count: 2 }, 200, { id: 'a', name: 'm', count: 2 }],
    ['PATCH', '/items/a', { name: 'p' }, 200, { patched: { id: 'a', name: 'p' } }],
    ['DELETE', '/items/a', undefined, 204, undefined],
    ['QUERY', '/items/search', { q: 'x' }, 200, { query: { q: 'x' } }],
  ];
  for (const [method, path, body, status, expected] of cases) {
    const response = await fx.rest(method, path, { ...alice, ...(body ? { body } : {}) });
    assert.equal(response.status, status, `${method} ${path}`);
    assert.deepEqual(response.body, expected, `${method} ${path}`);
  }
  for (const name of ['get', 'update', 'replace', 'patch', 'delete', 'search']) {
    assert.equal(fx.count('calls', `svc-a.echo#items.${name}`), 1, name);
  }
  assert.equal(fx.middleware.runs, cases.length);
});
