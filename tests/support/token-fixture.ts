/**
 * The verifier-level fixture of the token security tests: a plane signing authority over `k1`,
 * `k2` (k1 signs), a service key set built from the JWKS the authority publishes (serialised as
 * it travels), and an assertion for refusals.
 */
import assert from 'node:assert/strict';
import {
  type CapabilityKeySet,
  capabilityKeySetFromJwks,
} from '../../src/core/capability-key-set.ts';
import {
  type VerifiedCapabilityToken,
  verifyCapabilityToken,
  type VerifyCapabilityTokenOptions,
} from '../../src/core/capability-token.ts';
import { CapabilityAuthError } from '../../src/core/errors.ts';
import { loadSigningAuthority, type SigningAuthority } from '../../src/plane/signing-keys.ts';
import { TEST_ISSUER } from './forge.ts';
import { type TestKeys, testKeys } from './keys.ts';

/** Everything a verifier-level token test needs. */
export interface TokenFixture {
  keys: TestKeys;
  /** The plane's signing authority configured `[k1, k2]`. */
  authority: SigningAuthority;
  /** The service's key set, built from the published JWKS. */
  keySet: CapabilityKeySet;
  /** Verifies as svc-a (issuer ISS, audience svc-a) unless options say otherwise. */
  verify(
    token: unknown,
    options?: Partial<VerifyCapabilityTokenOptions>,
  ): Promise<VerifiedCapabilityToken>;
}

let fixture: Promise<TokenFixture> | undefined;

/** The fixture of this test file (built once). */
export function tokenFixture(): Promise<TokenFixture> {
  fixture ??= (async () => {
    const keys = await testKeys();
    const authority = await loadSigningAuthority([keys.k1.entry, keys.k2.entry]);
    const keySet = await capabilityKeySetFromJwks(JSON.parse(JSON.stringify(authority.jwks)));
    return {
      keys,
      authority,
      keySet,
      verify: (token, options = {}) =>
        verifyCapabilityToken(token, {
          keys: keySet,
          issuer: TEST_ISSUER,
          audience: 'svc-a',
          ...options,
        }),
    };
  })();
  return fixture;
}

/** Asserts a 401 `CapabilityAuthError` refusal with the given reason. */
export async function assertRefused(
  verification: Promise<unknown>,
  reason: string,
  label = reason,
): Promise<CapabilityAuthError> {
  let caught: unknown;
  await assert.rejects(verification, (error: unknown) => {
    caught = error;
    return true;
  }, `expected a refusal (${label})`);
  assert.ok(
    caught instanceof CapabilityAuthError,
    `${label}: expected CapabilityAuthError, got ${String(caught)}`,
  );
  assert.equal(caught.code, 'capability_auth', label);
  assert.equal(caught.status, 401, label);
  assert.equal(caught.retryable, false, label);
  assert.equal(caught.reason, reason, `${label}: ${caught.message}`);
  return caught;
}
