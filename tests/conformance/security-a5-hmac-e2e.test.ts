// Security checklist A5 (HMAC caller authentication) against the real plane: every request goes
// to `createControlPlane(...).fetch` at POST /.well-known/svc/capability-token, signed as DESIGN.md
// documents (`Svc-HMAC-SHA256`, `X-Svc-Client-Id`, `X-Svc-Timestamp`, `X-Request-Id`).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { encodeBase64Url } from '../../src/core/base64url.ts';
import {
  encodedRequestBodyHash,
  hmacSignedString,
} from '../../src/caller/token-request-signing.ts';
import {
  createPlaneDeployment,
  decodeJws,
  HMAC_SECRETS,
  hmacTokenRequest,
  type PlaneDeployment,
  type ReadResponse,
  TOKEN_URL,
  tokenBody,
} from './plane-fixture.ts';

const CHALLENGE = /Svc-HMAC-SHA256/;

function assertUnauthorized(response: ReadResponse, label: string): void {
  assert.equal(response.status, 401, label);
  assert.match(response.headers.get('WWW-Authenticate') ?? '', CHALLENGE, label);
  assert.equal(response.headers.get('Cache-Control'), 'no-store', label);
  assert.equal(response.body?.token, undefined, label);
}

/** Signs fields by hand (for an empty request id, which the shipped signer refuses). */
async function rawSignature(fields: Parameters<typeof hmacSignedString>[0]): Promise<string> {
  const key = await crypto.subtle.importKey(
    'raw',
    new TextEncoder().encode(HMAC_SECRETS.hc1),
    { name: 'HMAC', hash: 'SHA-256' },
    false,
    ['sign'],
  );
  const signature = await crypto.subtle.sign(
    'HMAC',
    key,
    new TextEncoder().encode(hmacSignedString(fields)),
  );
  return encodeBase64Url(new Uint8Array(signature));
}

/** A lazily produced body of `total` bytes; `pulled()` tells how much the plane read. */
function lazyBody(total: number) {
  const chunk = new TextEncoder().encode('{'.padEnd(64 * 1024, ' '));
  let produced = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (produced >= total) return controller.close();
      produced += chunk.length;
      controller.enqueue(chunk);
    },
  });
  return { stream, pulled: () => produced };
}

async function stillServes(fx: PlaneDeployment): Promise<void> {
  assert.equal((await fx.send(await hmacTokenRequest(tokenBody()))).status, 200);
}

test('HMAC-01 a correctly signed request gets a plain service token', async () => {
  const fx = await createPlaneDeployment();
  const response = await fx.send(await hmacTokenRequest(tokenBody()));
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('Cache-Control'), 'no-store');
  assert.equal(response.headers.get('Pragma'), 'no-cache');
  assert.ok(response.headers.get('X-Request-Id'));
  const { claims } = decodeJws(response.body.token);
  assert.equal(claims.spa, 'service');
  assert.equal(claims.sub, 'svc-caller');
  assert.equal(claims.aud, 'svc-a');
  assert.deepEqual(claims.scp, ['svc-a.read']);
  for (const name of ['cnf', 'act', 'spb', 'spk', 'spo']) assert.equal(name in claims, false);
  const lifetime = (claims.exp as number) - (claims.iat as number);
  assert.ok(lifetime > 0 && lifetime <= 3600);
});

test('HMAC-02 a byte-identical replay within the window is accepted (no replay store)', async () => {
  const fx = await createPlaneDeployment();
  const fixed = { requestId: 'replay-me', timestampSeconds: Math.floor(Date.now() / 1000) };
  assert.equal((await fx.send(await hmacTokenRequest(tokenBody(), fixed))).status, 200);
  assert.equal((await fx.send(await hmacTokenRequest(tokenBody(), fixed))).status, 200);
});

test('HMAC-03 timestamps outside 60 s are refused, naming the timestamp check', async () => {
  const fx = await createPlaneDeployment();
  const now = Math.floor(Date.now() / 1000);
  for (const offset of [-75, 75, -3600]) {
    const from = fx.events.length;
    const response = await fx.send(
      await hmacTokenRequest(tokenBody(), { timestampSeconds: now + offset }),
    );
    assertUnauthorized(response, `offset ${offset}`);
    const event = fx.events.slice(from).find((e) =>
      e.event === 'svc.caller_auth.hmac_unauthorized'
    );
    assert.match(String(event?.reason), /timestamp/);
  }
  const inside = await fx.send(await hmacTokenRequest(tokenBody(), { timestampSeconds: now - 45 }));
  assert.equal(inside.status, 200);
});

test('HMAC-04 unparsable timestamps are refused', async () => {
  const fx = await createPlaneDeployment();
  const now = String(Math.floor(Date.now() / 1000));
  for (const value of ['', 'yesterday', 'NaN', '1e309', `${now}, ${now}`]) {
    const response = await fx.send(
      await hmacTokenRequest(tokenBody(), { headers: { 'X-Svc-Timestamp': value } }),
    );
    assertUnauthorized(response, JSON.stringify(value));
  }
});

test('HMAC-05 the body hash covers the raw bytes', async () => {
  const fx = await createPlaneDeployment();
  const signed = JSON.stringify(tokenBody());
  const flipped = signed.replace('svc-a.read', 'svc-a.reae');
  const reordered = JSON.stringify({
    scopes: ['svc-a.read'],
    targetServiceId: 'svc-a',
    callerServiceId: 'svc-caller',
  });
  for (const body of [flipped, `${signed} `, reordered]) {
    const response = await fx.send(await hmacTokenRequest(signed, { send: { body } }));
    assertUnauthorized(response, body);
  }
});

test('HMAC-06 retargeting after signing is refused', async () => {
  const fx = await createPlaneDeployment();
  const body = JSON.stringify(tokenBody({ targetServiceId: 'svc-c', scopes: ['svc-c.read'] }));
  assertUnauthorized(
    await fx.send(await hmacTokenRequest(tokenBody(), { send: { body } })),
    'target',
  );
});

test('HMAC-07 widening the scopes after signing is refused', async () => {
  const fx = await createPlaneDeployment();
  const body = JSON.stringify(tokenBody({ scopes: ['svc-a.read', 'svc-a.write'] }));
  assertUnauthorized(
    await fx.send(await hmacTokenRequest(tokenBody(), { send: { body } })),
    'scope',
  );
});

test('HMAC-08 a TTL added after signing is refused; a signed over-max TTL is capped', async () => {
  const fx = await createPlaneDeployment();
  const body = JSON.stringify(tokenBody({ ttlSeconds: 3600 }));
  assertUnauthorized(await fx.send(await hmacTokenRequest(tokenBody(), { send: { body } })), 'ttl');
  // Signed, an over-long TTL gets the plane's maximum lifetime (its ttlSeconds, 120 s here).
  const long = await fx.send(await hmacTokenRequest(tokenBody({ ttlSeconds: 1_000_000 })));
  assert.equal(long.status, 200);
  const { claims } = decodeJws(long.body.token);
  assert.equal((claims.exp as number) - (claims.iat as number), 120);
});

test('HMAC-09 the same signature under another registered client id is refused', async () => {
  const fx = await createPlaneDeployment();
  const response = await fx.send(
    await hmacTokenRequest(tokenBody(), { headers: { 'X-Svc-Client-Id': 'hc2' } }),
  );
  assertUnauthorized(response, 'hc2');
});

test('HMAC-10 the request id is bound: changed, removed or added after signing', async () => {
  const fx = await createPlaneDeployment();
  for (const value of ['other-request-id', null]) {
    const response = await fx.send(
      await hmacTokenRequest(tokenBody(), { headers: { 'X-Request-Id': value } }),
    );
    assertUnauthorized(response, String(value));
  }
  // Signed over an empty request id, then one added to the request.
  const body = JSON.stringify(tokenBody());
  const timestamp = String(Math.floor(Date.now() / 1000));
  const signature = await rawSignature({
    method: 'POST',
    pathWithQuery: new URL(TOKEN_URL).pathname,
    bodyHash: encodedRequestBodyHash(body),
    clientId: 'hc1',
    requestId: '',
    timestamp,
  });
  const added = await fx.send(
    new Request(TOKEN_URL, {
      method: 'POST',
      headers: {
        Authorization: `Svc-HMAC-SHA256 ${signature}`,
        'X-Svc-Client-Id': 'hc1',
        'X-Svc-Timestamp': timestamp,
        'X-Request-Id': 'added-later',
      },
      body,
    }),
  );
  assertUnauthorized(added, 'added');
});

test('HMAC-11 replays to another method or path never succeed', async () => {
  const fx = await createPlaneDeployment();
  const variants = [
    { method: 'PUT' },
    { method: 'GET' },
    { url: `${TOKEN_URL}/` },
    { url: TOKEN_URL.replace('capability-token', 'Capability-Token') },
    { url: `${TOKEN_URL}?extra=1` },
    // An empty query: `URL.search` reads it as none, the signed path must not.
    { url: `${TOKEN_URL}?` },
    { url: `${TOKEN_URL}?#` },
  ];
  for (const send of variants) {
    const response = await fx.send(await hmacTokenRequest(tokenBody(), { send }));
    assert.ok(
      [401, 404, 405].includes(response.status),
      `${JSON.stringify(send)}: ${response.status}`,
    );
    assert.equal(response.body?.token, undefined);
  }
});

test('HMAC-12 scheme and header names are case-insensitive', async () => {
  const fx = await createPlaneDeployment();
  for (const scheme of ['svc-hmac-sha256', 'SVC-HMAC-SHA256', 'Svc-Hmac-Sha256']) {
    const signed = await hmacTokenRequest(tokenBody());
    const headers = new Headers();
    headers.set('authorization', `${scheme} ${signed.headers.get('Authorization')!.split(' ')[1]}`);
    headers.set('x-svc-client-id', signed.headers.get('X-Svc-Client-Id')!);
    headers.set('X-SVC-TIMESTAMP', signed.headers.get('X-Svc-Timestamp')!);
    headers.set('x-request-id', signed.headers.get('X-Request-Id')!);
    const response = await fx.send(
      new Request(TOKEN_URL, { method: 'POST', headers, body: await signed.text() }),
    );
    assert.equal(response.status, 200, scheme);
  }
});

test('HMAC-13 exactly one scheme and one value', async () => {
  const fx = await createPlaneDeployment();
  const probe = await hmacTokenRequest(tokenBody());
  const signature = probe.headers.get('Authorization')!.split(' ')[1];
  const values = [
    'Svc-HMAC-SHA256',
    `Svc-HMAC-SHA256 ${signature} extra`,
    `Svc-HMAC-SHA256 ${signature}, Svc-HMAC-SHA256 ${signature}`,
    `Bearer ${signature}`,
    `Svc-HMAC-SHA256${signature}`,
    `Svc-JWK ${signature}`,
  ];
  for (const value of values) {
    const response = await fx.send(
      await hmacTokenRequest(tokenBody(), {
        requestId: probe.headers.get('X-Request-Id')!,
        timestampSeconds: Number(probe.headers.get('X-Svc-Timestamp')),
        headers: { Authorization: value },
      }),
    );
    assertUnauthorized(response, value);
  }
});

test('HMAC-14 missing parts and unknown clients are refused and logged without secrets', async () => {
  const fx = await createPlaneDeployment();
  const cases: [string, Parameters<typeof hmacTokenRequest>[1]][] = [
    ['client_id_missing', { headers: { 'X-Svc-Client-Id': null } }],
    ['timestamp_missing', { headers: { 'X-Svc-Timestamp': null } }],
    ['authorization_missing', { headers: { Authorization: null } }],
    ['unknown_client', { clientId: 'hc-unknown' }],
  ];
  for (const [reason, options] of cases) {
    const request = await hmacTokenRequest(tokenBody(), options);
    const signature = request.headers.get('Authorization')?.split(' ')[1];
    const from = fx.events.length;
    assertUnauthorized(await fx.send(request), reason);
    const events = fx.events.slice(from).filter((e) =>
      e.event === 'svc.caller_auth.hmac_unauthorized'
    );
    assert.equal(events.length, 1, reason);
    assert.equal(events[0].reason, reason);
    const logged = JSON.stringify(events);
    assert.equal(logged.includes(HMAC_SECRETS.hc1), false);
    if (signature !== undefined) assert.equal(logged.includes(signature), false);
  }
});

test('HMAC-15 a valid signature over a bad body is a 400 with no token', async () => {
  const fx = await createPlaneDeployment();
  const bodies = [
    '{"targetServiceId":',
    '[]',
    'null',
    '"x"',
    JSON.stringify({ callerServiceId: 'svc-caller', scopes: ['svc-a.read'] }),
    JSON.stringify(tokenBody({ scopes: 'svc-a.read' })),
    JSON.stringify(tokenBody({ scopes: [''] })),
  ];
  for (const body of bodies) {
    const response = await fx.send(await hmacTokenRequest(body));
    assert.equal(response.status, 400, body);
    assert.equal(response.body.token, undefined);
    assert.equal(response.headers.get('Cache-Control'), 'no-store');
  }
});

test('HMAC-16 issuance checks refuse with the target-specific error', async () => {
  const fx = await createPlaneDeployment({ countSigningKeyLookups: true });
  const cases: [Record<string, unknown>, 'hc1' | 'hc2', string][] = [
    [tokenBody({ targetServiceId: 'svc-unknown' }), 'hc1', 'unknown_target'],
    [tokenBody({ callerServiceId: 'svc-other' }), 'hc2', 'grant_denied'],
    [tokenBody({ scopes: ['svc-a.delete'] }), 'hc1', 'unknown_scope'],
    [tokenBody({ scopes: ['*'] }), 'hc1', 'unknown_scope'],
    [tokenBody({ scopes: ['svc-a.*'] }), 'hc1', 'unknown_scope'],
  ];
  for (const [body, clientId, reason] of cases) {
    const response = await fx.send(await hmacTokenRequest(body, { clientId }));
    assert.ok(response.status >= 400 && response.status < 500, reason);
    assert.equal(response.body.reason, reason);
    assert.equal(response.body.token, undefined);
  }
  assert.equal(fx.counters.signingKeyLookups, 0);
});

test('HMAC-17 a body naming another caller service is refused', async () => {
  const fx = await createPlaneDeployment();
  const response = await fx.send(
    await hmacTokenRequest(tokenBody({ callerServiceId: 'svc-other' })),
  );
  assert.equal(response.status, 403);
  assert.equal(response.body.reason, 'caller_mismatch');
  assert.equal(response.body.token, undefined);
});

test('HMAC-18 authentication comes first: subject or bad JSON unauthenticated is a 401', async () => {
  const fx = await createPlaneDeployment();
  for (const body of [JSON.stringify(tokenBody({ subject: { id: 'victim' } })), '{"broken":']) {
    const response = await fx.send(
      new Request(TOKEN_URL, { method: 'POST', body, headers: { 'X-Request-Id': 'r-18' } }),
    );
    assertUnauthorized(response, body);
    const wrongSecret = await fx.send(await hmacTokenRequest(body, { secret: 'nope' }));
    assertUnauthorized(wrongSecret, `wrong secret: ${body}`);
  }
});

test('HMAC-19 a target whose discovery fails is refused alone', async () => {
  const fx = await createPlaneDeployment();
  fx.stop('svc-d');
  const svcD = await fx.send(
    await hmacTokenRequest(tokenBody({ targetServiceId: 'svc-d', scopes: ['svc-d.read'] })),
  );
  assert.equal(svcD.status, 500);
  assert.equal(svcD.body.reason, 'target_unreachable');
  await stillServes(fx);
});

test('HMAC-20 oversized bodies are refused quickly and the plane keeps serving', async () => {
  const fx = await createPlaneDeployment();
  const mib = 1024 * 1024;
  const started = Date.now();
  const oneMiB = JSON.stringify(tokenBody({ pad: 'x'.repeat(mib) }));
  const signed = await fx.send(await hmacTokenRequest(oneMiB));
  assert.ok([401, 413].includes(signed.status), String(signed.status));
  const probe = await hmacTokenRequest(tokenBody());
  for (const declared of [true, false]) {
    const body = lazyBody(50 * mib);
    const headers = new Headers(probe.headers);
    if (declared) headers.set('Content-Length', String(50 * mib));
    else headers.delete('Content-Length');
    const response = await fx.send(
      new Request(TOKEN_URL, {
        method: 'POST',
        headers,
        body: body.stream,
        duplex: 'half',
      } as RequestInit),
    );
    assert.ok([401, 413].includes(response.status), `declared ${declared}: ${response.status}`);
    assert.equal(response.body?.token, undefined);
    assert.ok(body.pulled() <= mib, `declared ${declared}: read ${body.pulled()} bytes`);
  }
  assert.ok(Date.now() - started < 2000);
  await stillServes(fx);
});
