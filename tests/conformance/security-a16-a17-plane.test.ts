// Security checklist A16 and A17 cases that concern the plane's own HTTP answers and what the
// deployment writes down: META-07 (X-Request-Id on every plane response), META-08 (no secret
// material in logs or service-visible URLs) and ERR-09 (no stack traces or paths in plane errors).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  controlPlaneHmacTokenRequester,
  controlPlaneJwkTokenRequester,
} from '../../src/caller/token-requesters.ts';
import { ISS } from './fixture.ts';
import {
  createPlaneDeployment,
  HMAC_SECRETS,
  hmacTokenRequest,
  JWKS_URL,
  PLANE_URL,
  TOKEN_URL,
  tokenBody,
} from './plane-fixture.ts';
import { assertReadResponseMatchesOpenApi } from '../support/openapi-response-check.ts';

const BOB = { Authorization: 'Bearer t-bob' };
const NOCALLER = { Authorization: 'Bearer t-nocaller' };

function restPost(path: string, body: unknown, headers: Record<string, string> = {}): Request {
  return new Request(`${PLANE_URL}${path}`, {
    method: 'POST',
    body: typeof body === 'string' ? body : JSON.stringify(body),
    headers: { ...BOB, 'Content-Type': 'application/json', ...headers },
  });
}

const LEAK_MARKERS = [/\n\s+at /, /node_modules/, /\.ts:\d+/, /file:\/\//, /"stack"/];

test('META-07 every plane response carries X-Request-Id (200, 4xx, 5xx, 404, caller-auth 401)', async () => {
  const fx = await createPlaneDeployment();
  fx.stop('svc-d');
  const cases: [string, Request, number][] = [
    ['JWKS', new Request(JWKS_URL), 200],
    ['token', await hmacTokenRequest(tokenBody()), 200],
    ['caller-auth 401', new Request(TOKEN_URL, { method: 'POST', body: '{}' }), 401],
    ['400', await hmacTokenRequest('not json'), 400],
    [
      '5xx',
      await hmacTokenRequest(tokenBody({ targetServiceId: 'svc-d', scopes: ['svc-d.read'] })),
      500,
    ],
    ['404', new Request(`${PLANE_URL}/no/such/route`), 404],
    ['REST 200', new Request(`${PLANE_URL}/items/x`, { headers: BOB }), 200],
    ['REST 405', new Request(`${PLANE_URL}/internal/whoami`, { method: 'PUT', headers: BOB }), 405],
    ['REST middleware 401', new Request(`${PLANE_URL}/items/x`), 401],
    ['REST 403', new Request(`${PLANE_URL}/internal/whoami`, { headers: BOB }), 403],
    ['REST 500', restPost('/fail', { kind: 'error' }), 500],
    ['REST 500 (no caller)', new Request(`${PLANE_URL}/items/x`, { headers: NOCALLER }), 500],
  ];
  for (const [label, request, status] of cases) {
    const response = label.startsWith('REST')
      ? await fx.checkedRest(request)
      : await fx.plane.fetch(request);
    assert.equal(response.status, status, label);
    const id = response.headers.get('X-Request-Id');
    assert.ok(id !== null && id.length > 0, `${label}: X-Request-Id`);
    if (response instanceof Response) await response.body?.cancel();
  }
});

test('ERR-09 plane HTTP errors carry no stack traces, file paths or node_modules', async () => {
  const fx = await createPlaneDeployment();
  fx.stop('svc-d');
  const requests = [
    await hmacTokenRequest('{"targetServiceId":'),
    await hmacTokenRequest(tokenBody({ scopes: 'svc-a.read' })),
    await hmacTokenRequest(tokenBody({ targetServiceId: 'svc-d', scopes: ['svc-d.read'] })),
    await hmacTokenRequest(tokenBody({ targetServiceId: 'svc-zz' })),
    new Request(TOKEN_URL, { method: 'POST', body: '{}' }),
    new Request(`${PLANE_URL}/nope`),
  ];
  const statuses: number[] = [];
  for (const request of requests) {
    const response = await fx.plane.fetch(request);
    statuses.push(response.status);
    const text = await response.text();
    assert.equal(response.headers.get('Content-Type'), 'application/problem+json', text);
    for (const marker of LEAK_MARKERS) assert.doesNotMatch(text, marker, text);
  }
  assert.deepEqual(statuses, [400, 400, 500, 403, 401, 404]);
});

test('META-08 no token, assertion, proof, HMAC signature or secret in logs or service-visible URLs', async () => {
  const fx = await createPlaneDeployment();
  const authorizations: string[] = [];
  const tokens: string[] = [];
  const capture = async (request: Request) => {
    const authorization = request.headers.get('Authorization');
    if (authorization !== null) authorizations.push(authorization.split(' ')[1] ?? '');
    const response = await fx.plane.fetch(request);
    const body = await response.clone().json().catch(() => ({}));
    if (typeof body.token === 'string') tokens.push(body.token);
    return response;
  };
  const hmac = controlPlaneHmacTokenRequester({
    clientId: 'hc1',
    controlPlaneUrl: PLANE_URL,
    clientSecret: HMAC_SECRETS.hc1,
    fetch: capture,
  });
  const jwk = controlPlaneJwkTokenRequester({
    clientId: 'jc1',
    controlPlaneUrl: PLANE_URL,
    keyId: fx.keys.K1.kid,
    privateJwk: fx.keys.K1.privateJwk,
    issuer: ISS,
    fetch: capture,
  });
  const proofs: string[] = [];
  const prover = async (input: { token: string; targetServiceId: string; abilityId: string }) => {
    const proof = await jwk.proveTokenPossession(input);
    proofs.push(proof);
    return proof;
  };
  {
    using overBatch = fx.session('svc-a.echo', { requester: hmac });
    await overBatch.whoami({});
    using overSocket = fx.session('svc-a.echo', {
      requester: jwk,
      callerServiceId: 'svc-jwk',
      proveTokenPossession: prover,
      transport: 'websocket',
    });
    await overSocket.whoami({});
    using refused = fx.session('svc-a.echo', { requester: hmac });
    await assert.rejects(refused.write({}));
    using brokered = fx.plane.abilitySession({
      abilityId: 'svc-b.echo',
      targetServiceId: 'svc-b',
      scopes: ['svc-b.read'],
      caller: { id: 'alice', kind: 'user' },
    });
    await brokered.whoami({});
  }
  // A refused caller too: its signature must not reach the log either.
  const forged = await hmacTokenRequest(tokenBody(), { secret: 'wrong-secret-0123456789abcdef' });
  authorizations.push(forged.headers.get('Authorization')!.split(' ')[1]!);
  assert.equal((await fx.plane.fetch(forged)).status, 401);

  const secrets = [
    ...tokens,
    ...authorizations,
    ...proofs,
    ...fx.tokensAt('svc-b'),
    HMAC_SECRETS.hc1,
  ];
  assert.ok(tokens.length >= 2 && authorizations.length >= 3 && proofs.length >= 1);
  const logged = JSON.stringify(fx.events);
  assert.ok(fx.events.length > 0);
  for (const secret of secrets) {
    assert.ok(secret.length > 16);
    assert.equal(logged.includes(secret), false, 'a credential reached a log event');
  }
  const allowed = new Set(['request_id', 'conn_info', 'timeout', 'idempotency_key']);
  assert.ok(fx.requests.length > 0);
  for (const record of fx.requests) {
    for (const secret of secrets) assert.equal(record.url.includes(secret), false, record.url);
    for (const name of new URL(record.url).searchParams.keys()) {
      assert.ok(allowed.has(name), `query parameter ${name} in ${record.url}`);
    }
  }
});

test('ERR-09 (REST) REST 400, 422 and 500 answers carry no stack traces, file paths, node_modules or secrets', async () => {
  const fx = await createPlaneDeployment();
  const requests: [Request, number][] = [
    [restPost('/items/x', '{"name":'), 400],
    [restPost('/items/x', { name: 42 }), 422],
    [restPost('/fail', { kind: 'error' }), 500],
    [restPost('/fail', { kind: 'cause' }), 500],
    [restPost('/fail', { kind: 'aggregate' }), 500],
    [new Request(`${PLANE_URL}/bad-output`, { headers: BOB }), 500],
  ];
  for (const [request, status] of requests) {
    const response = await fx.plane.fetch(request);
    const text = await response.text();
    const { pathname } = new URL(request.url);
    assertReadResponseMatchesOpenApi(await fx.openapi(), request.method, pathname, {
      status: response.status,
      headers: response.headers,
      body: JSON.parse(text),
    });
    assert.equal(response.status, status, text);
    assert.equal(response.headers.get('Content-Type'), 'application/problem+json', text);
    for (const marker of LEAK_MARKERS) assert.doesNotMatch(text, marker, text);
    assert.equal(text.includes(fx.stats.marker), false, text);
    assert.equal(text.includes('postgres://'), false, text);
  }
});

test('ERR-10 (REST) no automatic retry: a retryable 503 from an idempotent method runs the handler once', async () => {
  const fx = await createPlaneDeployment();
  const response = await fx.rest('POST', '/fail-shaped', {
    bearer: 't-bob',
    body: { status: 503, retryable: true, reason: 'busy' },
  });
  assert.equal(response.status, 503);
  assert.equal(response.body.code, 'handler');
  assert.equal(response.body.retryable, true);
  assert.equal(response.body.reason, 'busy');
  assert.equal(fx.count('calls', 'svc-a.echo#failShaped'), 1);
  assert.equal(fx.rpcRequests('svc-a').length, 1);
});

test('DOS-02 (REST) a body of 100 000 nested arrays or objects is a bounded 400; the plane stays up', async () => {
  const fx = await createPlaneDeployment();
  const depth = 100_000;
  for (const [open, close] of [['[', ']'], ['{"a":', '}']]) {
    const body = `{"name":${open.repeat(depth)}1${close.repeat(depth)}}`;
    const response = await fx.checkedRest(restPost('/items/x', body));
    assert.equal(response.status, 400, open);
    assert.equal(response.body.reason, 'invalid_json_body');
  }
  assert.equal(fx.rpcRequests('svc-a').length, 0);
  const after = await fx.rest('GET', '/items/x', { bearer: 't-bob' });
  assert.equal(after.status, 200);
});

test('DOS-06 (REST) a body with one 20 MiB string field is 413 at once; the service never sees it', async () => {
  const fx = await createPlaneDeployment();
  const body = `{"id":"x","name":"${'x'.repeat(20 * 1024 * 1024)}"}`;
  const response = await fx.checkedRest(restPost('/items/x', body));
  assert.equal(response.status, 413);
  assert.equal(response.body.reason, 'body_too_large');
  assert.equal(fx.rpcRequests('svc-a').length, 0);
  assert.equal(fx.count('calls', 'svc-a.echo#items.update'), 0);
  assert.equal(fx.middleware.runs, 0);
});
