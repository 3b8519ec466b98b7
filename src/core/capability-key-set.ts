/**
 * Capability verification keys: reading a JWKS, importing its ES256 public keys once, and the
 * key-set interface the token verifier selects keys from by `kid`.
 *
 * @module
 */
import { calculateJwkThumbprint } from 'jose';
import { decodeBase64Url } from './base64url.ts';
import { SvcConfigurationError } from './errors.ts';

/**
 * Where the verifier finds public keys. `getKey` selects exactly one key by `kid`; the verifier
 * never tries other keys. It may reject (for instance when a remote JWKS cannot be fetched).
 */
export interface CapabilityKeySet {
  /** The ES256 verification key published under `kid`, or `undefined` when none is. */
  getKey(kid: string): Promise<CryptoKey | undefined>;
  /**
   * What `getKey(kid)` would answer, when the set can tell without waiting (its keys are in hand
   * and current); `undefined` otherwise, and then the verifier asks `getKey`. Optional: it lets a
   * session check its token again on every call without a promise per call.
   */
  currentKey?(kid: string): CryptoKey | undefined;
}

/** A published capability verification key: the public members of a P-256 JWK. */
export interface CapabilityPublicJwk {
  /** Key type: always `EC`. */
  kty: 'EC';
  /** Curve: always `P-256`. */
  crv: 'P-256';
  /** Public x coordinate, base64url (32 bytes). */
  x: string;
  /** Public y coordinate, base64url (32 bytes). */
  y: string;
  /** The key id tokens name in their header. */
  kid: string;
  /** `ES256` when present. */
  alg?: 'ES256';
  /** `sig` when present. */
  use?: 'sig';
}

/** Imported verification keys by kid, with the coordinates they were imported from. */
export type ImportedCapabilityKeys = ReadonlyMap<
  string,
  { readonly x: string; readonly y: string; readonly key: CryptoKey }
>;

/** Largest number of keys accepted in one JWKS. */
export const MAX_CAPABILITY_JWKS_KEYS = 100;

// Members that only a private or symmetric key carries (RFC 7518 §6.2.2, §6.3.2, §6.4.1).
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

const ES256_IMPORT = { name: 'ECDSA', namedCurve: 'P-256' } as const;

/** Receives the reason a JWKS is unusable; must throw. */
export type JwksProblemHandler = (problem: string) => never;

const refuseConfiguration: JwksProblemHandler = (problem) => {
  throw new SvcConfigurationError(`Capability JWKS refused: ${problem}`, {
    reason: 'invalid_jwks',
  });
};

function isPlainRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

// A key that declares another purpose can never verify a capability token; it is left out
// instead of failing the whole set, which may legitimately serve other consumers too.
function declaresEs256Signing(jwk: Record<string, unknown>): boolean {
  if (jwk.kty !== 'EC' || jwk.crv !== 'P-256') return false;
  if (jwk.use !== undefined && jwk.use !== 'sig') return false;
  if (jwk.alg !== undefined && jwk.alg !== 'ES256') return false;
  if (jwk.key_ops !== undefined) {
    if (!Array.isArray(jwk.key_ops) || !jwk.key_ops.includes('verify')) return false;
  }
  return true;
}

function requireCoordinate(value: unknown, label: string, fail: JwksProblemHandler): bigint {
  const bytes = typeof value === 'string' ? decodeBase64Url(value) : undefined;
  if (bytes === undefined || bytes.length !== 32) {
    fail(`${label} must be a 32-byte base64url coordinate`);
  }
  let integer = 0n;
  for (const byte of bytes) integer = (integer << 8n) | BigInt(byte);
  return integer;
}

// P-256 domain parameters (SEC 2 §2.4.2 / FIPS 186-4 D.1.2.3).
const P256_P = 0xffffffff00000001000000000000000000000000ffffffffffffffffffffffffn;
const P256_B = 0x5ac635d8aa3a93e7b3ebbd55769886bc651d06b0cc53b0f63bce3c3e27d2604bn;

/**
 * Whether (x, y) satisfies y² = x³ − 3x + b over the P-256 field. Checked here because not
 * every runtime's WebCrypto refuses an off-curve public key at import.
 */
export function isP256Point(x: bigint, y: bigint): boolean {
  if (x >= P256_P || y >= P256_P) return false;
  const left = (y * y) % P256_P;
  const right = (((x * x - 3n) * x + P256_B) % P256_P + P256_P) % P256_P;
  return left === right;
}

/**
 * Reads a JWKS (`{ keys: [...] }`) synchronously and returns its ES256 verification keys.
 *
 * Refused (through `fail`, by default a `SvcConfigurationError`): a value that is not a JWKS; any
 * key carrying private or symmetric material; two keys with the same kid; an ES256 key without a
 * non-empty string kid or with malformed coordinates. Keys of another type, curve, `use` or
 * `alg` are left out.
 */
export function readCapabilityJwks(
  jwks: unknown,
  fail: JwksProblemHandler = refuseConfiguration,
): CapabilityPublicJwk[] {
  if (!isPlainRecord(jwks) || !Array.isArray(jwks.keys)) fail('expected an object { keys: [...] }');
  const entries = jwks.keys as unknown[];
  if (entries.length > MAX_CAPABILITY_JWKS_KEYS) {
    fail(`more than ${MAX_CAPABILITY_JWKS_KEYS} keys`);
  }
  const seenKids = new Set<string>();
  const accepted: CapabilityPublicJwk[] = [];
  entries.forEach((entry, index) => {
    const label = `key ${index}`;
    if (!isPlainRecord(entry)) fail(`${label} is not a JWK object`);
    for (const member of PRIVATE_MEMBERS) {
      if (Object.hasOwn(entry, member)) fail(`${label} carries private key material ("${member}")`);
    }
    if (typeof entry.kid === 'string') {
      if (seenKids.has(entry.kid)) fail(`duplicate key id ${JSON.stringify(entry.kid)}`);
      seenKids.add(entry.kid);
    }
    if (!declaresEs256Signing(entry)) return;
    if (typeof entry.kid !== 'string' || entry.kid.length === 0) {
      fail(`${label} needs a non-empty string "kid"`);
    }
    const x = requireCoordinate(entry.x, `${label} "x"`, fail);
    const y = requireCoordinate(entry.y, `${label} "y"`, fail);
    if (!isP256Point(x, y)) fail(`${label} is not a point on the P-256 curve`);
    const jwk: CapabilityPublicJwk = {
      kty: 'EC',
      crv: 'P-256',
      x: entry.x as string,
      y: entry.y as string,
      kid: entry.kid,
    };
    if (entry.alg !== undefined) jwk.alg = 'ES256';
    if (entry.use !== undefined) jwk.use = 'sig';
    accepted.push(jwk);
  });
  return accepted;
}

/**
 * Imports verification keys once. A key whose kid and coordinates match an entry of `previous`
 * keeps that entry's `CryptoKey`, so verified-token caches keyed on the key object survive a
 * JWKS refresh that did not change the key.
 */
export async function importCapabilityKeys(
  jwks: readonly CapabilityPublicJwk[],
  previous?: ImportedCapabilityKeys,
  fail: JwksProblemHandler = refuseConfiguration,
): Promise<ImportedCapabilityKeys> {
  const imported = new Map<string, { x: string; y: string; key: CryptoKey }>();
  await Promise.all(jwks.map(async (jwk) => {
    const known = previous?.get(jwk.kid);
    if (known !== undefined && known.x === jwk.x && known.y === jwk.y) {
      imported.set(jwk.kid, known);
      return;
    }
    let key: CryptoKey;
    try {
      key = await crypto.subtle.importKey(
        'jwk',
        { kty: 'EC', crv: 'P-256', x: jwk.x, y: jwk.y },
        ES256_IMPORT,
        false,
        ['verify'],
      );
    } catch {
      fail(`key ${JSON.stringify(jwk.kid)} is not a valid P-256 public key`);
    }
    imported.set(jwk.kid, { x: jwk.x, y: jwk.y, key });
  }));
  return imported;
}

/** A key set over keys already imported; `getKey` is a map lookup. */
export function capabilityKeySetFromImported(keys: ImportedCapabilityKeys): CapabilityKeySet {
  return {
    getKey(kid: string): Promise<CryptoKey | undefined> {
      return Promise.resolve(typeof kid === 'string' ? keys.get(kid)?.key : undefined);
    },
    currentKey: (kid: string) => typeof kid === 'string' ? keys.get(kid)?.key : undefined,
  };
}

/**
 * Builds a key set from a JWKS, importing each ES256 public key once. Throws
 * `SvcConfigurationError` for a JWKS {@link readCapabilityJwks} refuses or a key that does not
 * import.
 */
export async function capabilityKeySetFromJwks(jwks: unknown): Promise<CapabilityKeySet> {
  return capabilityKeySetFromImported(await importCapabilityKeys(readCapabilityJwks(jwks)));
}

/**
 * RFC 7638 SHA-256 thumbprint (base64url) of an EC JWK: the hash of the required members `crv`,
 * `kty`, `x`, `y` in lexicographic order without whitespace. Other members (kid, alg, d) do not
 * change it.
 */
export async function capabilityKeyThumbprint(jwk: unknown): Promise<string> {
  if (
    !isPlainRecord(jwk) || jwk.kty !== 'EC' || typeof jwk.crv !== 'string' ||
    typeof jwk.x !== 'string' || typeof jwk.y !== 'string'
  ) {
    throw new SvcConfigurationError('A key thumbprint needs an EC JWK with crv, x and y', {
      reason: 'invalid_jwk',
    });
  }
  return calculateJwkThumbprint({ kty: 'EC', crv: jwk.crv, x: jwk.x, y: jwk.y }, 'sha256');
}
