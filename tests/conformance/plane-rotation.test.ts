// Contract "Signing-key rotation" r1-r9, each stage a redeploy of the real plane while the real
// services keep their JWKS caches. The caches live 30 s here and each test moves the wall clock
// past that instead of waiting, so no stall of a loaded machine between two steps can expire a
// cache early and turn an expected refusal into an acceptance.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEFAULT_HTTP_CACHE_MAX_AGE_SECONDS } from '../../src/core/http-cache.ts';
import { SvcConfigurationError } from '../../src/core/errors.ts';
import type { ControlPlane } from '../../src/plane/control-plane.ts';
import { MAX_CAPABILITY_TOKEN_TTL_SECONDS } from '../../src/plane/issuer.ts';
import { DEFAULT_JWKS_CACHE_TTL_SECONDS } from '../../src/service/jwks-sources.ts';
import { steppableWallClock } from '../support/wall-clock.ts';
import {
  assertRefusal,
  createPlaneDeployment,
  decodeJws,
  hmacTokenRequest,
  JWKS_URL,
  type PlaneDeployment,
  type PlaneDeploymentOptions,
  readResponse,
  tokenBody,
} from './plane-fixture.ts';

/** The services' JWKS cache lifetime in these tests. */
const JWKS_CACHE_TTL_SECONDS = 30;

/** A deployment whose services cache the JWKS for {@link JWKS_CACHE_TTL_SECONDS}. */
async function rotationDeployment(options: PlaneDeploymentOptions = {}) {
  return await createPlaneDeployment({ ...options, jwksCacheTtlSeconds: JWKS_CACHE_TTL_SECONDS });
}

/**
 * A rotation test: `expireCaches()` moves the wall clock one second past the services' JWKS
 * cache lifetime, as waiting that long would.
 */
function rotationTest(name: string, body: (expireCaches: () => void) => Promise<void>) {
  test(name, async () => {
    const clock = steppableWallClock();
    try {
      await body(() => clock.advance((JWKS_CACHE_TTL_SECONDS + 1) * 1000));
    } finally {
      clock.restore();
    }
  });
}

type Report = { identity: Record<string, unknown> };

/** A fresh token from one replica's token endpoint (svc-a unless the body says otherwise). */
async function tokenFrom(plane: ControlPlane, body = tokenBody()): Promise<string> {
  const { status, body: answer } = await readResponse(
    await plane.fetch(await hmacTokenRequest(body)),
  );
  assert.equal(status, 200, JSON.stringify(answer));
  return answer.token;
}

const kidOf = (token: string) => decodeJws(token).header.kid;

async function accepted(fx: PlaneDeployment, token: string, abilityId = 'svc-a.echo') {
  using session = fx.session(abilityId, { token });
  return (await session.whoami({}) as Report).identity;
}

async function refusedUnknownKid(fx: PlaneDeployment, token: string, abilityId = 'svc-a.echo') {
  const factories = fx.count('factories', abilityId);
  using session = fx.session(abilityId, { token });
  await assertRefusal(session.whoami({}), {
    code: 'capability_auth',
    status: 401,
    reason: 'unknown_capability_key_id',
  });
  assert.equal(fx.count('factories', abilityId), factories, 'the handler never ran');
}

async function publishedKids(plane: ControlPlane): Promise<string[]> {
  const { body } = await readResponse(await plane.fetch(new Request(JWKS_URL)));
  return body.keys.map((key: { kid: string }) => key.kid);
}

test('Rotation r1: position, not age, decides the signer; every entry is published', async () => {
  const fx = await rotationDeployment({ signingOrder: ['k1', 'k2'] });
  assert.equal(kidOf(await tokenFrom(fx.plane)), 'k1');
  const reordered = await fx.redeploy(['k2', 'k1']);
  assert.equal(kidOf(await tokenFrom(reordered)), 'k2');
  assert.deepEqual(await publishedKids(reordered), ['k2', 'k1']);
  assert.throws(
    () => fx.replica(['k1', 'k2', 'k1']),
    (error: unknown) =>
      error instanceof SvcConfigurationError &&
      /Duplicate capability signing key id: k1/.test(error.message),
  );
});

rotationTest('Rotation r1: never keep a kid while changing its secret', async (expireCaches) => {
  const fx = await rotationDeployment({ signingOrder: ['k1'] });
  const original = await tokenFrom(fx.plane);
  await accepted(fx, original);
  // The same kid, another secret: the services' cached k1 no longer matches new tokens...
  await fx.activate(fx.replica(['k1'], {
    signingKeys: [{ kid: 'k1', secret: { ...fx.keys.k3.privateJwk, kid: 'k1' } }],
  }));
  const changed = await tokenFrom(fx.plane);
  assert.equal(kidOf(changed), 'k1');
  using before = fx.session('svc-a.echo', { token: changed });
  await assertRefusal(before.whoami({}), { status: 401, reason: 'bad_signature' });
  // ...and once they refetch, every token of the old secret fails instead.
  expireCaches();
  await accepted(fx, changed);
  using after = fx.session('svc-a.echo', { token: original });
  await assertRefusal(after.whoami({}), { status: 401 });
});

rotationTest(
  'Rotation r2: stage 1 publishes the new key last; the old key keeps signing',
  async (expireCaches) => {
    const fx = await rotationDeployment({ signingOrder: ['k1'] });
    await accepted(fx, await tokenFrom(fx.plane)); // svc-a caches a JWKS with k1 only
    const prepared = await fx.redeploy(['k1', 'k2']);
    assert.deepEqual(await publishedKids(prepared), ['k1', 'k2']);
    const token = await tokenFrom(prepared);
    assert.equal(kidOf(token), 'k1');
    await accepted(fx, token);
    // After one cache lifetime the services know k2 too, before anything is signed with it.
    expireCaches();
    const stage2 = fx.replica(['k2', 'k1']);
    await stage2.ready();
    await accepted(fx, await tokenFrom(stage2));
  },
);

test('Rotation r3: replicas at stage 1 and stage 2 interoperate', async () => {
  const fx = await rotationDeployment({ signingOrder: ['k1', 'k2'] });
  const stage1 = fx.plane;
  const stage2 = fx.replica(['k2', 'k1']);
  await stage2.ready();
  const svcA = tokenBody();
  const svcC = tokenBody({ targetServiceId: 'svc-c', scopes: ['svc-c.read'] });
  // svc-a's JWKS comes from the stage-1 replica...
  for (const plane of [stage1, stage2]) await accepted(fx, await tokenFrom(plane, svcA));
  // ...svc-c's from the stage-2 replica.
  await fx.activate(stage2);
  for (const plane of [stage1, stage2]) {
    await accepted(fx, await tokenFrom(plane, svcC), 'svc-c.echo');
  }
  assert.deepEqual(
    [await tokenFrom(stage1), await tokenFrom(stage2)].map(kidOf),
    ['k1', 'k2'],
  );
});

rotationTest(
  'Rotation r4: retiring the old key invalidates its tokens once caches expire',
  async (expireCaches) => {
    const fx = await rotationDeployment({ signingOrder: ['k2', 'k1'] });
    const stage1 = fx.replica(['k1', 'k2']);
    await stage1.ready();
    const oldToken = await tokenFrom(stage1);
    assert.equal(kidOf(oldToken), 'k1');
    await accepted(fx, oldToken);
    const retired = await fx.redeploy(['k2']);
    assert.deepEqual(await publishedKids(retired), ['k2']);
    expireCaches();
    await refusedUnknownKid(fx, oldToken);
    await accepted(fx, await tokenFrom(retired));
  },
);

test('Rotation r5: the parts of the overlap window are bounded and configurable', async () => {
  assert.equal(MAX_CAPABILITY_TOKEN_TTL_SECONDS, 3600);
  assert.equal(DEFAULT_HTTP_CACHE_MAX_AGE_SECONDS, 60);
  assert.equal(DEFAULT_JWKS_CACHE_TTL_SECONDS, 300);
  const fx = await rotationDeployment();
  // The maximum token lifetime is the plane's ttlSeconds: no request gets a longer token.
  const capped = decodeJws(await tokenFrom(fx.plane, tokenBody({ ttlSeconds: 86_400 })));
  assert.equal((capped.claims.exp as number) - (capped.claims.iat as number), 120);
  const longLived = fx.replica(['k1'], { ttlSeconds: 600 });
  const longest = decodeJws(await tokenFrom(longLived, tokenBody({ ttlSeconds: 86_400 })));
  assert.equal((longest.claims.exp as number) - (longest.claims.iat as number), 600);
  const atMax = fx.replica(['k1'], { ttlSeconds: MAX_CAPABILITY_TOKEN_TTL_SECONDS });
  const maxed = decodeJws(await tokenFrom(atMax, tokenBody({ ttlSeconds: 86_400 })));
  assert.equal((maxed.claims.exp as number) - (maxed.claims.iat as number), 3600);
  assert.throws(() => fx.replica(['k1'], { ttlSeconds: 7200 }), SvcConfigurationError);
  const defaults = await readResponse(
    await fx.replica(['k1'], { httpCache: true }).fetch(new Request(JWKS_URL)),
  );
  assert.equal(
    defaults.headers.get('Cache-Control'),
    'public, max-age=60, stale-while-revalidate=300',
  );
  const forRotation = await readResponse(
    await fx.replica(['k1'], { httpCache: { maxAgeSeconds: 5, staleWhileRevalidateSeconds: 0 } })
      .fetch(new Request(JWKS_URL)),
  );
  assert.equal(forRotation.headers.get('Cache-Control'), 'public, max-age=5');
});

test('Rotation r6: the JWKS carries the svc:jwks tag to purge at the edge', async () => {
  const fx = await rotationDeployment();
  for (const httpCache of [true, { tags: ['keys-eu'] }]) {
    const { headers } = await readResponse(
      await fx.replica(['k1'], { httpCache }).fetch(new Request(JWKS_URL)),
    );
    assert.equal(headers.get('Cache-Tag')?.split(',')[0], 'svc:jwks');
  }
});

rotationTest(
  'Rotation r7: rollback swaps the order back; tokens minted during the attempt stay valid',
  async (expireCaches) => {
    const fx = await rotationDeployment({ signingOrder: ['k1', 'k2'] });
    await fx.redeploy(['k2', 'k1']);
    const duringAttempt = await tokenFrom(fx.plane);
    assert.equal(kidOf(duringAttempt), 'k2');
    const rolledBack = await fx.redeploy(['k1', 'k2']);
    assert.equal(kidOf(await tokenFrom(rolledBack)), 'k1');
    expireCaches();
    await accepted(fx, duringAttempt);
    assert.deepEqual(await publishedKids(rolledBack), ['k1', 'k2']);
  },
);

rotationTest(
  'Rotation r8: revoking a key fails every outstanding token it signed',
  async (expireCaches) => {
    const fx = await rotationDeployment({ signingOrder: ['k1', 'k2'] });
    const compromised = [await tokenFrom(fx.plane), await tokenFrom(fx.plane)];
    for (const token of compromised) await accepted(fx, token);
    const revoked = await fx.redeploy(['k2']); // absent, not demoted
    expireCaches();
    for (const token of compromised) await refusedUnknownKid(fx, token);
    const fresh = await tokenFrom(revoked);
    assert.equal(kidOf(fresh), 'k2');
    await accepted(fx, fresh);
    assert.ok(fx.jwksRequests.every((url) => new URL(url).pathname === new URL(JWKS_URL).pathname));
  },
);

rotationTest(
  'Rotation r9: a kid missing from the cached JWKS is refused until the cache expires',
  async (expireCaches) => {
    const fx = await rotationDeployment({ signingOrder: ['k1'] });
    await accepted(fx, await tokenFrom(fx.plane));
    const fetches = fx.counters.jwksFetches;
    // Skipping stage 1: k2 signs before svc-a has seen it.
    const hasty = await fx.redeploy(['k2', 'k1']);
    const early = await tokenFrom(hasty);
    await refusedUnknownKid(fx, early);
    await refusedUnknownKid(fx, early);
    assert.equal(fx.counters.jwksFetches, fetches, 'an unknown kid does not trigger a refetch');
    expireCaches();
    const identity = await accepted(fx, early);
    assert.equal(identity.serviceId, 'svc-caller');
  },
);
