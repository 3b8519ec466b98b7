// These tests sign with raw WebCrypto or jose as DESIGN.md describes the wire formats, not with
// the library's own signer, so a change made on both sides of a wire format cannot pass unnoticed.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { calculateJwkThumbprint, importJWK, type JWK, SignJWT } from 'jose';
import { hmacServiceClientAuth } from '../../src/plane/caller-auth-hmac.ts';
import { signHmacTokenRequest } from '../../src/caller/token-request-signing.ts';
import {
  assertRefusal,
  createPlaneDeployment,
  decodeJws,
  HMAC_SECRETS,
  ISS,
  jwkTokenRequest,
  TOKEN_URL,
  tokenBody,
} from './plane-fixture.ts';

type Report = { identity: Record<string, unknown> };

const encoder = new TextEncoder();

/** Unpadded base64url, written here rather than taken from the library. */
function base64Url(bytes: ArrayBuffer | Uint8Array): string {
  let binary = '';
  for (const byte of new Uint8Array(bytes)) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

async function sha256Base64Url(text: string): Promise<string> {
  return base64Url(await crypto.subtle.digest('SHA-256', encoder.encode(text)));
}

/** `Svc-HMAC-SHA256` signature of the newline-joined lines with hc1's secret (WebCrypto). */
async function hmacSignature(lines: string[]): Promise<string> {
  const key = await crypto.subtle.importKey(
    'raw',
    encoder.encode(HMAC_SECRETS.hc1),
    { name: 'HMAC', hash: 'SHA-256' },
    false,
    ['sign'],
  );
  return base64Url(await crypto.subtle.sign('HMAC', key, encoder.encode(lines.join('\n'))));
}

/** A token request of hc1, signed per DESIGN.md "HMAC caller auth" with WebCrypto only. */
async function independentHmacRequest(
  body: string,
  options: { method?: string; sendMethod?: string; query?: string } = {},
): Promise<Request> {
  const requestId = crypto.randomUUID();
  const timestamp = String(Math.floor(Date.now() / 1000));
  const url = new URL(TOKEN_URL + (options.query ?? ''));
  const signature = await hmacSignature([
    'SVC-HMAC-SHA256',
    options.method ?? 'POST',
    `${url.pathname}${url.search}`,
    await sha256Base64Url(body),
    'hc1',
    requestId,
    timestamp,
  ]);
  const method = options.sendMethod ?? options.method ?? 'POST';
  return new Request(url, {
    method,
    headers: {
      'Content-Type': 'application/json',
      Authorization: `Svc-HMAC-SHA256 ${signature}`,
      'X-Svc-Client-Id': 'hc1',
      'X-Svc-Timestamp': timestamp,
      'X-Request-Id': requestId,
    },
    ...(method === 'GET' || method === 'HEAD' ? {} : { body }),
  });
}

/** The public members of a P-256 JWK, as jose takes them. */
function publicMembers(jwk: JsonWebKey): JWK {
  const { kty, crv, x, y } = jwk;
  return { kty, crv, x, y };
}

/** A request-bound caller assertion of jc1, signed with jose per DESIGN.md "JWK caller auth". */
async function joseAssertion(
  privateJwk: JsonWebKey,
  kid: string,
  body: string,
  requestId: string,
): Promise<string> {
  const key = await importJWK({ ...publicMembers(privateJwk), d: privateJwk.d }, 'ES256');
  const now = Math.floor(Date.now() / 1000);
  return await new SignJWT({
    htm: 'POST',
    htu: new URL(TOKEN_URL).pathname,
    bh: await sha256Base64Url(body),
    rid: requestId,
  })
    .setProtectedHeader({ alg: 'ES256', kid, typ: 'svc-client+jwt' })
    .setIssuer('jc1')
    .setSubject('jc1')
    .setAudience(ISS)
    .setIssuedAt(now)
    .setExpirationTime(now + 60)
    .setJti(crypto.randomUUID())
    .sign(key);
}

test('Caller authentication wire format (HMAC): a WebCrypto-signed request gets a token; field order matters', async () => {
  const fx = await createPlaneDeployment();
  const body = JSON.stringify(tokenBody());
  const response = await fx.send(await independentHmacRequest(body));
  assert.equal(response.status, 200, JSON.stringify(response.body));
  assert.equal(typeof response.body.token, 'string');
  const withQuery = await fx.send(await independentHmacRequest(body, { query: '?a=1&b=%20' }));
  assert.equal(withQuery.status, 200, 'the path is signed with its query');
  // Swapping the client id and request id lines must not verify.
  const requestId = crypto.randomUUID();
  const timestamp = String(Math.floor(Date.now() / 1000));
  const swapped = await hmacSignature([
    'SVC-HMAC-SHA256',
    'POST',
    new URL(TOKEN_URL).pathname,
    await sha256Base64Url(body),
    requestId,
    'hc1',
    timestamp,
  ]);
  const refused = await fx.send(
    new Request(TOKEN_URL, {
      method: 'POST',
      headers: {
        Authorization: `Svc-HMAC-SHA256 ${swapped}`,
        'X-Svc-Client-Id': 'hc1',
        'X-Svc-Timestamp': timestamp,
        'X-Request-Id': requestId,
      },
      body,
    }),
  );
  assert.equal(refused.status, 401);
  assert.equal(refused.body.token, undefined);
});

test('Caller authentication r4 (HMAC): the signature covers the method, checked past the 405', async () => {
  // The endpoint answers 405 to anything but POST before authenticating, so the method line of
  // the signed string is only observable on the authenticator itself.
  const auth = hmacServiceClientAuth({
    clients: { hc1: { serviceId: 'svc-caller', secret: HMAC_SECRETS.hc1 } },
    log: false,
  });
  const body = JSON.stringify(tokenBody());
  const signedPostSentPut = await independentHmacRequest(body, { sendMethod: 'PUT' });
  await assertRefusal(
    auth.authenticate(signedPostSentPut, encoder.encode(body), { issuer: ISS }),
    { status: 401, reason: 'signature_mismatch' },
  );
  const good = await independentHmacRequest(body);
  const caller = await auth.authenticate(good, encoder.encode(body), { issuer: ISS });
  assert.equal(caller.serviceId, 'svc-caller');
});

test('Caller authentication r5 (HMAC): signHmacTokenRequest sends the header set of the independent signer', async () => {
  const body = JSON.stringify(tokenBody());
  const headers = await signHmacTokenRequest({
    clientId: 'hc1',
    clientSecret: HMAC_SECRETS.hc1,
    url: TOKEN_URL,
    body,
    requestId: 'rid-fixed',
    timestampSeconds: 1_700_000_000,
  });
  const signature = await hmacSignature([
    'SVC-HMAC-SHA256',
    'POST',
    new URL(TOKEN_URL).pathname,
    await sha256Base64Url(body),
    'hc1',
    'rid-fixed',
    '1700000000',
  ]);
  assert.equal(headers.Authorization, `Svc-HMAC-SHA256 ${signature}`);
  assert.equal(headers['X-Svc-Timestamp'], '1700000000');
  assert.equal(headers['X-Svc-Client-Id'], 'hc1');
  assert.equal(headers['X-Request-Id'], 'rid-fixed');
});

test('Caller authentication wire format (JWK): a jose-signed assertion gets a token bound to the jose thumbprint', async () => {
  const fx = await createPlaneDeployment();
  const body = JSON.stringify(tokenBody({ callerServiceId: 'svc-jwk' }));
  const requestId = crypto.randomUUID();
  const assertion = await joseAssertion(fx.keys.K2.privateJwk, 'jk2', body, requestId);
  const response = await fx.send(
    new Request(TOKEN_URL, {
      method: 'POST',
      headers: { Authorization: `Svc-JWK ${assertion}`, 'X-Request-Id': requestId },
      body,
    }),
  );
  assert.equal(response.status, 200, JSON.stringify(response.body));
  const jkt = await calculateJwkThumbprint(publicMembers(fx.keys.K2.publicJwk), 'sha256');
  assert.deepEqual(decodeJws(response.body.token).claims.cnf, { jkt });
});

test('Caller authentication wire format (JWK): an assertion missing any one request-bound member is refused', async () => {
  const fx = await createPlaneDeployment({ countSigningKeyLookups: true });
  const body = tokenBody({ callerServiceId: 'svc-jwk' });
  for (const claim of ['sub', 'aud', 'htm', 'htu', 'bh', 'rid', 'iat', 'exp', 'jti']) {
    const response = await fx.send(await jwkTokenRequest(body, { claims: { [claim]: undefined } }));
    assert.equal(response.status, 401, claim);
    assert.match(response.headers.get('WWW-Authenticate') ?? '', /Svc-JWK/, claim);
  }
  for (const member of ['typ', 'kid']) {
    const response = await fx.send(
      await jwkTokenRequest(body, { header: { [member]: undefined } }),
    );
    assert.equal(response.status, 401, member);
  }
  assert.equal(fx.counters.signingKeyLookups, 0, 'nothing was minted');
  assert.equal((await fx.send(await jwkTokenRequest(body))).status, 200, 'the complete assertion');
});

test('Sender-constrained proof format: a jose-built proof with a WebCrypto ath is accepted and confirmed', async () => {
  const fx = await createPlaneDeployment();
  const body = JSON.stringify(tokenBody({ callerServiceId: 'svc-jwk' }));
  const requestId = crypto.randomUUID();
  const assertion = await joseAssertion(fx.keys.K1.privateJwk, 'jk1', body, requestId);
  const issued = await fx.send(
    new Request(TOKEN_URL, {
      method: 'POST',
      headers: { Authorization: `Svc-JWK ${assertion}`, 'X-Request-Id': requestId },
      body,
    }),
  );
  assert.equal(issued.status, 200, JSON.stringify(issued.body));
  const token = issued.body.token as string;
  const publicJwk = publicMembers(fx.keys.K1.publicJwk);
  const key = await importJWK({ ...publicJwk, d: fx.keys.K1.privateJwk.d }, 'ES256');
  const proof = await new SignJWT({
    ath: await sha256Base64Url(token),
    aud: 'svc-a',
    ab: 'svc-a.echo',
    jti: crypto.randomUUID(),
  })
    .setProtectedHeader({ alg: 'ES256', typ: 'svc-pop+jwt', jwk: publicJwk })
    .setIssuedAt()
    .sign(key);
  using session = fx.session('svc-a.echo', {
    token,
    proveTokenPossession: () => Promise.resolve(proof),
  });
  const { identity } = await session.whoami({}) as Report;
  assert.deepEqual(identity.confirmation, {
    jkt: await calculateJwkThumbprint(publicJwk, 'sha256'),
  });
});
