/**
 * Fresh P-256 keys for each test run (security checklist §1.2): plane signing keys `k1` and
 * `k2`, the attacker key `A` (never published) and the JWK client key `K1` of client `jc1`
 * (kid `jk1`). Nothing is fixed in the repository, so no test can pass because of a known key.
 */
import type { CapabilityPublicJwk } from '../../src/core/capability-key-set.ts';
import type { SigningKeyEntry } from '../../src/plane/signing-keys.ts';

/** One generated key pair with every form a test needs. */
export interface TestKey {
  kid: string;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  /** Private JWK (with d and kid): the `secret` of a signing-key entry. */
  privateJwk: JsonWebKey & { kid: string };
  /** Public members only, as the plane publishes them. */
  publicJwk: CapabilityPublicJwk;
  /** A `signingKeys` entry for this key. */
  entry: SigningKeyEntry;
}

/** The keys of one test run. */
export interface TestKeys {
  k1: TestKey;
  k2: TestKey;
  /** Attacker key A: never published anywhere. */
  attacker: TestKey;
  /** The JWK client jc1's key K1. */
  client: TestKey;
}

async function generateTestKey(kid: string): Promise<TestKey> {
  const pair = await crypto.subtle.generateKey(
    { name: 'ECDSA', namedCurve: 'P-256' },
    true,
    ['sign', 'verify'],
  ) as CryptoKeyPair;
  const exported = await crypto.subtle.exportKey('jwk', pair.privateKey);
  const privateJwk = { kty: 'EC', crv: 'P-256', x: exported.x, y: exported.y, d: exported.d, kid };
  return {
    kid,
    privateKey: pair.privateKey,
    publicKey: pair.publicKey,
    privateJwk,
    publicJwk: {
      kty: 'EC',
      crv: 'P-256',
      x: exported.x!,
      y: exported.y!,
      kid,
      alg: 'ES256',
      use: 'sig',
    },
    entry: { kid, secret: JSON.stringify(privateJwk) },
  };
}

let generated: Promise<TestKeys> | undefined;

/** The keys of this run (generated once per test file). */
export function testKeys(): Promise<TestKeys> {
  generated ??= (async () => ({
    k1: await generateTestKey('k1'),
    k2: await generateTestKey('k2'),
    attacker: await generateTestKey('a1'),
    client: await generateTestKey('jk1'),
  }))();
  return generated;
}
