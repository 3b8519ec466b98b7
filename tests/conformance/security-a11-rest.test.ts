// Security checklist A11: the REST facade, from the attacker's side. Every response is checked
// against the plane's own OpenAPI document by `fx.rest`, and every refusal shows the handler
// (and, where it must not, the invocation middleware) never ran.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  createPlaneDeployment,
  FIXTURE_CHALLENGE,
  NO_CALLER_BEARER,
  type PlaneDeployment,
} from './plane-fixture.ts';

const alice = { bearer: 't-alice' };

/** The calls of `svc-a.echo#<method>` so far. */
const calls = (fx: PlaneDeployment, method: string) => fx.count('calls', `svc-a.echo#${method}`);

test('REST-01 precedence: query, then JSON body, then path; query only fills string fields', async () => {
  const fx = await createPlaneDeployment();
  const response = await fx.rest('POST', '/items/P?id=Q&name=Q&note=Q&tags=a&tags=b', {
    ...alice,
    body: { id: 'B', name: 'B' },
  });
  assert.equal(response.status, 201);
  assert.deepEqual(response.body, { id: 'P', name: 'B', note: 'Q', tags: ['a', 'b'] });
  assert.equal(calls(fx, 'items.update'), 1);
});

test('REST-02 the path wins over the body for an authorization-relevant id', async () => {
  const fx = await createPlaneDeployment();
  const response = await fx.rest('POST', '/items/mine', {
    ...alice,
    body: { id: 'yours', name: 'n' },
  });
  assert.equal(response.status, 201);
  assert.equal(response.body.id, 'mine');
});

test('REST-03 empty segments never match a variable, and the middleware does not run', async () => {
  const fx = await createPlaneDeployment();
  for (const path of ['/items/', '/items//', '/items//x', '//items/x']) {
    for (const method of ['GET', 'POST']) {
      const response = await fx.rest(method, path, {
        ...alice,
        ...(method === 'POST' ? { body: { name: 'n' } } : {}),
      });
      assert.equal(response.status, 404, `${method} ${path}`);
      assert.equal(response.headers.get('WWW-Authenticate'), null);
    }
  }
  assert.equal(fx.middleware.runs, 0);
  assert.equal(calls(fx, 'items.get') + calls(fx, 'items.update'), 0);
});

test('REST-04 an encoded / or .. in a variable is one decoded segment of data, never another route', async () => {
  const fx = await createPlaneDeployment();
  for (const [path, id] of [['/items/a%2Fb', 'a/b'], ['/items/..%2Fadmin', '../admin']]) {
    const response = await fx.rest('GET', path, alice);
    assert.equal(response.status, 200, path);
    assert.deepEqual(response.body, { id }, path);
  }
  // `%2e%2e` is a dot segment to the URL parser: it leaves no route behind (or is data).
  const dots = await fx.rest('GET', '/items/%2e%2e', alice);
  assert.ok(
    dots.status === 404 || (dots.status === 200 && dots.body.id === '..'),
    `status ${dots.status}`,
  );
  // An encoded slash never reaches the internal ability's route.
  const internal = await fx.rest('GET', '/internal%2Fwhoami', { bearer: 't-robot' });
  assert.equal(internal.status, 404);
  assert.equal(fx.count('factories', 'svc-a.internal'), 0);
  // Malformed percent-encoding matches nothing.
  const malformed = await fx.rest('GET', '/items/%E0%A4%A', alice);
  assert.equal(malformed.status, 404);
  assert.equal(calls(fx, 'items.get'), 2 + (dots.status === 200 ? 1 : 0));
});

test('REST-05 query fallback applies only to top-level string and string-array fields', async () => {
  const fx = await createPlaneDeployment();
  const response = await fx.rest('POST', '/items/x?name=n&count=5&meta.x=1&meta[x]=1', {
    ...alice,
    body: {},
  });
  assert.equal(response.status, 201);
  assert.deepEqual(response.body, { id: 'x', name: 'n' });
  // A required field the query cannot fill stays missing: 422, the handler does not run.
  const before = calls(fx, 'sleep');
  const refused = await fx.rest('POST', '/sleep?ms=5', { ...alice, body: {} });
  assert.equal(refused.status, 422);
  assert.equal(refused.body.code, 'ability_validation');
  assert.equal(calls(fx, 'sleep'), before);
});

test('REST-06 invalid input: a wrong type and a missing field are 422 with issues; the handler does not run', async () => {
  const fx = await createPlaneDeployment();
  for (const body of [{ name: 5 }, {}]) {
    const response = await fx.rest('POST', '/items/x', { ...alice, body });
    assert.equal(response.status, 422, JSON.stringify(body));
    assert.equal(response.headers.get('Content-Type'), 'application/problem+json');
    assert.equal(response.body.code, 'ability_validation');
    assert.equal(response.body.retryable, false);
    assert.ok(response.body.issues.length > 0);
    for (const issue of response.body.issues) assert.equal(typeof issue.message, 'string');
    assert.ok(
      response.body.issues.some((issue: { path?: unknown[] }) => issue.path?.[0] === 'name'),
    );
  }
  assert.equal(calls(fx, 'items.update'), 0);
});

test('REST-07 success status: 200 without rest.status, 201 and 204 as declared, never used for errors', async () => {
  const fx = await createPlaneDeployment();
  assert.equal((await fx.rest('GET', '/items/x', alice)).status, 200);
  assert.equal((await fx.rest('POST', '/items/x', { ...alice, body: { name: 'n' } })).status, 201);
  const deleted = await fx.rest('DELETE', '/items/x', alice);
  assert.equal(deleted.status, 204);
  assert.equal(deleted.body, undefined);
  const invalid = await fx.rest('POST', '/items/x', { ...alice, body: { name: 1 } });
  assert.equal(invalid.status, 422);
});

test('REST-08 not exposed: a private ability, a method without rest, a streaming method: 404 and absent from the document', async () => {
  const fx = await createPlaneDeployment();
  const document = await fx.openapi();
  for (const path of ['/private/secret', '/ticks', '/svc-a.echo/ticks', '/other/ping']) {
    const response = await fx.rest('GET', path, alice);
    assert.equal(response.status, 404, path);
    assert.equal(Object.hasOwn(document.paths ?? {}, path), false, path);
  }
  assert.equal(fx.count('factories', 'svc-a.private'), 0);
  assert.equal(fx.middleware.runs, 0);
  assert.equal(JSON.stringify(document).includes('svc-a.private'), false);
});

test('REST-09 the middleware runs neither for an unmatched path nor for the wrong method', async () => {
  const fx = await createPlaneDeployment();
  const unmatched = await fx.rest('GET', '/nowhere', alice);
  assert.equal(unmatched.status, 404);
  const wrong = await fx.rest('PATCH', '/internal/whoami', alice);
  assert.equal(wrong.status, 405);
  assert.equal(wrong.headers.get('Allow'), 'GET');
  const search = await fx.rest('GET', '/whoami', { ...alice, headers: {} });
  assert.equal(search.status, 200);
  assert.equal(fx.middleware.runs, 1, 'only the matched request ran it');
  assert.equal(fx.count('factories', 'svc-a.internal'), 0);
});

test('REST-10 middleware outcomes: no credential keeps its 401 and challenge; t-nocaller is a 500', async () => {
  const fx = await createPlaneDeployment();
  const anonymous = await fx.rest('GET', '/items/x');
  assert.equal(anonymous.status, 401);
  assert.equal(anonymous.headers.get('WWW-Authenticate'), FIXTURE_CHALLENGE);
  const nocaller = await fx.rest('GET', '/items/x', { bearer: NO_CALLER_BEARER });
  assert.equal(nocaller.status, 500);
  assert.equal(nocaller.body.reason, 'invocation_caller_missing');
  assert.equal(nocaller.body.code, 'internal');
  assert.equal(calls(fx, 'items.get'), 0);
  assert.equal(fx.rpcRequests('svc-a').length, 0);
});

test('REST-11 QUERY takes its JSON body as the input; GET never reads one', async () => {
  const fx = await createPlaneDeployment();
  const query = await fx.rest('QUERY', '/items/search', { ...alice, body: { q: 'body' } });
  assert.equal(query.status, 200);
  assert.deepEqual(query.body, { query: { q: 'body' } });
  // GET carries no body on the fetch API; at /items/search it is items.get with id "search".
  const get = await fx.rest('GET', '/items/search?q=query', alice);
  assert.equal(get.status, 200);
  assert.deepEqual(get.body, { id: 'search' });
  assert.equal(calls(fx, 'items.search'), 1);
});

// REST-12 (the document itself) is in openapi-document.test.ts.
