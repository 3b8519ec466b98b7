// Security checklist A4 (JWKS and rotation), at the level of the signing authority (what the
// plane publishes and signs with) and the service's JWKS source (what a service accepts). The
// plane's HTTP JWKS route is exercised end to end elsewhere.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { capabilityKeySetFromJwks } from '../../src/core/capability-key-set.ts';
import { signCapabilityToken, verifyCapabilityToken } from '../../src/core/capability-token.ts';
import { SvcConfigurationError } from '../../src/core/errors.ts';
import {
  loadSigningAuthority,
  type SigningAuthority,
  signingAuthorityFromOption,
} from '../../src/plane/signing-keys.ts';
import { jwksFromUrl } from '../../src/service/jwks-sources.ts';
import { baselineClaims, decodeSegment, fromB64url, TEST_ISSUER } from '../support/forge.ts';
import { testKeys } from '../support/keys.ts';
import { assertRefused } from '../support/token-fixture.ts';

const JWKS_URL = `${TEST_ISSUER}/.well-known/svc/jwks.json`;
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k', 'oth'];

function issue(authority: SigningAuthority): Promise<string> {
  return signCapabilityToken(baselineClaims() as never, authority.signer);
}

/** A JWKS route stand-in: serves whatever the plane currently publishes, counting requests. */
function planeJwksRoute(initial: SigningAuthority) {
  let published = initial;
  const requests: string[] = [];
  return {
    requests,
    redeploy(authority: SigningAuthority) {
      published = authority;
    },
    fetch: ((input: RequestInfo | URL) => {
      requests.push(String(input));
      return Promise.resolve(Response.json(published.jwks));
    }) as typeof fetch,
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

test('JWKS-01 (authority) every kid once, public P-256 members only, no secret', async () => {
  const keys = await testKeys();
  const authority = await loadSigningAuthority([keys.k1.entry, keys.k2.entry]);
  const body = JSON.stringify(authority.jwks);
  const kids = authority.jwks.keys.map((key) => key.kid);
  assert.deepEqual(kids, ['k1', 'k2']);
  for (const key of JSON.parse(body).keys) {
    assert.equal(key.kty, 'EC');
    assert.equal(key.crv, 'P-256');
    assert.equal(fromB64url(key.x).length, 32);
    assert.equal(fromB64url(key.y).length, 32);
    for (const member of PRIVATE_MEMBERS) assert.equal(member in key, false, member);
  }
  for (const secret of [keys.k1.privateJwk.d!, keys.k2.privateJwk.d!]) {
    assert.equal(body.includes(secret), false, 'no private scalar anywhere in the body');
  }
});

test('JWKS-02 the first entry signs; both keys are published either way', async () => {
  const keys = await testKeys();
  for (const order of [[keys.k1, keys.k2], [keys.k2, keys.k1]]) {
    const authority = await loadSigningAuthority(order.map((key) => key.entry));
    const token = await issue(authority);
    assert.equal(decodeSegment(token, 0).kid, order[0].kid);
    assert.deepEqual(authority.jwks.keys.map((key) => key.kid).sort(), ['k1', 'k2']);
  }
});

test('JWKS-03 planes at stages 1 and 2 interoperate in all four combinations', async () => {
  const keys = await testKeys();
  const stage1 = await loadSigningAuthority([keys.k1.entry, keys.k2.entry]);
  const stage2 = await loadSigningAuthority([keys.k2.entry, keys.k1.entry]);
  for (const issuer of [stage1, stage2]) {
    for (const publisher of [stage1, stage2]) {
      const keySet = await capabilityKeySetFromJwks(JSON.parse(JSON.stringify(publisher.jwks)));
      const verified = await verifyCapabilityToken(await issue(issuer), {
        keys: keySet,
        issuer: TEST_ISSUER,
        audience: 'svc-a',
      });
      assert.equal(verified.identity.serviceId, 'svc-caller');
    }
  }
});

test('JWKS-04 retired key: accepted within the service cache TTL, refused after it', async () => {
  const keys = await testKeys();
  const before = await loadSigningAuthority([keys.k2.entry, keys.k1.entry]);
  const route = planeJwksRoute(before);
  const keySet = jwksFromUrl(JWKS_URL, { cacheTtlSeconds: 0.5, fetch: route.fetch });
  const options = { keys: keySet, issuer: TEST_ISSUER, audience: 'svc-a' };
  const k1Token = await signCapabilityToken(baselineClaims() as never, {
    kid: 'k1',
    privateKey: keys.k1.privateKey,
  });
  assert.equal((await verifyCapabilityToken(k1Token, options)).identity.serviceId, 'svc-caller');
  route.redeploy(await loadSigningAuthority([keys.k2.entry])); // stage 3: retire k1
  // Still inside the TTL: the cached JWKS (and the cached verification) may accept it.
  assert.equal((await verifyCapabilityToken(k1Token, options)).identity.serviceId, 'svc-caller');
  await sleep(700);
  await assertRefused(verifyCapabilityToken(k1Token, options), 'unknown_capability_key_id');
  assert.equal(route.requests.length, 2);
});

test('JWKS-05 two entries sharing a kid are refused', async () => {
  const keys = await testKeys();
  const duplicate = [keys.k1.entry, { kid: 'k1', secret: keys.k2.entry.secret }];
  await assert.rejects(loadSigningAuthority(duplicate), (error: unknown) => {
    assert.ok(error instanceof SvcConfigurationError);
    assert.equal(error.message, 'Duplicate capability signing key id: k1');
    return true;
  });
  await assert.rejects(
    signingAuthorityFromOption(() => duplicate, {}),
    /Duplicate capability signing key id: k1/,
  );
});

test('JWKS-06 (authority) the JWKS comes from signing keys alone', async () => {
  const keys = await testKeys();
  // No catalog, services or discovery exist here: the signing keys are all the JWKS needs.
  const authority = await signingAuthorityFromOption(
    (env) => (env as { keys: typeof keys.k1.entry[] }).keys,
    { keys: [keys.k1.entry, keys.k2.entry] },
  );
  assert.deepEqual(authority.jwks.keys.map((key) => key.kid), ['k1', 'k2']);
  const keySet = await capabilityKeySetFromJwks(authority.jwks);
  const verified = await verifyCapabilityToken(await issue(authority), {
    keys: keySet,
    issuer: TEST_ISSUER,
    audience: 'svc-a',
  });
  assert.equal(verified.identity.audience, 'svc-a');
});

test('JWKS-07 (verifier) a service JWKS cache TTL of 0 drops a retired key at once', async () => {
  const keys = await testKeys();
  const route = planeJwksRoute(await loadSigningAuthority([keys.k1.entry, keys.k2.entry]));
  const keySet = jwksFromUrl(JWKS_URL, { cacheTtlSeconds: 0, fetch: route.fetch });
  const options = { keys: keySet, issuer: TEST_ISSUER, audience: 'svc-a' };
  const token = await signCapabilityToken(baselineClaims() as never, {
    kid: 'k1',
    privateKey: keys.k1.privateKey,
  });
  await verifyCapabilityToken(token, options);
  route.redeploy(await loadSigningAuthority([keys.k2.entry]));
  await assertRefused(verifyCapabilityToken(token, options), 'unknown_capability_key_id');
});

test('JWKS-08 emergency revocation: k1 removed, its tokens fail once the cache expires', async () => {
  const keys = await testKeys();
  const route = planeJwksRoute(await loadSigningAuthority([keys.k1.entry, keys.k2.entry]));
  const keySet = jwksFromUrl(JWKS_URL, { cacheTtlSeconds: 0.5, fetch: route.fetch });
  const options = { keys: keySet, issuer: TEST_ISSUER, audience: 'svc-a' };
  const compromised = await signCapabilityToken(baselineClaims() as never, {
    kid: 'k1',
    privateKey: keys.k1.privateKey,
  });
  await verifyCapabilityToken(compromised, options);
  const revoked = await loadSigningAuthority([keys.k2.entry]); // absent, not demoted
  route.redeploy(revoked);
  await sleep(700);
  await assertRefused(verifyCapabilityToken(compromised, options), 'unknown_capability_key_id');
  const fresh = await issue(revoked);
  assert.equal(decodeSegment(fresh, 0).kid, 'k2');
  assert.equal((await verifyCapabilityToken(fresh, options)).identity.serviceId, 'svc-caller');
  // Only the configured JWKS URL was ever requested: there is no revocation list to consult.
  assert.ok(route.requests.every((url) => url === JWKS_URL));
});
