// Contract "Control-plane routes" for the routes built so far: the token endpoint (bodies as
// DESIGN.md fixes them, no-store on every answer, problem+json errors, the 16 KiB limit, subject
// refusal) and the JWKS route (no catalog, cache headers, `svc:jwks` tag), plus `X-Request-Id`
// on every plane response.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  createPlaneDeployment,
  decodeJws,
  hmacTokenRequest,
  JWKS_URL,
  PLANE_URL,
  type ReadResponse,
  readResponse,
  TOKEN_URL,
  tokenBody,
} from './plane-fixture.ts';

function assertNoStore(response: ReadResponse, label: string): void {
  assert.equal(response.headers.get('Cache-Control'), 'no-store', label);
  assert.equal(response.headers.get('Pragma'), 'no-cache', label);
}

function assertProblem(response: ReadResponse, status: number, label: string): void {
  assert.equal(response.status, status, label);
  assert.equal(response.headers.get('Content-Type'), 'application/problem+json', label);
  for (const field of ['type', 'title', 'status', 'detail', 'code', 'retryable', 'requestId']) {
    assert.ok(field in response.body, `${label}: ${field}`);
  }
  assert.equal(response.body.status, status, label);
  assert.equal(response.body.requestId, response.headers.get('X-Request-Id'), label);
}

test('Control-plane routes: the token endpoint answers the documented response body', async () => {
  const fx = await createPlaneDeployment();
  const before = Math.floor(Date.now() / 1000);
  const response = await fx.send(
    await hmacTokenRequest(tokenBody({ scopes: ['svc-a.write', 'svc-a.read'] })),
  );
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('Content-Type'), 'application/json');
  assert.deepEqual(Object.keys(response.body).sort(), [
    'expiresAt',
    'expiresIn',
    'scopes',
    'token',
    'tokenType',
  ]);
  assert.equal(response.body.tokenType, 'svc-capability');
  assert.deepEqual(response.body.scopes, ['svc-a.read', 'svc-a.write']);
  const { claims } = decodeJws(response.body.token);
  assert.equal(response.body.expiresAt, new Date((claims.exp as number) * 1000).toISOString());
  assert.ok(response.body.expiresIn >= 118 && response.body.expiresIn <= 120);
  assert.ok((claims.iat as number) >= before - 1);
});

test('Control-plane routes: the token request states the caller and takes abilityId and ttlSeconds', async () => {
  const fx = await createPlaneDeployment();
  const short = await fx.send(await hmacTokenRequest(tokenBody({ ttlSeconds: 30 })));
  const { claims } = decodeJws(short.body.token);
  assert.equal((claims.exp as number) - (claims.iat as number), 30);
  assert.ok(short.body.expiresIn <= 30);
  // The plane's lifetime (here the default, 120 s) is the longest a request may ask for.
  const capped = await fx.send(await hmacTokenRequest(tokenBody({ ttlSeconds: 999_999 })));
  const cappedClaims = decodeJws(capped.body.token).claims;
  assert.equal((cappedClaims.exp as number) - (cappedClaims.iat as number), 120);
  assert.ok(capped.body.expiresIn <= 120);
  const known = await fx.send(await hmacTokenRequest(tokenBody({ abilityId: 'svc-a.echo' })));
  assert.equal(known.status, 200);
  const unknown = await fx.send(await hmacTokenRequest(tokenBody({ abilityId: 'svc-a.nope' })));
  assert.equal(unknown.status, 403);
  assert.equal(unknown.body.reason, 'unknown_ability');
  const invalid = await fx.send(await hmacTokenRequest(tokenBody({ ttlSeconds: -5 })));
  assert.equal(invalid.status, 400);
  const otherCaller = await fx.send(
    await hmacTokenRequest(tokenBody({ callerServiceId: 'svc-jwk' })),
  );
  assert.equal(otherCaller.status, 403, 'callerServiceId must be the authenticated caller');
  assert.equal(otherCaller.body.reason, 'caller_mismatch');
});

test('Control-plane routes: every token endpoint answer carries no-store and Pragma', async () => {
  const fx = await createPlaneDeployment();
  fx.stop('svc-d');
  const answers: [string, ReadResponse][] = [
    ['200', await fx.send(await hmacTokenRequest(tokenBody()))],
    ['400', await fx.send(await hmacTokenRequest('{"targetServiceId":'))],
    ['401', await fx.send(new Request(TOKEN_URL, { method: 'POST', body: '{}' }))],
    ['403', await fx.send(await hmacTokenRequest(tokenBody({ subject: { id: 'victim' } })))],
    ['405', await fx.send(new Request(TOKEN_URL))],
    ['413', await fx.send(new Request(TOKEN_URL, { method: 'POST', body: 'x'.repeat(20_000) }))],
    [
      '500',
      await fx.send(
        await hmacTokenRequest(tokenBody({ targetServiceId: 'svc-d', scopes: ['svc-d.read'] })),
      ),
    ],
  ];
  for (const [status, response] of answers) {
    assert.equal(String(response.status), status);
    assertNoStore(response, status);
  }
});

test('Control-plane routes: token endpoint errors are problem+json', async () => {
  const fx = await createPlaneDeployment();
  const unauthenticated = await fx.send(new Request(TOKEN_URL, { method: 'POST', body: '{}' }));
  assertProblem(unauthenticated, 401, '401');
  assert.equal(unauthenticated.body.code, 'capability_auth');
  assert.ok((unauthenticated.headers.get('WWW-Authenticate') ?? '').length > 0);
  const invalid = await fx.send(await hmacTokenRequest({ targetServiceId: 'svc-a' }));
  assertProblem(invalid, 400, '400');
  assert.ok(Array.isArray(invalid.body.issues) && invalid.body.issues.length > 0);
  const denied = await fx.send(await hmacTokenRequest(tokenBody({ scopes: ['svc-a.nope'] })));
  assertProblem(denied, 403, '403');
  assert.equal(denied.body.code, 'capability_auth');
  assert.equal(denied.body.retryable, false);
  assert.equal(denied.body.reason, 'unknown_scope');
});

test('Control-plane routes: a caller-supplied subject is refused with 403', async () => {
  const fx = await createPlaneDeployment({ countSigningKeyLookups: true });
  const response = await fx.send(
    await hmacTokenRequest(tokenBody({ subject: { id: 'victim', kind: 'user' } })),
  );
  assertProblem(response, 403, 'subject');
  assert.equal(response.body.reason, 'subject_not_allowed');
  assert.equal(response.body.token, undefined);
  assert.equal(fx.counters.signingKeyLookups, 0, 'nothing was minted');
});

test('Control-plane routes: any subject member is refused with 403, even null or not an object', async () => {
  const fx = await createPlaneDeployment({ countSigningKeyLookups: true });
  for (const subject of [null, {}, 'alice', []]) {
    const label = JSON.stringify(subject);
    const response = await fx.send(await hmacTokenRequest(tokenBody({ subject })));
    assertProblem(response, 403, label);
    assert.equal(response.body.reason, 'subject_not_allowed', label);
    assert.equal(response.body.token, undefined, label);
  }
  assert.equal(fx.counters.signingKeyLookups, 0, 'nothing was minted');
});

test('Control-plane routes: the token request body is limited to 16 KiB', async () => {
  const fx = await createPlaneDeployment();
  const base = JSON.stringify(tokenBody());
  const exact = base + ' '.repeat(16 * 1024 - base.length);
  assert.equal(new TextEncoder().encode(exact).length, 16 * 1024);
  assert.equal((await fx.send(await hmacTokenRequest(exact))).status, 200);
  const over = await fx.send(await hmacTokenRequest(exact + ' '));
  assertProblem(over, 413, 'signed, one byte over');
  // Without Content-Length (a stream), the limit holds as the bytes arrive.
  const chunk = new TextEncoder().encode('x'.repeat(4096));
  let sent = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      sent += chunk.length;
      if (sent > 1024 * 1024) controller.close();
      else controller.enqueue(chunk);
    },
  });
  const streamed = await fx.send(
    new Request(TOKEN_URL, { method: 'POST', body: stream, duplex: 'half' } as RequestInit),
  );
  assertProblem(streamed, 413, 'streamed');
  assert.ok(sent < 1024 * 1024, 'the plane stopped reading early');
});

test('Control-plane routes: the JWKS route needs no catalog', async () => {
  const fx = await createPlaneDeployment();
  let resolved = 0;
  const plane = await fx.activate(fx.replica(['k1', 'k2'], {
    services: () => {
      resolved++;
      throw new Error('catalog backend down');
    },
  }));
  const jwks = await readResponse(await plane.fetch(new Request(JWKS_URL)));
  assert.equal(jwks.status, 200);
  assert.deepEqual(jwks.body.keys.map((key: { kid: string }) => key.kid), ['k1', 'k2']);
  assert.equal(resolved, 0, 'the JWKS route never asked for the catalog');
  const token = await fx.send(await hmacTokenRequest(tokenBody()));
  assert.equal(token.status, 500);
  assert.equal(token.body.reason, 'catalog_unavailable');
  assert.ok(resolved > 0);
});

test('Control-plane routes: the JWKS route emits cache headers only with httpCache', async () => {
  const fx = await createPlaneDeployment();
  const uncached = await readResponse(await fx.plane.fetch(new Request(JWKS_URL)));
  assert.equal(uncached.headers.get('Cache-Tag'), null);
  assert.doesNotMatch(uncached.headers.get('Cache-Control') ?? '', /max-age/);
  const defaults = await fx.activate(fx.replica(['k1'], { httpCache: true }));
  const cached = await readResponse(await defaults.fetch(new Request(JWKS_URL)));
  assert.equal(
    cached.headers.get('Cache-Control'),
    'public, max-age=60, stale-while-revalidate=300',
  );
  assert.equal(cached.headers.get('Cache-Tag'), 'svc:jwks');
  assert.equal(cached.headers.get('Content-Type'), 'application/jwk-set+json');
  const custom = await fx.activate(fx.replica(['k1'], {
    httpCache: { maxAgeSeconds: 30, staleWhileRevalidateSeconds: 0, tags: ['edge-keys'] },
  }));
  const rotation = await readResponse(await custom.fetch(new Request(JWKS_URL)));
  assert.equal(rotation.headers.get('Cache-Control'), 'public, max-age=30');
  assert.equal(rotation.headers.get('Cache-Tag'), 'svc:jwks,edge-keys');
  // The token endpoint stays uncacheable whatever httpCache says.
  assertNoStore(await fx.send(await hmacTokenRequest(tokenBody())), 'token with httpCache');
});

test('Control-plane routes: every plane response carries X-Request-Id', async () => {
  const fx = await createPlaneDeployment();
  const responses: [string, Response][] = [
    ['JWKS 200', await fx.plane.fetch(new Request(JWKS_URL))],
    ['token 200', await fx.plane.fetch(await hmacTokenRequest(tokenBody()))],
    ['token 401', await fx.plane.fetch(new Request(TOKEN_URL, { method: 'POST', body: '{}' }))],
    ['token 405', await fx.plane.fetch(new Request(TOKEN_URL, { method: 'PUT', body: '{}' }))],
    ['404', await fx.plane.fetch(new Request(`${PLANE_URL}/no/such/route`))],
    ['JWKS POST', await fx.plane.fetch(new Request(JWKS_URL, { method: 'POST' }))],
  ];
  for (const [label, response] of responses) {
    const id = response.headers.get('X-Request-Id');
    assert.ok(id !== null && id.length > 0, label);
    await response.body?.cancel();
  }
  const notFound = await readResponse(await fx.plane.fetch(new Request(`${PLANE_URL}/nope`)));
  assertProblem(notFound, 404, '404');
  const echoed = await fx.plane.fetch(
    new Request(JWKS_URL, { headers: { 'X-Request-Id': 'req-from-edge-42' } }),
  );
  assert.equal(echoed.headers.get('X-Request-Id'), 'req-from-edge-42');
  const hostile = await fx.plane.fetch(
    new Request(JWKS_URL, { headers: { 'X-Request-Id': 'a'.repeat(300) } }),
  );
  const replaced = hostile.headers.get('X-Request-Id') ?? '';
  assert.match(replaced, /^[0-9a-f-]{36}$/, 'an unusable incoming id is replaced by a UUID');
});

test('Control-plane routes: the plane ttlSeconds is the default lifetime and the longest one a request gets', async () => {
  const fx = await createPlaneDeployment({ plane: { ttlSeconds: 60 } });
  const lifetime = async (extra: Record<string, unknown>) => {
    const response = await fx.send(await hmacTokenRequest(tokenBody(extra)));
    assert.equal(response.status, 200, JSON.stringify(extra));
    const { claims } = decodeJws(response.body.token);
    assert.ok(response.body.expiresIn <= 60);
    return (claims.exp as number) - (claims.iat as number);
  };
  assert.equal(await lifetime({}), 60);
  assert.equal(await lifetime({ ttlSeconds: 30 }), 30);
  assert.equal(await lifetime({ ttlSeconds: 61 }), 60);
  assert.equal(await lifetime({ ttlSeconds: 3600 }), 60);
  // The same ceiling holds in process, for every issuing function and for the requesters.
  const inProcess = await fx.plane.issueCapabilityToken({
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    callerAccess: 'service',
    ttlSeconds: 3600,
  });
  const inProcessClaims = decodeJws(inProcess.token).claims;
  assert.equal((inProcessClaims.exp as number) - (inProcessClaims.iat as number), 60);
  const requested = await fx.hmacRequester('hc1', { ttlSeconds: 3600 })({
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    abilityId: 'svc-a.echo',
    scopes: ['svc-a.read'],
  });
  const requestedClaims = decodeJws(requested).claims;
  assert.equal((requestedClaims.exp as number) - (requestedClaims.iat as number), 60);
});
