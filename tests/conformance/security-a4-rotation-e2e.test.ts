// Security checklist A4 (JWKS and rotation) end to end: the plane's HTTP JWKS and token routes,
// real services verifying against the JWKS they fetched through their binding. The services cache
// the JWKS for 30 s here; a test moves the wall clock past that instead of waiting (the checklist's
// "2 s" wait), so no stall of a loaded machine can expire a cache between two steps.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SvcConfigurationError } from '../../src/core/errors.ts';
import type { ControlPlane } from '../../src/plane/control-plane.ts';
import {
  assertRefusal,
  createPlaneDeployment,
  decodeJws,
  fromBase64Url,
  HMAC_SECRETS,
  hmacTokenRequest,
  JWKS_URL,
  type PlaneDeployment,
  readResponse,
  tokenBody,
} from './plane-fixture.ts';
import { steppableWallClock } from '../support/wall-clock.ts';

const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k', 'oth'];
/** The services' JWKS cache lifetime in the tests that wait for it to pass. */
const JWKS_CACHE_TTL_SECONDS = 30;

/**
 * A test whose deployment caches the JWKS for {@link JWKS_CACHE_TTL_SECONDS}; `expireCaches()`
 * moves the wall clock one second past that lifetime.
 */
function cacheExpiryTest(
  name: string,
  body: (fx: PlaneDeployment, expireCaches: () => void) => Promise<void>,
  signingOrder: Array<'k1' | 'k2'>,
) {
  test(name, async () => {
    const clock = steppableWallClock();
    try {
      const fx = await createPlaneDeployment({
        signingOrder,
        jwksCacheTtlSeconds: JWKS_CACHE_TTL_SECONDS,
      });
      await body(fx, () => clock.advance((JWKS_CACHE_TTL_SECONDS + 1) * 1000));
    } finally {
      clock.restore();
    }
  });
}

type Report = { identity: Record<string, unknown> };

async function tokenFrom(plane: ControlPlane, body = tokenBody()): Promise<string> {
  const response = await readResponse(await plane.fetch(await hmacTokenRequest(body)));
  assert.equal(response.status, 200);
  return response.body.token;
}

async function whoami(fx: PlaneDeployment, token: string): Promise<Record<string, unknown>> {
  using session = fx.session('svc-a.echo', { token });
  return (await session.whoami({}) as Report).identity;
}

async function jwksOf(plane: ControlPlane) {
  return await readResponse(await plane.fetch(new Request(JWKS_URL)));
}

test('JWKS-01 the JWKS route lists each kid once, public P-256 members only, no secret', async () => {
  const fx = await createPlaneDeployment({ signingOrder: ['k1', 'k2'] });
  const response = await fx.plane.fetch(new Request(JWKS_URL));
  const text = await response.text();
  assert.equal(response.status, 200);
  const { keys } = JSON.parse(text);
  assert.deepEqual(keys.map((key: { kid: string }) => key.kid), ['k1', 'k2']);
  for (const key of keys) {
    assert.equal(key.kty, 'EC');
    assert.equal(key.crv, 'P-256');
    assert.equal(fromBase64Url(key.x).length, 32);
    assert.equal(fromBase64Url(key.y).length, 32);
    for (const member of PRIVATE_MEMBERS) assert.equal(member in key, false, member);
  }
  const secrets = [
    fx.keys.k1.privateJwk.d!,
    fx.keys.k2.privateJwk.d!,
    HMAC_SECRETS.hc1,
    HMAC_SECRETS.hc2,
  ];
  for (const secret of secrets) assert.equal(text.includes(secret), false);
});

test('JWKS-02 the first entry signs; both keys are published under either order', async () => {
  const fx = await createPlaneDeployment({ signingOrder: ['k1', 'k2'] });
  for (const order of [['k1', 'k2'], ['k2', 'k1']] as const) {
    const plane = await fx.redeploy([...order]);
    assert.equal(decodeJws(await tokenFrom(plane)).header.kid, order[0]);
    const { body } = await jwksOf(plane);
    assert.deepEqual(body.keys.map((key: { kid: string }) => key.kid).sort(), ['k1', 'k2']);
  }
});

test('JWKS-03 two planes [k1,k2] and [k2,k1]: all four token/JWKS combinations pass', async () => {
  const first = await createPlaneDeployment({ signingOrder: ['k1', 'k2'] });
  const second = await createPlaneDeployment({ signingOrder: ['k2', 'k1'] });
  for (const issuing of [first, second]) {
    for (const verifying of [first, second]) {
      const identity = await whoami(verifying, await tokenFrom(issuing.plane));
      assert.equal(identity.serviceId, 'svc-caller');
    }
  }
  assert.equal(decodeJws(await tokenFrom(second.plane)).header.kid, 'k2');
});

cacheExpiryTest(
  'JWKS-04 retire: a k1 token passes within the service cache TTL and fails after it',
  async (fx, expireCaches) => {
    const stage1 = fx.replica(['k1', 'k2']);
    const k1Token = await tokenFrom(stage1);
    await whoami(fx, k1Token);
    await fx.redeploy(['k2']);
    // Inside the TTL the service still holds k1.
    assert.equal((await whoami(fx, k1Token)).serviceId, 'svc-caller');
    expireCaches();
    const factories = fx.count('factories', 'svc-a.echo');
    using session = fx.session('svc-a.echo', { token: k1Token });
    await assertRefusal(session.whoami({}), {
      code: 'capability_auth',
      status: 401,
      reason: 'unknown_capability_key_id',
    });
    assert.equal(fx.count('factories', 'svc-a.echo'), factories, 'the handler never ran');
  },
  ['k2', 'k1'],
);

test('JWKS-05 two entries sharing kid k1 refuse to start, naming the duplicate', async () => {
  const fx = await createPlaneDeployment();
  let built: ControlPlane | undefined;
  assert.throws(
    () => {
      built = fx.replica(['k1'], {
        signingKeys: [
          { kid: 'k1', secret: fx.keys.k1.privateJwk },
          { kid: 'k1', secret: { ...fx.keys.k2.privateJwk, kid: 'k1' } },
        ],
      });
    },
    (error: unknown) =>
      error instanceof SvcConfigurationError &&
      /Duplicate capability signing key id: k1/.test(error.message),
  );
  assert.equal(built, undefined, 'no plane exists to serve a JWKS');
});

test('JWKS-06 every service stopped: the JWKS is served, issuance fails closed', async () => {
  const fx = await createPlaneDeployment();
  for (const id of ['svc-a', 'svc-b', 'svc-c', 'svc-d'] as const) fx.stop(id);
  const jwks = await jwksOf(fx.plane);
  assert.equal(jwks.status, 200);
  assert.equal(jwks.body.keys.length, 2);
  const token = await fx.send(await hmacTokenRequest(tokenBody()));
  assert.ok(token.status >= 500, String(token.status));
  assert.equal(token.body.token, undefined);
  using session = fx.plane.abilitySession({
    abilityId: 'svc-a.echo',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
  });
  await assertRefusal(session.whoami({}), { code: 'internal', status: 500 });
});

test('JWKS-07 httpCache: max-age, stale-while-revalidate=300, svc:jwks; 0 drops the directive', async () => {
  const fx = await createPlaneDeployment();
  const cached = await jwksOf(fx.replica(['k1', 'k2'], { httpCache: true }));
  const cacheControl = cached.headers.get('Cache-Control') ?? '';
  assert.match(cacheControl, /max-age=\d+/);
  assert.match(cacheControl, /stale-while-revalidate=300/);
  assert.ok((cached.headers.get('Cache-Tag') ?? '').split(',').includes('svc:jwks'));
  const rotation = await jwksOf(
    fx.replica(['k1', 'k2'], { httpCache: { staleWhileRevalidateSeconds: 0 } }),
  );
  const rotationControl = rotation.headers.get('Cache-Control') ?? '';
  assert.doesNotMatch(rotationControl, /stale-while-revalidate=[1-9]/);
  assert.match(rotationControl, /max-age=\d+/);
});

cacheExpiryTest(
  'JWKS-08 emergency revocation: k1 absent, its tokens fail, new tokens use k2',
  async (fx, expireCaches) => {
    const compromised = await tokenFrom(fx.plane);
    await whoami(fx, compromised);
    const revoked = await fx.redeploy(['k2']);
    expireCaches();
    const factories = fx.count('factories', 'svc-a.echo');
    using session = fx.session('svc-a.echo', { token: compromised });
    await assertRefusal(session.whoami({}), { status: 401, reason: 'unknown_capability_key_id' });
    assert.equal(fx.count('factories', 'svc-a.echo'), factories, 'the handler never ran');
    const fresh = await tokenFrom(revoked);
    assert.equal(decodeJws(fresh).header.kid, 'k2');
    assert.equal((await whoami(fx, fresh)).serviceId, 'svc-caller');
    const jwksPath = new URL(JWKS_URL).pathname;
    assert.ok(fx.jwksRequests.length >= 2);
    assert.ok(fx.jwksRequests.every((url) => new URL(url).pathname === jwksPath));
  },
  ['k1', 'k2'],
);
