// Contract "Signing key entry": `signingKeys` is a list (or a function of the environment
// returning one) of `{ kid, secret }`; the first entry signs every new token; every entry is
// published in the JWKS; key ids are explicit and distinct. Proven through the real plane.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SvcConfigurationError } from '../../src/core/errors.ts';
import { PLANE_REQUEST_FAILED_EVENT } from '../../src/plane/request-failure.ts';
import { createControlPlane } from '../../src/plane/control-plane.ts';
import {
  createPlaneDeployment,
  decodeJws,
  hmacTokenRequest,
  JWKS_URL,
  PLANE_ID,
  planeKeys,
  readResponse,
  type SigningKeyName,
  tokenBody,
} from './plane-fixture.ts';

const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k', 'oth'];

/**
 * A plane whose `signingKeys(env)` answers `entries` fails closed: its JWKS route and token
 * endpoint answer 500 problems, with no key and no token, and the log gets the cause (`cause`)
 * once per failed request.
 */
async function assertFailsClosedWith(entries: () => unknown[], cause: RegExp): Promise<void> {
  const fx = await createPlaneDeployment();
  const plane = await fx.activate(fx.replica(['k1'], { signingKeys: entries as never }));
  const jwks = await readResponse(await plane.fetch(new Request(JWKS_URL)));
  assert.equal(jwks.status, 500);
  assert.equal(jwks.body.code, 'internal');
  assert.equal(jwks.body.keys, undefined);
  const token = await fx.send(await hmacTokenRequest(tokenBody()));
  assert.equal(token.status, 500);
  assert.equal(token.body.token, undefined);
  assert.equal(token.headers.get('Cache-Control'), 'no-store');
  // The caller gets an opaque 500; the operator gets the cause, once per failed request.
  const failures = fx.eventsNamed(PLANE_REQUEST_FAILED_EVENT);
  assert.deepEqual(
    failures.map(({ level, requestId, method, path, status }) => ({
      level,
      requestId,
      method,
      path,
      status,
    })),
    [
      {
        level: 'error',
        requestId: jwks.headers.get('X-Request-Id'),
        method: 'GET',
        path: '/.well-known/svc/jwks.json',
        status: 500,
      },
      {
        level: 'error',
        requestId: token.headers.get('X-Request-Id'),
        method: 'POST',
        path: '/.well-known/svc/capability-token',
        status: 500,
      },
    ],
  );
  for (const failure of failures) {
    const error = failure.error as { name: string; message: string };
    assert.equal(error.name, 'SvcConfigurationError');
    assert.match(error.message, cause);
  }
}

test('Signing key entry: the first entry signs every new token, whatever mints it', async () => {
  const fx = await createPlaneDeployment({ signingOrder: ['k2', 'k1', 'k3'] });
  const kidOf = (token: string) => decodeJws(token).header.kid;
  const endpoint = await fx.send(await hmacTokenRequest(tokenBody()));
  assert.equal(endpoint.status, 200);
  assert.equal(kidOf(endpoint.body.token), 'k2');
  const direct = {
    callerServiceId: PLANE_ID,
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    callerAccess: 'plane' as const,
  };
  assert.equal(kidOf((await fx.plane.issueCapabilityToken(direct)).token), 'k2');
  assert.equal(kidOf((await fx.plane.issueBrokeredCapabilityToken(direct)).token), 'k2');
  const forCaller = await fx.plane.issueCapabilityTokenForCaller({
    caller: { clientId: 'hc1', serviceId: 'svc-caller' },
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
  });
  assert.equal(kidOf(forCaller.token), 'k2');
  using session = fx.plane.abilitySession({
    abilityId: 'svc-a.echo',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
  });
  await session.whoami({});
  assert.deepEqual(fx.tokensAt('svc-a').map(kidOf), ['k2']);
});

test('Signing key entry: every entry is published in the JWKS by kid, public members only', async () => {
  const fx = await createPlaneDeployment({ signingOrder: ['k1', 'k2', 'k3'] });
  const { status, headers, body } = await readResponse(await fx.plane.fetch(new Request(JWKS_URL)));
  assert.equal(status, 200);
  assert.match(headers.get('Content-Type') ?? '', /json/);
  assert.deepEqual(body.keys.map((key: { kid: string }) => key.kid), ['k1', 'k2', 'k3']);
  for (const key of body.keys) {
    const configured = fx.keys[key.kid as SigningKeyName];
    assert.equal(key.kty, 'EC');
    assert.equal(key.crv, 'P-256');
    assert.equal(key.x, configured.publicJwk.x);
    assert.equal(key.y, configured.publicJwk.y);
    for (const member of PRIVATE_MEMBERS) assert.equal(member in key, false, member);
  }
  assert.deepEqual(JSON.parse(JSON.stringify(await fx.plane.jwks())), body);
});

test('Signing key entry: a function of the environment yields the list per environment', async () => {
  const fx = await createPlaneDeployment();
  const keys = await planeKeys();
  const plane = await fx.activate(fx.replica(['k1'], {
    signingKeys: (env) =>
      (env as { order: SigningKeyName[] }).order.map((name) => ({
        kid: keys[name].kid,
        secret: keys[name].privateJwk,
      })),
  }));
  const envA = { order: ['k2', 'k3'] as SigningKeyName[] };
  const envB = { order: ['k3', 'k1'] as SigningKeyName[] };
  const jwksA = await readResponse(await plane.fetch(new Request(JWKS_URL), envA));
  const jwksB = await readResponse(await plane.fetch(new Request(JWKS_URL), envB));
  assert.deepEqual(jwksA.body.keys.map((key: { kid: string }) => key.kid), ['k2', 'k3']);
  assert.deepEqual(jwksB.body.keys.map((key: { kid: string }) => key.kid), ['k3', 'k1']);
  assert.deepEqual((await plane.jwks(envA)).keys.map((key) => key.kid), ['k2', 'k3']);
  const tokenA = await fx.send(await hmacTokenRequest(tokenBody()), envA);
  const tokenB = await fx.send(await hmacTokenRequest(tokenBody()), envB);
  assert.equal(decodeJws(tokenA.body.token).header.kid, 'k2');
  assert.equal(decodeJws(tokenB.body.token).header.kid, 'k3');
  const issued = await plane.issueCapabilityToken({
    callerServiceId: PLANE_ID,
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    callerAccess: 'plane',
    context: { env: envB },
  });
  assert.equal(decodeJws(issued.token).header.kid, 'k3');
});

test('Signing key entry: key ids must be explicit', async () => {
  const keys = await planeKeys();
  for (const kid of [undefined, '', 7]) {
    assert.throws(
      () =>
        createControlPlane({
          signingKeys: [{ kid, secret: keys.k1.privateJwk } as never],
          services: [],
        }),
      (error: unknown) => error instanceof SvcConfigurationError && /kid/.test(error.message),
      `kid ${JSON.stringify(kid)}`,
    );
  }
  // A function of the environment is checked when it is resolved: the plane fails closed.
  await assertFailsClosedWith(() => [{ secret: keys.k1.privateJwk }], /kid/);
});

test('Signing key entry: key ids must be distinct', async () => {
  const keys = await planeKeys();
  const duplicate = [
    { kid: 'k1', secret: keys.k1.privateJwk },
    { kid: 'k1', secret: { ...keys.k2.privateJwk, kid: 'k1' } },
  ];
  assert.throws(
    () => createControlPlane({ signingKeys: duplicate, services: [] }),
    (error: unknown) =>
      error instanceof SvcConfigurationError &&
      /Duplicate capability signing key id: k1/.test(error.message),
  );
  await assertFailsClosedWith(() => duplicate, /Duplicate capability signing key id: k1/);
});

test('Signing key entry: a function answering an empty list fails closed', async () => {
  await assertFailsClosedWith(() => [], /empty|at least one|no /i);
});

test('Signing key entry: a malformed static secret refuses construction, before ready()', async () => {
  const keys = await planeKeys();
  const jwk = keys.k1.privateJwk as Record<string, unknown>;
  const pemBody = btoa('not a pkcs8 key at all, but base64 all the same');
  const malformed: [string, unknown, RegExp][] = [
    ['its own kid disagrees', { ...jwk, kid: 'other' }, /kid "other" disagrees/],
    ['JWK JSON with a short d', JSON.stringify({ ...jwk, d: 'AAAA' }), /"d" must be 32 bytes/],
    ['a public JWK', { ...jwk, d: undefined }, /public key/],
    ['an RSA JWK', { ...jwk, kty: 'RSA' }, /EC P-256/],
    ['neither JSON nor PEM', 'my-secret-password', /neither JWK JSON nor a PKCS#8 PEM/],
    ['an SEC1 PEM', '-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----', /PKCS#8/],
    [
      'a PEM of something else',
      `-----BEGIN PRIVATE KEY-----\n${pemBody}\n-----END PRIVATE KEY-----`,
      /not a P-256 EC private key/,
    ],
  ];
  for (const [what, secret, message] of malformed) {
    assert.throws(
      () =>
        createControlPlane({
          signingKeys: [{ kid: 'k1', secret } as never],
          services: [],
          log: false,
        }),
      (error: unknown) =>
        error instanceof SvcConfigurationError && error.reason === 'invalid_signing_keys' &&
        message.test(error.message),
      what,
    );
  }
});

test('Signing key entry: a secret whose d does not match its x, y fails closed at import', async () => {
  const keys = await planeKeys();
  const other = keys.k2.privateJwk as { d?: string };
  // Well-formed member by member, so only WebCrypto can tell: the plane is not ready and
  // serves no JWKS.
  const plane = createControlPlane({
    signingKeys: [{ kid: 'k1', secret: { ...keys.k1.privateJwk, d: other.d } }],
    services: [],
    log: false,
  });
  await assert.rejects(plane.ready(), SvcConfigurationError);
  const jwks = await readResponse(await plane.fetch(new Request(JWKS_URL)));
  assert.equal(jwks.status, 500);
  assert.equal(jwks.body.keys, undefined);
});
