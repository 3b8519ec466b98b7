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
  ];
  for (const [label, request, status] of cases) {
    const response = await fx.plane.fetch(request);
    assert.equal(response.status, status, label);
    const id = response.headers.get('X-Request-Id');
    assert.ok(id !== null && id.length > 0, `${label}: X-Request-Id`);
    await response.body?.cancel();
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
