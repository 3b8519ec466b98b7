/**
 * JWK-assertion caller authentication at the token endpoint: security checklist A6
 * (JWKA-01..12, and the token half of JWKA-13; its proof half is in the proof-signer tests).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { encodeBase64Url, encodeBase64UrlText } from '../../src/core/base64url.ts';
import { SvcConfigurationError } from '../../src/core/errors.ts';
import type { SvcLogEvent } from '../../src/core/logging.ts';
import { jwkServiceClientAuth } from '../../src/plane/caller-auth-jwk.ts';
import { createTokenEndpoint } from '../../src/plane/token-endpoint.ts';
import {
  assertIssued,
  assertUnauthorized,
  endpointFixture,
  forgedJwkParts,
  generateKey,
  ISSUER,
  jwkBody,
  refusalEvents,
  requestFrom,
  signedJwkParts,
  TOKEN_URL,
} from '../support/token-endpoint-fixture.ts';

const JWK_EVENT = 'svc.caller_auth.jwk_unauthorized';
const HEADER = { alg: 'ES256', kid: 'jk1', typ: 'svc-client+jwt' };

/** RFC 7638 §3 by hand: required members in lexicographic order, no whitespace, SHA-256. */
async function rfc7638Thumbprint(jwk: JsonWebKey): Promise<string> {
  const canonical = `{"crv":"${jwk.crv}","kty":"${jwk.kty}","x":"${jwk.x}","y":"${jwk.y}"}`;
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(canonical));
  return encodeBase64Url(new Uint8Array(digest));
}

async function refusedWith(
  fixture: Awaited<ReturnType<typeof endpointFixture>>,
  request: Request,
  reason: string,
): Promise<void> {
  const rid = crypto.randomUUID();
  await assertUnauthorized(await fixture.handle(request, rid), 'Svc-JWK');
  const events = refusalEvents(fixture, JWK_EVENT, rid);
  assert.equal(events.length, 1, `one event for ${reason}`);
  assert.equal(events[0].reason, reason);
  assert.equal(events[0].level, 'warn');
}

test('JWKA-01 a valid assertion gets a service token bound to the RFC 7638 thumbprint of K1', async () => {
  const fixture = await endpointFixture();
  const response = await fixture.handle(requestFrom(await signedJwkParts(fixture)));
  const { claims } = await assertIssued(response);
  assert.equal(claims.spa, 'service');
  assert.equal(claims.sub, 'svc-jwk');
  const cnf = claims.cnf as { jkt: string };
  assert.equal(cnf.jkt, await rfc7638Thumbprint(fixture.keys.jk1.publicJwk));
  assert.equal(fixture.issued[0].caller.clientId, 'jc1');
});

test('JWKA-02 an assertion living 301 s is refused; exactly 300 s is accepted', async () => {
  const fixture = await endpointFixture();
  const key = fixture.keys.jk1.privateKey;
  const tooLong = await forgedJwkParts(
    key,
    HEADER,
    (c) => ({ ...c, exp: (c.iat as number) + 301 }),
  );
  await refusedWith(fixture, requestFrom(tooLong), 'assertion_lifetime_too_long');
  const exact = await forgedJwkParts(key, HEADER, (c) => ({ ...c, exp: (c.iat as number) + 300 }));
  await assertIssued(await fixture.handle(requestFrom(exact)));
});

test('JWKA-03 an expired assertion, or one issued or valid only in the future, is refused', async () => {
  const fixture = await endpointFixture();
  const key = fixture.keys.jk1.privateKey;
  const now = Math.floor(Date.now() / 1000);
  const expired = await forgedJwkParts(
    key,
    HEADER,
    (c) => ({ ...c, iat: now - 100, exp: now - 40 }),
  );
  await refusedWith(fixture, requestFrom(expired), 'assertion_expired');
  const future = await forgedJwkParts(key, HEADER, (c) => ({
    ...c,
    iat: now + 90,
    nbf: now + 90,
    exp: now + 150,
  }));
  await refusedWith(fixture, requestFrom(future), 'assertion_issued_in_future');
  const notYet = await forgedJwkParts(key, HEADER, (c) => ({ ...c, nbf: now + 90 }));
  await refusedWith(fixture, requestFrom(notYet), 'assertion_not_yet_valid');
  assert.equal(fixture.issued.length, 0);
});

test('an assertion without a jti of 1 to 256 characters is refused (DESIGN: the claims include jti)', async () => {
  const fixture = await endpointFixture();
  const key = fixture.keys.jk1.privateKey;
  for (const jti of [undefined, '', 'x'.repeat(257), 42]) {
    const parts = await forgedJwkParts(key, HEADER, (c) => ({ ...c, jti }));
    await refusedWith(fixture, requestFrom(parts), 'assertion_jti_missing');
  }
  const longest = await forgedJwkParts(key, HEADER, (c) => ({ ...c, jti: 'x'.repeat(256) }));
  assert.equal((await fixture.handle(requestFrom(longest))).status, 200);
});

test('JWKA-04 an unregistered key claiming kid jk1 is refused', async () => {
  const fixture = await endpointFixture();
  const parts = await signedJwkParts(fixture, { key: fixture.keys.attacker, keyId: 'jk1' });
  await refusedWith(fixture, requestFrom(parts), 'signature_mismatch');
  assert.equal(fixture.issued.length, 0);
});

async function hs256(keyText: string, input: string): Promise<string> {
  const key = await crypto.subtle.importKey(
    'raw',
    new TextEncoder().encode(keyText),
    { name: 'HMAC', hash: 'SHA-256' },
    false,
    ['sign'],
  );
  const tag = await crypto.subtle.sign('HMAC', key, new TextEncoder().encode(input));
  return encodeBase64Url(new Uint8Array(tag));
}

test('JWKA-05 alg none, HS256 keyed with the public JWK, and ES384 are refused', async () => {
  const fixture = await endpointFixture();
  const good = await signedJwkParts(fixture);
  const [, payload, signature] = good.headers.Authorization.split(' ')[1].split('.');
  const withHeader = (header: Record<string, unknown>, sig: string) => ({
    ...good,
    headers: {
      ...good.headers,
      Authorization: `Svc-JWK ${encodeBase64UrlText(JSON.stringify(header))}.${payload}.${sig}`,
    },
  });
  await refusedWith(
    fixture,
    requestFrom(withHeader({ ...HEADER, alg: 'none' }, '')),
    'assertion_malformed',
  );
  await refusedWith(
    fixture,
    requestFrom(withHeader({ ...HEADER, alg: 'none' }, signature)),
    'assertion_algorithm_not_allowed',
  );
  const hsHeader = encodeBase64UrlText(JSON.stringify({ ...HEADER, alg: 'HS256' }));
  const tag = await hs256(JSON.stringify(fixture.keys.jk1.publicJwk), `${hsHeader}.${payload}`);
  await refusedWith(
    fixture,
    requestFrom(withHeader({ ...HEADER, alg: 'HS256' }, tag)),
    'assertion_algorithm_not_allowed',
  );
  await refusedWith(
    fixture,
    requestFrom(withHeader({ ...HEADER, alg: 'ES384' }, signature)),
    'assertion_algorithm_not_allowed',
  );
  assert.equal(fixture.issued.length, 0);
});

test('JWKA-06 keys offered in the header (jwk, jku, x5u, x5c) are refused and never fetched', async () => {
  const fixture = await endpointFixture();
  const attacker = fixture.keys.attacker;
  const originalFetch = globalThis.fetch;
  let fetches = 0;
  globalThis.fetch = (() => {
    fetches++;
    return Promise.reject(new Error('no network in this test'));
  }) as typeof fetch;
  try {
    const headers = [
      { ...HEADER, jwk: attacker.publicJwk },
      { ...HEADER, jku: 'http://127.0.0.1:9/jwks.json' },
      { ...HEADER, x5u: 'http://127.0.0.1:9/cert.pem' },
      { ...HEADER, x5c: ['MIIBszCCAVmgAwIBAgIU'] },
    ];
    for (const header of headers) {
      const parts = await forgedJwkParts(attacker.privateKey, header, (c) => c);
      await refusedWith(fixture, requestFrom(parts), 'assertion_header_not_allowed');
    }
  } finally {
    globalThis.fetch = originalFetch;
  }
  assert.equal(fetches, 0);
  assert.equal(fixture.issued.length, 0);
});

test('JWKA-07 iss/sub naming another client, or iss different from sub, is refused', async () => {
  const fixture = await endpointFixture();
  const key = fixture.keys.jk1.privateKey;
  const asJc2 = await forgedJwkParts(key, HEADER, (c) => ({ ...c, iss: 'jc2', sub: 'jc2' }));
  await refusedWith(fixture, requestFrom(asJc2), 'unknown_key');
  const asHmacClient = await forgedJwkParts(key, HEADER, (c) => ({ ...c, iss: 'hc2', sub: 'hc2' }));
  await refusedWith(fixture, requestFrom(asHmacClient), 'unknown_client');
  const mixed = await forgedJwkParts(key, HEADER, (c) => ({ ...c, sub: 'jc2' }));
  await refusedWith(fixture, requestFrom(mixed), 'subject_mismatch');
  assert.equal(fixture.issued.length, 0);
});

test('JWKA-08 an assertion for another plane or issuer is refused', async () => {
  const fixture = await endpointFixture();
  for (const audience of ['https://other-plane.test', `${ISSUER}/`, ISSUER.toUpperCase()]) {
    const parts = await signedJwkParts(fixture, { audience });
    await refusedWith(fixture, requestFrom(parts), 'audience_mismatch');
  }
  const asArray = await forgedJwkParts(
    fixture.keys.jk1.privateKey,
    HEADER,
    (c) => ({ ...c, aud: [ISSUER] }),
  );
  await refusedWith(fixture, requestFrom(asArray), 'audience_mismatch');
});

test('JWKA-09 body, path, method or request id other than the bound ones is refused', async () => {
  const fixture = await endpointFixture();
  const parts = await signedJwkParts(fixture);
  const otherBody = JSON.stringify(jwkBody({ scopes: ['svc-a.read', 'svc-a.write'] }));
  await refusedWith(fixture, requestFrom({ ...parts, body: otherBody }), 'body_hash_mismatch');
  await refusedWith(fixture, requestFrom({ ...parts, url: `${TOKEN_URL}?x=1` }), 'url_mismatch');
  await refusedWith(
    fixture,
    requestFrom({ ...parts, headers: { ...parts.headers, 'X-Request-Id': 'other-id' } }),
    'request_id_mismatch',
  );
  const putBound = await forgedJwkParts(fixture.keys.jk1.privateKey, HEADER, (c) => ({
    ...c,
    htm: 'PUT',
  }));
  await refusedWith(fixture, requestFrom(putBound), 'method_mismatch');
  const asPut = await fixture.handle(requestFrom({ ...parts, method: 'PUT' }));
  assert.equal(asPut.status, 405);
  assert.equal(fixture.issued.length, 0);
});

test('JWKA-10 a kid registered to another client, or no kid, is refused', async () => {
  const fixture = await endpointFixture();
  const otherClientsKey = await signedJwkParts(fixture, { key: fixture.keys.jk3, keyId: 'jk3' });
  await refusedWith(fixture, requestFrom(otherClientsKey), 'unknown_key');
  const noKid = await forgedJwkParts(
    fixture.keys.jk1.privateKey,
    { alg: 'ES256', typ: 'svc-client+jwt' },
    (c) => c,
  );
  await refusedWith(fixture, requestFrom(noKid), 'assertion_kid_missing');
  assert.equal(fixture.issued.length, 0);
});

test('JWKA-11 the JWK scheme is case-insensitive and strictly parsed', async () => {
  const fixture = await endpointFixture();
  for (const scheme of ['svc-jwk', 'SVC-JWK', 'sVc-JwK']) {
    const parts = await signedJwkParts(fixture);
    const assertion = parts.headers.Authorization.split(' ')[1];
    const headers = { ...parts.headers, Authorization: `${scheme} ${assertion}` };
    await assertIssued(await fixture.handle(requestFrom({ ...parts, headers })));
  }
  const parts = await signedJwkParts(fixture);
  const assertion = parts.headers.Authorization.split(' ')[1];
  const malformed = [
    'Svc-JWK',
    `Svc-JWK ${assertion} extra`,
    `Svc-JWK ${assertion}, Svc-JWK ${assertion}`,
    `Svc-JWK${assertion}`,
  ];
  for (const authorization of malformed) {
    const headers = { ...parts.headers, Authorization: authorization };
    await assertUnauthorized(await fixture.handle(requestFrom({ ...parts, headers })), 'Svc-JWK');
  }
  const underHmac = { ...parts.headers, Authorization: `Svc-HMAC-SHA256 ${assertion}` };
  const rid = crypto.randomUUID();
  await assertUnauthorized(
    await fixture.handle(requestFrom({ ...parts, headers: underHmac }), rid),
    'Svc-HMAC-SHA256',
  );
  assert.equal(
    refusalEvents(fixture, 'svc.caller_auth.hmac_unauthorized', rid)[0].reason,
    'signature_malformed',
  );
  assert.equal(fixture.issued.length, 3);
});

test('JWKA-12 an assertion replays within its lifetime and is refused after exp plus skew', async () => {
  const keys = await endpointFixture();
  let clockMs = Date.now();
  const events: SvcLogEvent[] = [];
  const auth = jwkServiceClientAuth({
    clients: { jc1: { serviceId: 'svc-jwk', keys: [keys.keys.jk1.publicJwk] } },
    log: (event) => events.push(event),
    now: () => clockMs,
  });
  const endpoint = createTokenEndpoint({
    authenticators: [auth],
    issuer: ISSUER,
    log: () => {},
    issue: async () => ({ token: 'minted', expiresAt: new Date(Date.now() + 60_000), scopes: [] }),
  });
  const parts = await signedJwkParts(keys, {
    ttlSeconds: 60,
    nowSeconds: Math.floor(clockMs / 1000),
  });
  assert.equal((await endpoint(requestFrom(parts), 'r1')).status, 200);
  clockMs += 50_000;
  assert.equal((await endpoint(requestFrom(parts), 'r2')).status, 200, 'replay within lifetime');
  clockMs += 10_000 + 31_000;
  const late = await endpoint(requestFrom(parts), 'r3');
  assert.equal(late.status, 401);
  assert.equal(events.at(-1)?.reason, 'assertion_expired');
});

test('JWKA-13 (token) with K1 and K2 registered, a K2 request is bound to jkt(K2)', async () => {
  const fixture = await endpointFixture();
  const { claims } = await assertIssued(
    await fixture.handle(requestFrom(await signedJwkParts(fixture, { key: fixture.keys.jk2 }))),
  );
  const jkt = (claims.cnf as { jkt: string }).jkt;
  assert.equal(jkt, await rfc7638Thumbprint(fixture.keys.jk2.publicJwk));
  assert.notEqual(jkt, await rfc7638Thumbprint(fixture.keys.jk1.publicJwk));
});

test('jwkServiceClientAuth refuses private, duplicate or foreign keys at construction', async () => {
  const key = await generateKey('jk1');
  const bad: unknown[] = [
    { clients: { jc1: { serviceId: 'svc', keys: [] } } },
    { clients: { jc1: { serviceId: 'svc', keys: [{ ...key.privateJwk, kid: 'jk1' }] } } },
    { clients: { jc1: { serviceId: 'svc', keys: [key.publicJwk, key.publicJwk] } } },
    { clients: { jc1: { serviceId: 'svc', keys: [{ ...key.publicJwk, kid: '' }] } } },
    { clients: { jc1: { serviceId: 'svc', keys: [{ ...key.publicJwk, crv: 'P-384' }] } } },
    { clients: { jc1: { serviceId: 'svc', keys: [{ ...key.publicJwk, use: 'enc' }] } } },
    { clients: { jc1: { serviceId: '', keys: [key.publicJwk] } } },
    { clients: {}, maxAssertionTtlSeconds: 301 },
    { clients: {}, maxAssertionTtlSeconds: 0 },
  ];
  for (const options of bad) {
    assert.throws(() => jwkServiceClientAuth(options as never), SvcConfigurationError);
  }
  // CallerAuth r6: no replay store is accepted, so one passed is refused, not silently ignored.
  assert.throws(
    () => jwkServiceClientAuth({ clients: {}, replayCache: new Set() } as never),
    (error: unknown) =>
      error instanceof SvcConfigurationError && /`replayCache`/.test(error.message) &&
      /No replay store is accepted/.test(error.message),
  );
});

test('jwkServiceClientAuth honours a lower maxAssertionTtlSeconds', async () => {
  const fixture = await endpointFixture();
  const auth = jwkServiceClientAuth({
    clients: { jc1: { serviceId: 'svc-jwk', keys: [fixture.keys.jk1.publicJwk] } },
    maxAssertionTtlSeconds: 30,
    log: false,
  });
  const parts = await signedJwkParts(fixture, { ttlSeconds: 60 });
  await assert.rejects(
    auth.authenticate(requestFrom(parts), new TextEncoder().encode(parts.body), { issuer: ISSUER }),
    { status: 401, reason: 'assertion_lifetime_too_long' },
  );
  const short = await signedJwkParts(fixture, { ttlSeconds: 30 });
  const caller = await auth.authenticate(
    requestFrom(short),
    new TextEncoder().encode(short.body),
    { issuer: ISSUER },
  );
  assert.equal(caller.serviceId, 'svc-jwk');
  assert.equal(caller.confirmationJkt, await rfc7638Thumbprint(fixture.keys.jk1.publicJwk));
});
