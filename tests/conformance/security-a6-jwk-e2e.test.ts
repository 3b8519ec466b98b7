// Security checklist A6 (JWK-assertion caller authentication) against the real plane:
// `Authorization: Svc-JWK <assertion>` at POST /.well-known/svc/capability-token, tokens checked
// by the real services. The unit-level versions live in tests/plane.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { encodeBase64Url, encodeBase64UrlText } from '../../src/core/base64url.ts';
import { hmacServiceClientAuth } from '../../src/plane/caller-auth-hmac.ts';
import { jwkServiceClientAuth } from '../../src/plane/caller-auth-jwk.ts';
import { generateFixtureKey } from './fixture.ts';
import {
  assertRefusal,
  countingGlobalFetch,
  craftedProof,
  createPlaneDeployment,
  decodeJws,
  harnessThumbprint,
  HMAC_SECRETS,
  ISS,
  jwkAssertion,
  jwkTokenRequest,
  type PlaneDeployment,
  type ReadResponse,
  TOKEN_URL,
  tokenBody,
} from './plane-fixture.ts';

const SKEW = 30;
const body = tokenBody({ callerServiceId: 'svc-jwk' });
const now = () => Math.floor(Date.now() / 1000);

function assertUnauthorized(response: ReadResponse, label: string): void {
  assert.equal(response.status, 401, label);
  assert.match(response.headers.get('WWW-Authenticate') ?? '', /Svc-JWK/, label);
  assert.equal(response.body?.token, undefined, label);
}

/** A compact JWS with a chosen header and signature segment over the request-bound claims. */
async function unsignedAssertion(
  header: Record<string, unknown>,
  requestId: string,
  sign: (input: string) => Promise<string> | string,
): Promise<string> {
  const probe = decodeJws(await jwkAssertion(JSON.stringify(body), requestId));
  const input = `${encodeBase64UrlText(JSON.stringify(header))}.${
    encodeBase64UrlText(JSON.stringify(probe.claims))
  }`;
  return `${input}.${await sign(input)}`;
}

async function sendWithAssertion(fx: PlaneDeployment, assertion: string, requestId: string) {
  return await fx.send(
    new Request(TOKEN_URL, {
      method: 'POST',
      headers: { Authorization: `Svc-JWK ${assertion}`, 'X-Request-Id': requestId },
      body: JSON.stringify(body),
    }),
  );
}

test('JWKA-01 a valid jc1 assertion gets a token bound to K1', async () => {
  const fx = await createPlaneDeployment();
  const response = await fx.send(await jwkTokenRequest(body));
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('Cache-Control'), 'no-store');
  assert.equal(response.headers.get('Pragma'), 'no-cache');
  const { claims } = decodeJws(response.body.token);
  assert.deepEqual(claims.cnf, { jkt: await harnessThumbprint(fx.keys.K1.publicJwk) });
  assert.equal(claims.spa, 'service');
  assert.equal(claims.sub, 'svc-jwk');
});

test('JWKA-02 assertion lifetime: 301 s refused, 300 s accepted', async () => {
  const fx = await createPlaneDeployment();
  const iat = now();
  assertUnauthorized(
    await fx.send(await jwkTokenRequest(body, { claims: { iat, exp: iat + 301 } })),
    '301',
  );
  const ok = await fx.send(await jwkTokenRequest(body, { claims: { iat, exp: iat + 300 } }));
  assert.equal(ok.status, 200);
});

test('JWKA-03 an expired or future assertion is refused', async () => {
  const fx = await createPlaneDeployment();
  const t = now();
  const expired = { iat: t - (SKEW + 70), exp: t - (SKEW + 10) };
  const future = { iat: t + SKEW + 60, nbf: t + SKEW + 60, exp: t + SKEW + 120 };
  for (const claims of [expired, future]) {
    assertUnauthorized(
      await fx.send(await jwkTokenRequest(body, { claims })),
      JSON.stringify(claims),
    );
  }
});

test('JWKA-04 an unregistered key under a registered kid is refused', async () => {
  const fx = await createPlaneDeployment();
  const response = await fx.send(
    await jwkTokenRequest(body, { key: fx.keys.attacker, header: { kid: 'jk1' } }),
  );
  assertUnauthorized(response, 'attacker key');
});

test('JWKA-05 alg none, HS256 keyed with the public JWK, and ES384 are refused', async () => {
  const fx = await createPlaneDeployment();
  const none = await unsignedAssertion(
    { alg: 'none', kid: 'jk1', typ: 'svc-client+jwt' },
    'r-05a',
    () => '',
  );
  const { kty, crv, x, y } = fx.keys.K1.publicJwk;
  const hmacKey = await crypto.subtle.importKey(
    'raw',
    new TextEncoder().encode(JSON.stringify({ kty, crv, x, y })),
    { name: 'HMAC', hash: 'SHA-256' },
    false,
    ['sign'],
  );
  const hs256 = await unsignedAssertion(
    { alg: 'HS256', kid: 'jk1', typ: 'svc-client+jwt' },
    'r-05b',
    async (input) =>
      encodeBase64Url(
        new Uint8Array(await crypto.subtle.sign('HMAC', hmacKey, new TextEncoder().encode(input))),
      ),
  );
  const p384 = await crypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-384' }, false, [
    'sign',
  ]) as CryptoKeyPair;
  const es384 = await unsignedAssertion(
    { alg: 'ES384', kid: 'jk1', typ: 'svc-client+jwt' },
    'r-05c',
    async (input) =>
      encodeBase64Url(
        new Uint8Array(
          await crypto.subtle.sign(
            { name: 'ECDSA', hash: 'SHA-384' },
            p384.privateKey,
            new TextEncoder().encode(input),
          ),
        ),
      ),
  );
  for (const [assertion, requestId] of [[none, 'r-05a'], [hs256, 'r-05b'], [es384, 'r-05c']]) {
    assertUnauthorized(await sendWithAssertion(fx, assertion, requestId), requestId);
  }
});

test('JWKA-06 keys in the header (jwk, jku, x5u, x5c) are refused without any fetch', async () => {
  const fx = await createPlaneDeployment();
  const { kty, crv, x, y } = fx.keys.attacker.publicJwk;
  const headers: Record<string, unknown>[] = [
    { jwk: { kty, crv, x, y } },
    { jku: 'https://evil.test/jwks.json' },
    { x5u: 'https://evil.test/cert.pem' },
    { x5c: ['MIIBfake'] },
  ];
  const [, fetches] = await countingGlobalFetch(async () => {
    for (const header of headers) {
      const response = await fx.send(
        await jwkTokenRequest(body, { key: fx.keys.attacker, header: { kid: 'jk1', ...header } }),
      );
      assertUnauthorized(response, Object.keys(header)[0]);
    }
  });
  assert.equal(fetches, 0, 'the evil listener was never contacted');
});

test('JWKA-07 an assertion naming another client, or with iss != sub, is refused', async () => {
  const fx = await createPlaneDeployment();
  for (const claims of [{ iss: 'hc2', sub: 'hc2' }, { iss: 'jc1', sub: 'hc2' }]) {
    assertUnauthorized(
      await fx.send(await jwkTokenRequest(tokenBody({ callerServiceId: 'svc-other' }), { claims })),
      JSON.stringify(claims),
    );
  }
});

test('JWKA-08 an assertion for another plane is refused', async () => {
  const fx = await createPlaneDeployment();
  for (const aud of ['https://other-plane.test', `${ISS}/`, [ISS]]) {
    assertUnauthorized(
      await fx.send(await jwkTokenRequest(body, { claims: { aud } })),
      JSON.stringify(aud),
    );
  }
});

test('JWKA-09 body, path, method and request id are bound to the assertion', async () => {
  const fx = await createPlaneDeployment();
  const variants: Parameters<typeof jwkTokenRequest>[1][] = [
    { send: { body: JSON.stringify({ ...body, scopes: ['svc-a.write'] }) } },
    { send: { url: `${TOKEN_URL}?v=2` } },
    { send: { url: `${TOKEN_URL}?` } },
    { claims: { htm: 'PUT' } },
    { send: { requestId: 'another-request' } },
  ];
  for (const options of variants) {
    assertUnauthorized(
      await fx.send(await jwkTokenRequest(body, options)),
      JSON.stringify(options),
    );
  }
});

test('JWKA-10 a kid registered to another client, or no kid, is refused', async () => {
  const jk3 = await generateFixtureKey('jk3');
  const base = await createPlaneDeployment();
  const fx = await createPlaneDeployment({
    authenticateCaller: [
      hmacServiceClientAuth({
        clients: { hc1: { serviceId: 'svc-caller', secret: HMAC_SECRETS.hc1 } },
      }),
      jwkServiceClientAuth({
        clients: {
          jc1: { serviceId: 'svc-jwk', keys: [base.keys.K1.publicJwk, base.keys.K2.publicJwk] },
          jc2: { serviceId: 'svc-jwk2', keys: [jk3.publicJwk] },
        },
        log: false,
      }),
    ],
  });
  assertUnauthorized(await fx.send(await jwkTokenRequest(body, { key: jk3 })), 'jc2 key');
  assertUnauthorized(
    await fx.send(await jwkTokenRequest(body, { header: { kid: undefined } })),
    'no kid',
  );
  assert.equal((await fx.send(await jwkTokenRequest(body))).status, 200, 'control');
});

test('JWKA-11 scheme case variants pass; malformed credentials are refused', async () => {
  const fx = await createPlaneDeployment();
  for (const scheme of ['svc-jwk', 'SVC-JWK', 'sVc-JwK']) {
    assert.equal((await fx.send(await jwkTokenRequest(body, { scheme }))).status, 200, scheme);
  }
  const assertion = await jwkAssertion(JSON.stringify(body), 'r-11');
  for (
    const authorization of [
      'Svc-JWK',
      `Svc-JWK ${assertion} extra`,
      `Svc-JWK ${assertion}, Svc-JWK ${assertion}`,
      `Svc-JWK${assertion}`,
      `Bearer ${assertion}`,
    ]
  ) {
    assertUnauthorized(
      await fx.send(await jwkTokenRequest(body, { authorization, requestId: 'r-11' })),
      authorization.slice(0, 24),
    );
  }
  const underHmac = await fx.send(
    await jwkTokenRequest(body, {
      authorization: `Svc-HMAC-SHA256 ${assertion}`,
      requestId: 'r-11',
    }),
  );
  assert.equal(underHmac.status, 401);
  assert.match(underHmac.headers.get('WWW-Authenticate') ?? '', /Svc-HMAC-SHA256/);
});

test('JWKA-12 a replay within the lifetime passes; after exp plus skew it is refused', async () => {
  let clockMs = Date.now();
  const fx = await createPlaneDeployment({ jwk: { now: () => clockMs } });
  const iat = Math.floor(clockMs / 1000);
  const fixed = { requestId: 'r-12', claims: { iat, exp: iat + 60, jti: 'jti-12' } };
  assert.equal((await fx.send(await jwkTokenRequest(body, fixed))).status, 200);
  assert.equal((await fx.send(await jwkTokenRequest(body, fixed))).status, 200);
  clockMs += (60 + SKEW + 5) * 1000;
  assertUnauthorized(await fx.send(await jwkTokenRequest(body, fixed)), 'after exp + skew');
});

test('JWKA-13 caller key rotation: a K2 token needs a K2 proof; a K1 proof is refused', async () => {
  const fx = await createPlaneDeployment();
  const response = await fx.send(await jwkTokenRequest(body, { key: fx.keys.K2 }));
  const token = response.body.token as string;
  assert.deepEqual(decodeJws(token).claims.cnf, {
    jkt: await harnessThumbprint(fx.keys.K2.publicJwk),
  });
  const k1Proof = await craftedProof({ token, key: fx.keys.K1 });
  using session = fx.session('svc-a.echo', {
    token,
    proveTokenPossession: () => Promise.resolve(k1Proof),
  });
  await assertRefusal(session.whoami({}), {
    code: 'capability_auth',
    status: 401,
    reason: 'proof_key_mismatch',
  });
  assert.equal(fx.count('factories', 'svc-a.echo'), 0);
});
