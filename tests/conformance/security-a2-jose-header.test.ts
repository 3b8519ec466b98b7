// Security checklist A2 (JOSE header abuse), at the verifier level. Cases that name a URL check
// that nothing is fetched: the global fetch is replaced by a counting spy for their duration.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { CapabilityKeySet } from '../../src/core/capability-key-set.ts';
import { signCapabilityToken, verifyCapabilityToken } from '../../src/core/capability-token.ts';
import { jwksFromUrl } from '../../src/service/jwks-sources.ts';
import {
  b64url,
  baselineClaims,
  capabilityHeader,
  encodePart,
  es256Signature,
  signedToken,
  TEST_ISSUER,
} from '../support/forge.ts';
import { assertRefused, tokenFixture } from '../support/token-fixture.ts';

const EVIL_URL = 'https://evil.test/jwks.json';

/** Replaces the global fetch with a spy that records every request and answers 404. */
async function withGlobalFetchSpy(run: (calls: string[]) => Promise<void>): Promise<string[]> {
  const calls: string[] = [];
  const original = globalThis.fetch;
  globalThis.fetch = ((input: RequestInfo | URL) => {
    calls.push(input instanceof Request ? input.url : String(input));
    return Promise.resolve(new Response('not here', { status: 404 }));
  }) as typeof fetch;
  try {
    await run(calls);
  } finally {
    globalThis.fetch = original;
  }
  return calls;
}

test('HDR-01 kid absent or not a non-empty string', async () => {
  const { keys, verify } = await tokenFixture();
  const kids: unknown[] = [undefined, 1, [], {}, null, ''];
  for (const kid of kids) {
    const header: Record<string, unknown> = { ...capabilityHeader(), kid };
    if (kid === undefined) delete header.kid;
    const token = await signedToken(keys.k1.privateKey, baselineClaims(), header);
    await assertRefused(verify(token), 'token_malformed', `kid ${JSON.stringify(kid)}`);
  }
});

test('HDR-02 unpublished kid names an unknown capability key id', async () => {
  const { keys, verify } = await tokenFixture();
  const token = await signedToken(
    keys.attacker.privateKey,
    baselineClaims(),
    capabilityHeader('k9'),
  );
  const error = await assertRefused(verify(token), 'unknown_capability_key_id');
  assert.match(error.message, /unknown capability key id/i);
});

test('HDR-03 kid lookup injection reads as unknown and touches nothing', async () => {
  const { authority, keys } = await tokenFixture();
  const jwksRequests: string[] = [];
  const keySet = jwksFromUrl(`${TEST_ISSUER}/.well-known/svc/jwks.json`, {
    fetch: ((input: RequestInfo | URL) => {
      jwksRequests.push(String(input));
      return Promise.resolve(Response.json(authority.jwks));
    }) as typeof fetch,
  });
  const kids = ['../../../../etc/passwd', 'k1/../k1', "' OR '1'='1", 'k1\u0000', 'k1 ', 'K1', '*'];
  const globalCalls = await withGlobalFetchSpy(async () => {
    for (const kid of kids) {
      const token = await signedToken(keys.k1.privateKey, baselineClaims(), capabilityHeader(kid));
      await assertRefused(
        verifyCapabilityToken(token, { keys: keySet, issuer: TEST_ISSUER, audience: 'svc-a' }),
        'unknown_capability_key_id',
        JSON.stringify(kid),
      );
    }
  });
  assert.deepEqual(globalCalls, []);
  // One JWKS load from the configured URL; no unknown kid caused another request.
  assert.deepEqual(jwksRequests, [`${TEST_ISSUER}/.well-known/svc/jwks.json`]);
});

test('HDR-04 the key is chosen by kid only (k2 signature under kid k1)', async () => {
  const { keySet, keys } = await tokenFixture();
  const lookups: string[] = [];
  const countingKeySet: CapabilityKeySet = {
    getKey(kid) {
      lookups.push(kid);
      return keySet.getKey(kid);
    },
  };
  const token = await signedToken(keys.k2.privateKey, baselineClaims(), capabilityHeader('k1'));
  await assertRefused(
    verifyCapabilityToken(token, { keys: countingKeySet, issuer: TEST_ISSUER, audience: 'svc-a' }),
    'bad_signature',
  );
  assert.deepEqual(lookups, ['k1'], 'exactly one key was looked up, the one the kid names');
});

test('HDR-05 jku pointing at an attacker JWKS is refused without a fetch', async () => {
  const { keys, verify } = await tokenFixture();
  const calls = await withGlobalFetchSpy(async () => {
    for (const kid of ['a1', 'k1']) {
      const token = await signedToken(keys.attacker.privateKey, baselineClaims(), {
        ...capabilityHeader(kid),
        jku: EVIL_URL,
      });
      await assertRefused(verify(token), 'header_not_allowed', `jku with kid ${kid}`);
    }
  });
  assert.deepEqual(calls, []);
});

test('HDR-06 x5u and x5c are refused without a fetch', async () => {
  const { keys, verify } = await tokenFixture();
  // The verifier never parses x5c; A's SPKI stands in for the certificate it would carry.
  const spki = new Uint8Array(await crypto.subtle.exportKey('spki', keys.attacker.publicKey));
  let binary = '';
  for (const byte of spki) binary += String.fromCharCode(byte);
  const calls = await withGlobalFetchSpy(async () => {
    for (const extra of [{ x5u: EVIL_URL }, { x5c: [btoa(binary)] }]) {
      const token = await signedToken(keys.attacker.privateKey, baselineClaims(), {
        ...capabilityHeader('a1'),
        ...extra,
      });
      await assertRefused(verify(token), 'header_not_allowed', Object.keys(extra)[0]);
    }
  });
  assert.deepEqual(calls, []);
});

test('HDR-07 embedded jwk is refused', async () => {
  const { keys, verify } = await tokenFixture();
  const withKid = await signedToken(keys.attacker.privateKey, baselineClaims(), {
    ...capabilityHeader('k1'),
    jwk: keys.attacker.publicJwk,
  });
  await assertRefused(verify(withKid), 'header_not_allowed', 'kid k1');
  const withoutKid = await signedToken(keys.attacker.privateKey, baselineClaims(), {
    alg: 'ES256',
    typ: 'svc-capability+jwt',
    jwk: keys.attacker.publicJwk,
  });
  await assertRefused(verify(withoutKid), 'header_not_allowed', 'kid absent');
});

test('HDR-08 unencoded payload (b64 false, crit b64)', async () => {
  const { keys, verify } = await tokenFixture();
  const header = { ...capabilityHeader('k1'), b64: false, crit: ['b64'] };
  const encodedHeader = encodePart(header);
  // RFC 7797: the payload travels as-is and is signed as-is.
  const json = JSON.stringify(baselineClaims());
  const jsonSignature = await es256Signature(keys.k1.privateKey, `${encodedHeader}.${json}`);
  await assertRefused(
    verify(`${encodedHeader}.${json}.${b64url(jsonSignature)}`),
    'token_malformed',
  );
  // An unencoded payload that happens to use only base64url characters reaches the header check.
  const plain = 'unencodedPayload';
  const plainSignature = await es256Signature(keys.k1.privateKey, `${encodedHeader}.${plain}`);
  await assertRefused(
    verify(`${encodedHeader}.${plain}.${b64url(plainSignature)}`),
    'header_not_allowed',
  );
});

test('HDR-09 control: a published but inactive key (k2) verifies', async () => {
  const { authority, keys, verify } = await tokenFixture();
  assert.equal(authority.signer.kid, 'k1');
  const token = await signCapabilityToken(baselineClaims() as never, {
    kid: 'k2',
    privateKey: keys.k2.privateKey,
  });
  const { identity } = await verify(token);
  assert.equal(identity.serviceId, 'svc-caller');
});
