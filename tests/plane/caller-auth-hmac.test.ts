/**
 * HMAC caller authentication at the token endpoint: security checklist A5 (HMAC-01..20) plus the
 * authenticator's own configuration and logging rules.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SvcConfigurationError } from '../../src/core/errors.ts';
import { hmacServiceClientAuth } from '../../src/plane/caller-auth-hmac.ts';
import {
  assertIssued,
  assertNoStore,
  assertUnauthorized,
  endpointFixture,
  hmacBody,
  MAX_TTL_SECONDS,
  refusalEvents,
  requestFrom,
  signedHmacParts,
  type SignedParts,
  TOKEN_URL,
} from '../support/token-endpoint-fixture.ts';

const HMAC_EVENT = 'svc.caller_auth.hmac_unauthorized';
const nowSeconds = () => Math.floor(Date.now() / 1000);

function withHeader(parts: SignedParts, name: string, value: string | undefined): SignedParts {
  const headers = { ...parts.headers };
  for (const key of Object.keys(headers)) {
    if (key.toLowerCase() === name.toLowerCase()) delete headers[key];
  }
  if (value !== undefined) headers[name] = value;
  return { ...parts, headers };
}

/** A request whose header `name` is sent twice (the runtime joins the values with ", "). */
function withDoubledHeader(parts: SignedParts, name: string, second: string): Request {
  const headers = new Headers(parts.headers);
  headers.append(name, second);
  return new Request(parts.url, { method: parts.method, headers, body: parts.body });
}

test('HMAC-01 a correctly signed request gets a plain service-class token', async () => {
  const fixture = await endpointFixture();
  const response = await fixture.handle(requestFrom(await signedHmacParts(fixture)));
  const { body, claims } = await assertIssued(response);
  assert.equal(claims.spa, 'service');
  assert.equal(claims.sub, 'svc-caller');
  assert.equal(claims.aud, 'svc-a');
  assert.deepEqual(claims.scp, ['svc-a.read']);
  assert.deepEqual(body.scopes, ['svc-a.read']);
  for (const absent of ['cnf', 'act', 'spb', 'spk', 'spo']) {
    assert.equal(absent in claims, false, `${absent} absent`);
  }
  const lifetime = (claims.exp as number) - (claims.iat as number);
  assert.ok(lifetime > 0 && lifetime <= MAX_TTL_SECONDS);
  assert.equal(fixture.issued[0].caller.clientId, 'hc1');
  assert.equal(fixture.issued[0].caller.confirmationJkt, undefined);
});

test('HMAC-02 a byte-identical replay inside the window is accepted (no replay store)', async () => {
  const fixture = await endpointFixture();
  const parts = await signedHmacParts(fixture);
  await assertIssued(await fixture.handle(requestFrom(parts)));
  await assertIssued(await fixture.handle(requestFrom(parts)));
  assert.equal(fixture.issued.length, 2);
});

test('HMAC-03 timestamps outside the 60 s window are refused; 45 s old is accepted', async () => {
  const fixture = await endpointFixture();
  for (const offset of [-75, 75, -3600]) {
    const rid = crypto.randomUUID();
    const parts = await signedHmacParts(fixture, { timestampSeconds: nowSeconds() + offset });
    await assertUnauthorized(await fixture.handle(requestFrom(parts), rid));
    const [event] = refusalEvents(fixture, HMAC_EVENT, rid);
    assert.equal(event.reason, 'timestamp_out_of_window', `offset ${offset}`);
    assert.equal(event.level, 'warn');
    assert.equal(event.clientId, 'hc1');
  }
  const parts = await signedHmacParts(fixture, { timestampSeconds: nowSeconds() - 45 });
  await assertIssued(await fixture.handle(requestFrom(parts)));
  assert.equal(fixture.issued.length, 1);
});

test('HMAC-04 unparsable or doubled timestamps are refused', async () => {
  const fixture = await endpointFixture();
  const parts = await signedHmacParts(fixture);
  for (const value of ['', 'yesterday', 'NaN', '1e309', '-5', '17e8', '0x10']) {
    const rid = crypto.randomUUID();
    const response = await fixture.handle(
      requestFrom(withHeader(parts, 'X-Svc-Timestamp', value)),
      rid,
    );
    await assertUnauthorized(response);
    assert.equal(refusalEvents(fixture, HMAC_EVENT, rid)[0].reason, 'timestamp_malformed', value);
  }
  const timestamp = parts.headers['X-Svc-Timestamp'];
  const rid = crypto.randomUUID();
  await assertUnauthorized(
    await fixture.handle(withDoubledHeader(parts, 'X-Svc-Timestamp', timestamp), rid),
  );
  assert.equal(refusalEvents(fixture, HMAC_EVENT, rid)[0].reason, 'timestamp_malformed');
  assert.equal(fixture.issued.length, 0);
});

test('HMAC-05 a body edited after signing is refused (the hash covers the raw bytes)', async () => {
  const fixture = await endpointFixture();
  const parts = await signedHmacParts(fixture);
  const flipped = parts.body.replace('svc-a.read', 'svc-a.reae');
  const reordered = JSON.stringify({
    scopes: ['svc-a.read'],
    targetServiceId: 'svc-a',
    callerServiceId: 'svc-caller',
  });
  for (const body of [flipped, `${parts.body} `, reordered]) {
    const rid = crypto.randomUUID();
    await assertUnauthorized(await fixture.handle(requestFrom({ ...parts, body }), rid));
    assert.equal(refusalEvents(fixture, HMAC_EVENT, rid)[0].reason, 'signature_mismatch');
  }
  assert.equal(fixture.issued.length, 0);
});

test('HMAC-06 retargeting after signing is refused', async () => {
  const fixture = await endpointFixture();
  const parts = await signedHmacParts(fixture);
  const body = JSON.stringify(hmacBody({ targetServiceId: 'svc-c' }));
  await assertUnauthorized(await fixture.handle(requestFrom({ ...parts, body })));
  assert.equal(fixture.issued.length, 0);
});

test('HMAC-07 widening the scopes after signing is refused', async () => {
  const fixture = await endpointFixture();
  const parts = await signedHmacParts(fixture);
  const body = JSON.stringify(hmacBody({ scopes: ['svc-a.read', 'svc-a.write'] }));
  await assertUnauthorized(await fixture.handle(requestFrom({ ...parts, body })));
  assert.equal(fixture.issued.length, 0);
});

test('HMAC-08 a TTL added after signing is refused; a signed over-max TTL is capped', async () => {
  const fixture = await endpointFixture();
  const parts = await signedHmacParts(fixture);
  const body = JSON.stringify(hmacBody({ ttlSeconds: 86_400 }));
  await assertUnauthorized(await fixture.handle(requestFrom({ ...parts, body })));
  assert.equal(fixture.issued.length, 0);

  const signed = await signedHmacParts(fixture, { body: hmacBody({ ttlSeconds: 86_400 }) });
  const { body: answer, claims } = await assertIssued(await fixture.handle(requestFrom(signed)));
  assert.equal(fixture.issued[0].request.ttlSeconds, 86_400, 'handed to the issuer to cap');
  assert.ok((claims.exp as number) - (claims.iat as number) <= MAX_TTL_SECONDS);
  assert.ok(answer.expiresIn <= MAX_TTL_SECONDS);
});

test('HMAC-09 swapping the client id to another registered client is refused', async () => {
  const fixture = await endpointFixture();
  const parts = await signedHmacParts(fixture);
  const rid = crypto.randomUUID();
  await assertUnauthorized(
    await fixture.handle(requestFrom(withHeader(parts, 'X-Svc-Client-Id', 'hc2')), rid),
  );
  const [event] = refusalEvents(fixture, HMAC_EVENT, rid);
  assert.equal(event.reason, 'signature_mismatch');
  assert.equal(event.clientId, 'hc2');
  assert.equal(fixture.issued.length, 0);
});

test('HMAC-10 the request id is bound: changed, removed or doubled after signing is refused', async () => {
  const fixture = await endpointFixture();
  const parts = await signedHmacParts(fixture);
  const cases: [Request, string][] = [
    [requestFrom(withHeader(parts, 'X-Request-Id', 'another-id')), 'signature_mismatch'],
    [requestFrom(withHeader(parts, 'X-Request-Id', undefined)), 'request_id_missing'],
    [
      withDoubledHeader(parts, 'X-Request-Id', parts.headers['X-Request-Id']),
      'request_id_malformed',
    ],
  ];
  for (const [request, reason] of cases) {
    const rid = crypto.randomUUID();
    await assertUnauthorized(await fixture.handle(request, rid));
    assert.equal(refusalEvents(fixture, HMAC_EVENT, rid)[0].reason, reason);
  }
  assert.equal(fixture.issued.length, 0);
});

test('HMAC-11 replaying as another method or to a path variant never gets a token', async () => {
  const fixture = await endpointFixture();
  const parts = await signedHmacParts(fixture);
  for (const method of ['PUT', 'GET']) {
    const response = await fixture.handle(requestFrom({ ...parts, method }));
    assert.equal(response.status, 405);
    assert.equal(response.headers.get('Allow'), 'POST');
    assertNoStore(response);
  }
  const variants = [
    `${TOKEN_URL}/`,
    TOKEN_URL.replace('capability-token', 'Capability-Token'),
    `${TOKEN_URL}?extra=1`,
  ];
  for (const url of variants) {
    await assertUnauthorized(await fixture.handle(requestFrom({ ...parts, url })));
  }
  assert.equal(fixture.issued.length, 0);
});

test('HMAC-12 scheme and header names are case-insensitive', async () => {
  const fixture = await endpointFixture();
  for (const scheme of ['svc-hmac-sha256', 'SVC-HMAC-SHA256', 'sVc-HmAc-ShA256']) {
    const parts = await signedHmacParts(fixture);
    const value = parts.headers.Authorization.split(' ')[1];
    const headers: Record<string, string> = {};
    for (const [name, headerValue] of Object.entries(parts.headers)) {
      headers[name === 'Authorization' ? 'authorization' : name.toUpperCase()] = headerValue;
    }
    headers.authorization = `${scheme} ${value}`;
    await assertIssued(await fixture.handle(requestFrom({ ...parts, headers })));
  }
  assert.equal(fixture.issued.length, 3);
});

test('HMAC-13 exactly one scheme and one value, else 401 with the HMAC challenge', async () => {
  const fixture = await endpointFixture({ authenticators: 'hmac' });
  const both = await endpointFixture();
  for (const target of [fixture, both]) {
    const parts = await signedHmacParts(target);
    const signature = parts.headers.Authorization.split(' ')[1];
    const malformed = [
      'Svc-HMAC-SHA256',
      `Svc-HMAC-SHA256 ${signature} extra`,
      `Bearer ${signature}`,
      `Svc-HMAC-SHA256${signature}`,
      `Svc-JWK ${signature}`,
    ];
    for (const authorization of malformed) {
      const response = await target.handle(
        requestFrom(withHeader(parts, 'Authorization', authorization)),
      );
      await assertUnauthorized(response, 'Svc-HMAC-SHA256');
    }
    await assertUnauthorized(
      await target.handle(withDoubledHeader(parts, 'Authorization', parts.headers.Authorization)),
      'Svc-HMAC-SHA256',
    );
    assert.equal(target.issued.length, 0);
  }
});

test('HMAC-14 missing parts and unknown clients are refused and logged without secrets', async () => {
  const fixture = await endpointFixture();
  const parts = await signedHmacParts(fixture);
  const signature = parts.headers.Authorization.split(' ')[1];
  const cases: [SignedParts, string][] = [
    [withHeader(parts, 'X-Svc-Client-Id', undefined), 'client_id_missing'],
    [withHeader(parts, 'X-Svc-Timestamp', undefined), 'timestamp_missing'],
    [withHeader(parts, 'Authorization', undefined), 'authorization_missing'],
    [withHeader(parts, 'X-Svc-Client-Id', 'nobody'), 'unknown_client'],
  ];
  for (const [edited, reason] of cases) {
    const rid = crypto.randomUUID();
    await assertUnauthorized(await fixture.handle(requestFrom(edited), rid));
    const events = refusalEvents(fixture, HMAC_EVENT, rid);
    assert.equal(events.length, 1, reason);
    assert.equal(events[0].reason, reason);
    assert.equal(events[0].level, 'warn');
    assert.equal(events[0].requestId, rid);
  }
  const logged = JSON.stringify(fixture.events);
  assert.equal(logged.includes(fixture.secrets.hc1), false);
  assert.equal(logged.includes(signature), false);
  assert.equal(logged.includes('nobody'), false, 'unregistered client ids are not logged');
  assert.equal(fixture.issued.length, 0);
});

test('HMAC-15 a valid signature over a bad body is answered 400 without a token', async () => {
  const fixture = await endpointFixture();
  const bodies = [
    '{"targetServiceId":',
    '[]',
    'null',
    '"x"',
    JSON.stringify({ callerServiceId: 'svc-caller', scopes: ['svc-a.read'] }),
    JSON.stringify(hmacBody({ scopes: 'svc-a.read' })),
    JSON.stringify(hmacBody({ scopes: [''] })),
  ];
  for (const body of bodies) {
    const response = await fixture.handle(requestFrom(await signedHmacParts(fixture, { body })));
    assert.equal(response.status, 400, body);
    assertNoStore(response);
    const problem = await response.json();
    assert.equal(problem.code, 'ability_validation');
    assert.equal(problem.reason, 'invalid_token_request');
    assert.ok(Array.isArray(problem.issues) && problem.issues.length > 0);
  }
  assert.equal(fixture.issued.length, 0);
});

test('HMAC-16 (endpoint) issuance refusals keep their status, reason and no-store', async () => {
  const fixture = await endpointFixture();
  const cases: [Record<string, unknown>, string][] = [
    [hmacBody({ targetServiceId: 'svc-unknown' }), 'unknown_target'],
    [hmacBody({ scopes: ['svc-a.admin'] }), 'unknown_scope'],
    [hmacBody({ scopes: ['*'] }), 'unknown_scope'],
    [hmacBody({ scopes: ['svc-a.*'] }), 'unknown_scope'],
  ];
  for (const [body, reason] of cases) {
    const response = await fixture.handle(requestFrom(await signedHmacParts(fixture, { body })));
    assert.equal(response.status, 403);
    assertNoStore(response);
    const problem = await response.json();
    assert.equal(problem.reason, reason);
    assert.equal(problem.code, 'capability_auth');
    assert.equal('token' in problem, false);
  }
  const denied = await signedHmacParts(fixture, {
    clientId: 'hc2',
    secret: fixture.secrets.hc2,
    body: hmacBody({ callerServiceId: 'svc-other', scopes: ['svc-a.write'] }),
  });
  const response = await fixture.handle(requestFrom(denied));
  assert.equal(response.status, 403);
  assert.equal((await response.json()).reason, 'grant_denied');
});

test('HMAC-17 a body naming another caller than the authenticated one is refused 403', async () => {
  const fixture = await endpointFixture();
  const parts = await signedHmacParts(fixture, {
    body: hmacBody({ callerServiceId: 'svc-other' }),
  });
  const response = await fixture.handle(requestFrom(parts));
  assert.equal(response.status, 403);
  assertNoStore(response);
  const problem = await response.json();
  assert.equal(problem.reason, 'caller_mismatch');
  assert.equal(fixture.issued.length, 0);
});

test('HMAC-18 authentication comes first: subject or invalid JSON unauthenticated is 401', async () => {
  const fixture = await endpointFixture();
  const bodies = [JSON.stringify(hmacBody({ subject: { id: 'victim' } })), '{not json'];
  for (const body of bodies) {
    const signed = await signedHmacParts(fixture, { body, secret: 'not-the-secret' });
    await assertUnauthorized(await fixture.handle(requestFrom(signed)));
    const unsigned = withHeader(
      await signedHmacParts(fixture, { body }),
      'Authorization',
      undefined,
    );
    await assertUnauthorized(await fixture.handle(requestFrom(unsigned)));
  }
  assert.equal(fixture.issued.length, 0);
});

test('HMAC-19 (endpoint) an unreachable target fails alone; other targets keep working', async () => {
  const fixture = await endpointFixture();
  const down = await fixture.handle(
    requestFrom(await signedHmacParts(fixture, { body: hmacBody({ targetServiceId: 'svc-d' }) })),
  );
  assert.equal(down.status, 500);
  assertNoStore(down);
  const problem = await down.json();
  assert.equal(problem.code, 'internal');
  assert.equal(problem.reason, 'target_unreachable');
  await assertIssued(await fixture.handle(requestFrom(await signedHmacParts(fixture))));
});

function lazyBody(totalBytes: number, counter: { pulled: number }): ReadableStream<Uint8Array> {
  const chunk = new Uint8Array(64 * 1024).fill(0x20);
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (counter.pulled >= totalBytes) {
        controller.close();
        return;
      }
      counter.pulled += chunk.byteLength;
      controller.enqueue(chunk);
    },
  });
}

test('HMAC-20 oversized signed bodies are refused 413 quickly and the next request works', async () => {
  const fixture = await endpointFixture();
  const oneMiB = `{"pad":"${'x'.repeat(1024 * 1024)}"}`;
  const signed = await signedHmacParts(fixture, { body: oneMiB });
  const started = Date.now();
  const big = await fixture.handle(requestFrom(signed));
  assert.equal(big.status, 413);
  assertNoStore(big);

  for (const withLength of [true, false]) {
    const counter = { pulled: 0 };
    const headers = new Headers(signed.headers);
    if (withLength) headers.set('Content-Length', String(50 * 1024 * 1024));
    const request = new Request(TOKEN_URL, {
      method: 'POST',
      headers,
      body: lazyBody(50 * 1024 * 1024, counter),
      duplex: 'half',
    } as RequestInit);
    const response = await fixture.handle(request);
    assert.equal(response.status, 413);
    assert.ok(counter.pulled <= 256 * 1024, `read ${counter.pulled} bytes at most`);
  }
  assert.ok(Date.now() - started < 2000);
  assert.equal(fixture.issued.length, 0);
  await assertIssued(await fixture.handle(requestFrom(await signedHmacParts(fixture))));
});

test('hmacServiceClientAuth refuses bad configuration at construction', () => {
  const bad: unknown[] = [
    { clients: null },
    { clients: { hc1: { serviceId: '', secret: 's' } } },
    { clients: { hc1: { serviceId: 'svc', secret: '' } } },
    { clients: { 'a,b': { serviceId: 'svc', secret: 's' } } },
    { clients: {}, maxSkewSeconds: 0 },
    { clients: {}, maxSkewSeconds: 1.5 },
    { clients: {}, log: 'yes' },
  ];
  for (const options of bad) {
    assert.throws(
      () => hmacServiceClientAuth(options as never),
      SvcConfigurationError,
      JSON.stringify(options),
    );
  }
  // CallerAuth r6: no replay store is accepted, so one passed is refused, not silently ignored.
  for (const unknown of ['replayStore', 'replayCache', 'maxSkew']) {
    assert.throws(
      () => hmacServiceClientAuth({ clients: {}, [unknown]: new Map() } as never),
      (error: unknown) =>
        error instanceof SvcConfigurationError && error.message.includes(`\`${unknown}\``) &&
        /No replay store is accepted/.test(error.message),
      unknown,
    );
  }
});

test('hmacServiceClientAuth honours a narrower maxSkewSeconds and client ids named like prototype members', async () => {
  const secret = 'prototype-secret';
  const auth = hmacServiceClientAuth({
    clients: { constructor: { serviceId: 'svc-proto', secret } },
    maxSkewSeconds: 5,
    log: false,
  });
  const fixture = await endpointFixture();
  const fresh = await signedHmacParts(fixture, { clientId: 'constructor', secret });
  const caller = await auth.authenticate(
    requestFrom(fresh),
    new TextEncoder().encode(fresh.body),
    { issuer: 'x' },
  );
  assert.deepEqual(caller, { clientId: 'constructor', serviceId: 'svc-proto' });
  const stale = await signedHmacParts(fixture, {
    clientId: 'constructor',
    secret,
    timestampSeconds: nowSeconds() - 20,
  });
  await assert.rejects(
    auth.authenticate(requestFrom(stale), new TextEncoder().encode(stale.body), { issuer: 'x' }),
    { status: 401, reason: 'timestamp_out_of_window' },
  );
  const toString = await signedHmacParts(fixture, { clientId: 'toString', secret });
  await assert.rejects(
    auth.authenticate(requestFrom(toString), new TextEncoder().encode(toString.body), {
      issuer: 'x',
    }),
    { status: 401, reason: 'unknown_client' },
  );
});
