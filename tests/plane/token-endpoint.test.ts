/**
 * The token endpoint handler: order of checks, body limits (DOS-01, DOS-07, DOS-08), subject
 * injection (DEL-01..04), response and problem formats, and `Authorization` parsing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  AbilityHandlerError,
  CapabilityAuthError,
  SvcConfigurationError,
} from '../../src/core/errors.ts';
import {
  authenticateTokenRequest,
  type CallerAuthenticator,
  CallerAuthError,
  parseAuthorization,
} from '../../src/plane/caller-auth.ts';
import { createTokenEndpoint } from '../../src/plane/token-endpoint.ts';
import {
  assertIssued,
  assertNoStore,
  assertUnauthorized,
  endpointFixture,
  hmacBody,
  ISSUER,
  jwkBody,
  requestFrom,
  signedHmacParts,
  signedJwkParts,
  TOKEN_URL,
} from '../support/token-endpoint-fixture.ts';

const MiB = 1024 * 1024;

/** A body generated lazily in 64 KiB chunks, counting what was pulled. */
function lazyBody(
  totalBytes: number,
  counter: { pulled: number },
  options: { stallAfter?: number } = {},
): ReadableStream<Uint8Array> {
  const chunkSize = 64 * 1024;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (options.stallAfter !== undefined && counter.pulled >= options.stallAfter) {
        return new Promise(() => {}); // never sends more, never ends
      }
      if (counter.pulled >= totalBytes) {
        controller.close();
        return;
      }
      const size = Math.min(chunkSize, totalBytes - counter.pulled);
      counter.pulled += size;
      controller.enqueue(new Uint8Array(size).fill(0x20));
    },
  });
}

function streamingRequest(
  body: ReadableStream<Uint8Array>,
  headers: HeadersInit = {},
): Request {
  return new Request(TOKEN_URL, {
    method: 'POST',
    headers,
    body,
    duplex: 'half',
  } as RequestInit);
}

function simpleEndpoint(authenticators: CallerAuthenticator[] | undefined) {
  const logged: unknown[] = [];
  const endpoint = createTokenEndpoint({
    authenticators,
    issuer: ISSUER,
    log: (event) => logged.push(event),
    issue: async () => ({ token: 't', expiresAt: new Date(Date.now() + 60_000), scopes: ['s'] }),
  });
  return { endpoint, logged };
}

test('a successful answer carries token, tokenType, expiresAt, expiresIn and scopes', async () => {
  const fixture = await endpointFixture();
  const parts = await signedHmacParts(fixture, {
    body: hmacBody({ scopes: ['svc-a.write', 'svc-a.read', 'svc-a.read'], ttlSeconds: 300 }),
  });
  const response = await fixture.handle(requestFrom(parts));
  const { body, claims } = await assertIssued(response);
  assert.equal(response.headers.get('Content-Type'), 'application/json');
  assert.deepEqual(body.scopes, ['svc-a.read', 'svc-a.write']);
  assert.equal(body.expiresAt, new Date((claims.exp as number) * 1000).toISOString());
  assert.ok(body.expiresIn > 290 && body.expiresIn <= 300, `expiresIn ${body.expiresIn}`);
  assert.deepEqual(Object.keys(body).sort(), [
    'expiresAt',
    'expiresIn',
    'scopes',
    'token',
    'tokenType',
  ]);
});

test('only POST is served: other methods get 405 with Allow and no-store', async () => {
  const fixture = await endpointFixture();
  for (const method of ['GET', 'PUT', 'DELETE', 'PATCH']) {
    const init: RequestInit = { method };
    if (method !== 'GET') init.body = '{}';
    const response = await fixture.handle(new Request(TOKEN_URL, init), 'rid-405');
    assert.equal(response.status, 405);
    assert.equal(response.headers.get('Allow'), 'POST');
    assertNoStore(response);
    const problem = await response.json();
    assert.equal(problem.requestId, 'rid-405');
    assert.equal(response.headers.get('Content-Type'), 'application/problem+json');
  }
});

test('without authenticators every request is 401 and svc.caller_auth.not_configured is logged', async () => {
  const fixture = await endpointFixture({ authenticators: 'none' });
  const parts = await signedHmacParts(fixture);
  const response = await fixture.handle(requestFrom(parts), 'rid-none');
  assert.equal(response.status, 401);
  assertNoStore(response);
  // A 401 always carries a challenge: here the schemes the endpoint speaks.
  assert.equal(
    response.headers.get('WWW-Authenticate'),
    'Svc-HMAC-SHA256 realm="svc-capability-token", Svc-JWK realm="svc-capability-token"',
  );
  assert.equal((await response.json()).code, 'capability_auth');
  const event = fixture.events.find((e) => e.event === 'svc.caller_auth.not_configured');
  assert.equal(event?.requestId, 'rid-none');
  assert.equal(event?.level, 'warn');
  assert.equal(fixture.issued.length, 0);
  const empty = simpleEndpoint([]);
  assert.equal((await empty.endpoint(requestFrom(parts), 'r')).status, 401);
  assert.equal(empty.logged.length, 1);
});

test('caller-auth 401s are byte-identical whatever check failed; the log says which', async () => {
  const fixture = await endpointFixture();
  const good = await signedHmacParts(fixture);
  const unknownClient = await signedHmacParts(fixture, { clientId: 'nobody' });
  const badSignature = await signedHmacParts(fixture, { secret: 'wrong-secret' });
  const bodies: string[] = [];
  const challenges: (string | null)[] = [];
  for (const parts of [unknownClient, badSignature, { ...good, headers: {} }]) {
    const response = await fixture.handle(requestFrom(parts), 'same-rid');
    assert.equal(response.status, 401);
    challenges.push(response.headers.get('WWW-Authenticate'));
    bodies.push(await response.text());
  }
  assert.equal(new Set(bodies).size, 1);
  assert.equal(new Set(challenges).size, 1);
  assert.match(challenges[0]!, /Svc-HMAC-SHA256 realm=/);
  assert.match(challenges[0]!, /Svc-JWK realm=/);
  const reasons = fixture.events.map((e) => `${e.event} ${e.reason}`);
  assert.deepEqual(reasons, [
    'svc.caller_auth.hmac_unauthorized unknown_client',
    'svc.caller_auth.hmac_unauthorized signature_mismatch',
    // No Authorization names no scheme: every configured authenticator reports it.
    'svc.caller_auth.hmac_unauthorized authorization_missing',
    'svc.caller_auth.jwk_unauthorized authorization_missing',
  ]);
});

test('DOS-01 a 50 MiB body is refused 413 quickly, signed or not, with or without Content-Length', async () => {
  const fixture = await endpointFixture();
  const signed = await signedHmacParts(fixture);
  const started = Date.now();
  for (const authenticated of [true, false]) {
    for (const withLength of [true, false]) {
      const counter = { pulled: 0 };
      const headers = new Headers(authenticated ? signed.headers : {});
      if (withLength) headers.set('Content-Length', String(50 * MiB));
      const response = await fixture.handle(
        streamingRequest(lazyBody(50 * MiB, counter), headers),
      );
      assert.ok(
        response.status === 413 || response.status === 401,
        `status ${response.status}`,
      );
      assertNoStore(response);
      assert.ok(counter.pulled <= 256 * 1024, `pulled ${counter.pulled} bytes`);
    }
  }
  assert.ok(Date.now() - started < 2000, 'answered within 2 s');
  assert.equal(fixture.issued.length, 0);
});

test('DOS-07 10 000 scopes or a 1 MiB targetServiceId never yield a token', async () => {
  const fixture = await endpointFixture();
  const manyScopes = hmacBody({ scopes: Array.from({ length: 10_000 }, (_, i) => `svc-a.s${i}`) });
  const longTarget = hmacBody({ targetServiceId: 'x'.repeat(MiB) });
  for (const body of [manyScopes, longTarget]) {
    const response = await fixture.handle(requestFrom(await signedHmacParts(fixture, { body })));
    assert.ok(response.status >= 400 && response.status < 500, `status ${response.status}`);
    assertNoStore(response);
  }
  // Under a larger body limit the same requests are refused by the field limits.
  const roomy = await endpointFixture({ maxBodyBytes: 4 * MiB });
  const limits = [
    [manyScopes, ['scopes']],
    [longTarget, ['targetServiceId']],
    [hmacBody({ scopes: Array.from({ length: 65 }, (_, i) => `s${i}`) }), ['scopes']],
    [hmacBody({ targetServiceId: 't'.repeat(129) }), ['targetServiceId']],
    [hmacBody({ scopes: ['s'.repeat(129)] }), ['scopes', 0]],
  ] as const;
  for (const [body, path] of limits) {
    const response = await roomy.handle(requestFrom(await signedHmacParts(roomy, { body })));
    assert.equal(response.status, 400);
    const problem = await response.json();
    assert.deepEqual(problem.issues[0].path, path);
  }
  assert.equal(fixture.issued.length + roomy.issued.length, 0);
});

test('DOS-08 a lying Content-Length is bounded; the signature covers the bytes received', async () => {
  const fixture = await endpointFixture({ bodyTimeoutMs: 300 });
  const signed = await signedHmacParts(fixture);

  // Declares 10 bytes, streams 10 MiB: reading stops past the limit.
  const counter = { pulled: 0 };
  const understated = new Headers(signed.headers);
  understated.set('Content-Length', '10');
  const flood = await fixture.handle(streamingRequest(lazyBody(10 * MiB, counter), understated));
  assert.equal(flood.status, 413);
  assert.ok(counter.pulled <= 256 * 1024);

  // Declares 10 MiB, sends 10 bytes, stalls: refused up front (or by the body timeout).
  const overstated = new Headers(signed.headers);
  overstated.set('Content-Length', String(10 * MiB));
  const started = Date.now();
  const stalled = await fixture.handle(
    streamingRequest(lazyBody(10 * MiB, { pulled: 0 }, { stallAfter: 10 }), overstated),
  );
  assert.ok([413, 408].includes(stalled.status), `status ${stalled.status}`);

  // A small declared length and a stall: the body timeout ends the wait.
  const small = new Headers(signed.headers);
  small.set('Content-Length', '100');
  const timedOut = await fixture.handle(
    streamingRequest(lazyBody(100, { pulled: 0 }, { stallAfter: 10 }), small),
  );
  assert.equal(timedOut.status, 408);
  assert.equal(timedOut.headers.get('connection'), 'close');
  assertNoStore(timedOut);
  assert.equal((await timedOut.json()).retryable, true);
  assert.ok(Date.now() - started < 2000);

  // Content-Length says 10, the signed body is longer: the bytes received are what is checked.
  const exact = new Headers(signed.headers);
  exact.set('Content-Length', '10');
  const bytes = new TextEncoder().encode(signed.body);
  const honest = await fixture.handle(
    streamingRequest(
      new ReadableStream({
        start(controller) {
          controller.enqueue(bytes);
          controller.close();
        },
      }),
      exact,
    ),
  );
  await assertIssued(honest);
  assert.equal(fixture.issued.length, 1);
});

test('a body that fails mid-way (the client went away) is a 400 body_unreadable, nothing issued', async () => {
  const fixture = await endpointFixture();
  const signed = await signedHmacParts(fixture);
  let sent = false;
  const broken = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent) return controller.error(new TypeError('terminated: other side closed'));
      sent = true;
      controller.enqueue(new TextEncoder().encode(signed.body.slice(0, 10)));
    },
  });
  const response = await fixture.handle(streamingRequest(broken, signed.headers));
  assert.equal(response.status, 400);
  assertNoStore(response);
  assert.equal((await response.json()).reason, 'body_unreadable');
  assert.equal(fixture.issued.length, 0);
});

test('DEL-01 a signed request carrying subject is refused 403 on both caller paths', async () => {
  const fixture = await endpointFixture();
  const hmac = await signedHmacParts(fixture, { body: hmacBody({ subject: { id: 'victim' } }) });
  const jwk = await signedJwkParts(fixture, { body: jwkBody({ subject: { id: 'victim' } }) });
  for (const parts of [hmac, jwk]) {
    const response = await fixture.handle(requestFrom(parts));
    assert.equal(response.status, 403);
    assertNoStore(response);
    const problem = await response.json();
    assert.equal(problem.code, 'capability_auth');
    assert.equal(problem.reason, 'subject_not_allowed');
  }
  assert.equal(fixture.issued.length, 0);
});

test('DEL-02 every subject value is refused 403', async () => {
  const fixture = await endpointFixture();
  const subjects = [{}, [], 'victim', { id: 'victim', orgId: 'o', kind: 'user' }, null, 0, false];
  for (const subject of subjects) {
    const parts = await signedHmacParts(fixture, { body: hmacBody({ subject }) });
    const response = await fixture.handle(requestFrom(parts));
    assert.equal(response.status, 403, JSON.stringify(subject));
  }
  assert.equal(fixture.issued.length, 0);
});

const SMUGGLED = {
  act: { sub: 'svc-x' },
  sub: 'svc-admin',
  spa: 'plane',
  callerAccess: 'plane',
  spk: 'api_key',
  principalKind: 'user',
  spo: 'org-1',
  orgId: 'org-1',
  spb: 'control-plane',
  brokerServiceId: 'control-plane',
  cnf: { jkt: 'A'.repeat(43) },
  confirmation: { jkt: 'A'.repeat(43) },
};

test('DEL-03 fields next to a subject never reach the token', async () => {
  const fixture = await endpointFixture();
  const hmac = await signedHmacParts(fixture, { body: hmacBody(SMUGGLED) });
  const { claims } = await assertIssued(await fixture.handle(requestFrom(hmac)));
  assert.equal(claims.spa, 'service');
  assert.equal(claims.sub, 'svc-caller');
  for (const absent of ['act', 'spk', 'spo', 'spb', 'cnf']) assert.equal(absent in claims, false);
  assert.deepEqual(Object.keys(fixture.issued[0].request).sort(), [
    'callerServiceId',
    'scopes',
    'targetServiceId',
  ]);

  const jwk = await signedJwkParts(fixture, { body: jwkBody(SMUGGLED) });
  const bound = await assertIssued(await fixture.handle(requestFrom(jwk)));
  assert.equal(bound.claims.sub, 'svc-jwk');
  assert.notEqual((bound.claims.cnf as { jkt: string }).jkt, 'A'.repeat(43));
  assert.equal(
    (bound.claims.cnf as { jkt: string }).jkt,
    fixture.issued[1].caller.confirmationJkt,
  );
});

test('DEL-04 look-alike subject names are unknown fields: a plain token', async () => {
  const fixture = await endpointFixture();
  for (const name of ['Subject', 'subject ', 'subjects', 'SUBJECT']) {
    const parts = await signedHmacParts(fixture, { body: hmacBody({ [name]: { id: 'victim' } }) });
    const { claims } = await assertIssued(await fixture.handle(requestFrom(parts)));
    assert.equal(claims.sub, 'svc-caller');
    assert.equal('act' in claims, false);
  }
});

test('field validation: types of callerServiceId, abilityId and ttlSeconds', async () => {
  const fixture = await endpointFixture();
  const invalid = [
    [hmacBody({ callerServiceId: 5 }), 'callerServiceId'],
    [hmacBody({ abilityId: '' }), 'abilityId'],
    [hmacBody({ abilityId: null }), 'abilityId'],
    [hmacBody({ ttlSeconds: 0 }), 'ttlSeconds'],
    [hmacBody({ ttlSeconds: 1.5 }), 'ttlSeconds'],
    [hmacBody({ ttlSeconds: '60' }), 'ttlSeconds'],
    [hmacBody({ scopes: [] }), 'scopes'],
  ] as const;
  for (const [body, field] of invalid) {
    const response = await fixture.handle(requestFrom(await signedHmacParts(fixture, { body })));
    assert.equal(response.status, 400, field);
    const problem = await response.json();
    assert.equal(problem.issues[0].path[0], field);
  }
  const ok = await signedHmacParts(fixture, {
    body: hmacBody({ abilityId: 'svc-a.echo', ttlSeconds: 60 }),
  });
  await assertIssued(await fixture.handle(requestFrom(ok)));
  assert.deepEqual(fixture.issued[0].request, {
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    abilityId: 'svc-a.echo',
    ttlSeconds: 60,
  });
});

test('issuance errors keep their taxonomy; unshaped ones become an opaque 500', async () => {
  const fixture = await endpointFixture();
  const parts = await signedHmacParts(fixture);
  const failing = (error: unknown) =>
    createTokenEndpoint({
      authenticators: [fixture.hmac],
      issuer: ISSUER,
      log: () => {},
      issue: () => Promise.reject(error),
    });
  const throttled = await failing(
    new AbilityHandlerError('Slow down', { status: 429, reason: 'quota' }),
  )(requestFrom(parts), 'rid-429');
  assert.equal(throttled.status, 429);
  assertNoStore(throttled);
  const problem = await throttled.json();
  assert.equal(problem.retryable, true);
  assert.equal(problem.requestId, 'rid-429');

  const leaked = await failing(new Error('SECRET postgres://u:p@db'))(requestFrom(parts), 'r');
  assert.equal(leaked.status, 500);
  assertNoStore(leaked);
  const text = await leaked.text();
  assert.equal(text.includes('SECRET'), false);
});

test('a custom authenticator: plain 401 refusals get its challenge; a malformed caller is 500', async () => {
  const refusing: CallerAuthenticator = {
    scheme: 'Custom',
    challenge: 'Custom realm="x"',
    authenticate: () =>
      Promise.reject(new CapabilityAuthError('no', { status: 401, reason: 'custom_refusal' })),
  };
  const request = () =>
    new Request(TOKEN_URL, {
      method: 'POST',
      headers: { Authorization: 'custom abc' },
      body: '{}',
    });
  const refused = await simpleEndpoint([refusing]).endpoint(request(), 'r');
  assert.equal(refused.status, 401);
  assert.equal(refused.headers.get('WWW-Authenticate'), 'Custom realm="x"');
  await assert.rejects(
    authenticateTokenRequest(request(), new Uint8Array(), [refusing], { issuer: ISSUER }),
    (error: unknown) =>
      error instanceof CallerAuthError && error.reason === 'custom_refusal' &&
      error.challenge === 'Custom realm="x"',
  );
  const malformed: CallerAuthenticator = {
    scheme: 'Custom',
    challenge: 'Custom',
    authenticate: async () => ({ clientId: 'c', serviceId: '' }),
  };
  const broken = await simpleEndpoint([malformed]).endpoint(request(), 'r');
  assert.equal(broken.status, 500);
  assertNoStore(broken);
});

test('createTokenEndpoint refuses duplicate schemes and invalid limits', async () => {
  const fixture = await endpointFixture();
  const base = { issuer: ISSUER, log: () => {}, issue: () => Promise.reject(new Error('x')) };
  assert.throws(
    () => createTokenEndpoint({ ...base, authenticators: [fixture.hmac, fixture.hmac] }),
    SvcConfigurationError,
  );
  for (const maxBodyBytes of [0, -1, 1.5]) {
    assert.throws(
      () => createTokenEndpoint({ ...base, authenticators: [fixture.hmac], maxBodyBytes }),
      SvcConfigurationError,
    );
  }
});

test('parseAuthorization takes exactly one scheme and one token68 value', () => {
  assert.deepEqual(parseAuthorization('Svc-JWK a.b.c'), { scheme: 'Svc-JWK', value: 'a.b.c' });
  assert.deepEqual(parseAuthorization('scheme  abc=='), { scheme: 'scheme', value: 'abc==' });
  // Only spaces and tabs are optional white space around a field value (RFC 9110 section 5.5).
  assert.deepEqual(parseAuthorization(' \tSvc-JWK a.b.c\t '), {
    scheme: 'Svc-JWK',
    value: 'a.b.c',
  });
  const refusals: [string | null, string][] = [
    [null, 'authorization_missing'],
    ['', 'authorization_missing'],
    [' \t ', 'authorization_missing'],
    ['\u00a0Svc-JWK a.b.c', 'authorization_malformed'],
    ['Svc-JWK a.b.c\u00a0', 'authorization_malformed'],
    ['Svc-JWK a.b.c\v', 'authorization_malformed'],
    ['Svc-JWK a.b.c\f', 'authorization_malformed'],
    ['Scheme', 'authorization_malformed'],
    ['Scheme a b', 'authorization_malformed'],
    ['Scheme a, Scheme b', 'authorization_malformed'],
    ['Scheme a=b', 'authorization_malformed'],
    ['Scheme "quoted"', 'authorization_malformed'],
    [`Scheme ${'a'.repeat(20_000)}`, 'authorization_malformed'],
  ];
  for (const [header, reason] of refusals) {
    assert.throws(
      () => parseAuthorization(header, 'Chal'),
      (error: unknown) =>
        error instanceof CallerAuthError && error.status === 401 && error.reason === reason &&
        error.challenge === 'Chal' && error.code === 'capability_auth',
      String(header),
    );
  }
});

test('an unknown scheme is refused with the challenges of every configured scheme', async () => {
  const fixture = await endpointFixture();
  const request = new Request(TOKEN_URL, {
    method: 'POST',
    headers: { Authorization: 'Bearer abc' },
    body: '{}',
  });
  await assert.rejects(
    authenticateTokenRequest(request, new Uint8Array(), [fixture.hmac, fixture.jwk], {
      issuer: ISSUER,
      requestId: 'rid-x',
    }),
    (error: unknown) =>
      error instanceof CallerAuthError && error.reason === 'unsupported_scheme' &&
      error.challenge.includes('Svc-HMAC-SHA256') && error.challenge.includes('Svc-JWK'),
  );
  const reported = fixture.events.filter((e) => e.requestId === 'rid-x').map((e) => e.event);
  assert.deepEqual(reported.sort(), [
    'svc.caller_auth.hmac_unauthorized',
    'svc.caller_auth.jwk_unauthorized',
  ]);
  await assertUnauthorized(
    await fixture.handle(
      new Request(TOKEN_URL, { method: 'POST', headers: { Authorization: 'Bearer x' }, body: '' }),
    ),
    'Svc-JWK',
  );
});

test('the plane request context reaches issue() and the log untouched', async () => {
  const fixture = await endpointFixture();
  const seen: unknown[] = [];
  const logged: unknown[] = [];
  const requestContext = { env: { marker: 1 } };
  const endpoint = createTokenEndpoint({
    authenticators: [fixture.hmac],
    issuer: ISSUER,
    log: (_event, c) => logged.push(c),
    issue: async (_caller, _request, context) => {
      seen.push(context.requestContext, context.requestId, Object.keys(context).sort());
      return { token: 't', expiresAt: new Date(Date.now() + 60_000), scopes: ['svc-a.read'] };
    },
  });
  const parts = await signedHmacParts(fixture);
  // The request's signal is never read: on Deno reading it prints a legacy-behaviour warning.
  const request = requestFrom(parts);
  let signalReads = 0;
  const signal = request.signal;
  Object.defineProperty(request, 'signal', {
    get: () => {
      signalReads++;
      return signal;
    },
  });
  assert.equal((await endpoint(request, 'rid-c', requestContext)).status, 200);
  assert.deepEqual(seen, [requestContext, 'rid-c', ['requestContext', 'requestId']]);
  assert.equal(signalReads, 0);
  const unconfigured = createTokenEndpoint({
    authenticators: undefined,
    issuer: ISSUER,
    log: (_event, c) => logged.push(c),
    issue: () => Promise.reject(new Error('never')),
  });
  await unconfigured(requestFrom(parts), 'rid-d', requestContext);
  assert.equal(logged[0], requestContext);
});
