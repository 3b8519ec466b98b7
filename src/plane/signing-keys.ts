/**
 * The control plane's signing authority: the configured `signingKeys` turned into the signer of
 * new tokens, the published JWKS and a key set to verify the plane's own tokens with.
 *
 * Contract "Signing key entry" and Rotation r1: the first entry signs, position not age decides;
 * every entry is published (public members only); kids are explicit and distinct. Keys are
 * imported once per distinct configuration, never per token or per request.
 *
 * @module
 */
import { OldestFirstMap } from '../core/oldest-first-map.ts';
import { decodeBase64Url, encodeBase64Url } from '../core/base64url.ts';
import {
  type CapabilityKeySet,
  capabilityKeySetFromImported,
  type CapabilityPublicJwk,
  importCapabilityKeys,
  readCapabilityJwks,
} from '../core/capability-key-set.ts';
import type { CapabilitySigner } from '../core/capability-token.ts';
import { refuseUnknownKeys } from '../core/config-values.ts';
import { SvcConfigurationError, SvcInternalError } from '../core/errors.ts';
import { withLazyDeadline } from '../core/settle-within.ts';

/** One configured signing key: an explicit kid and its private P-256 key. */
export interface SigningKeyEntry {
  /** The key id published in the JWKS and put in the header of tokens this key signs. */
  kid: string;
  /** A private P-256 JWK (object or JSON text) or a PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`). */
  secret: string | (JsonWebKey & { kid?: string });
}

/** The `signingKeys` option: a list, or a function of the environment returning one. */
export type SigningKeysOption =
  | readonly SigningKeyEntry[]
  | ((env: unknown) => readonly SigningKeyEntry[] | Promise<readonly SigningKeyEntry[]>);

/** Signing material ready for use. */
export interface SigningAuthority {
  /** Signs every new token (the first entry). */
  signer: CapabilitySigner;
  /** The JWKS to publish: every entry's public key, in configuration order. */
  jwks: { keys: CapabilityPublicJwk[] };
  /** Verifies tokens signed by any configured entry. */
  keySet: CapabilityKeySet;
  /** The configured kids, in order (the first one signs). */
  kids: string[];
}

/** Visible ASCII, at most 128 characters: safe in headers, logs and JSON without escaping. */
const KID_PATTERN = /^[\x21-\x7e]{1,128}$/;
const ES256_IMPORT = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const ES256 = { name: 'ECDSA', hash: 'SHA-256' } as const;
const PKCS8_PEM = /^-----BEGIN PRIVATE KEY-----([A-Za-z0-9+/=\s]+)-----END PRIVATE KEY-----$/;
const MAX_SIGNING_KEYS = 32;

const SIGNING_KEY_ENTRY_FIELDS: readonly string[] = ['kid', 'secret'];
const GENERATE_OPTIONS: readonly string[] = ['kid', 'format'];

function refuse(message: string): never {
  throw new SvcConfigurationError(message, { reason: 'invalid_signing_keys' });
}

function isPlainRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function checkKid(kid: unknown, index: number): string {
  if (typeof kid !== 'string' || kid.length === 0) {
    refuse(`Capability signing key ${index} needs an explicit non-empty string kid`);
  }
  if (!KID_PATTERN.test(kid)) {
    // Not echoed: a kid and secret given the wrong way round would put the private key here.
    refuse(`Capability signing key ${index}: its kid must be 1..128 visible ASCII characters`);
  }
  return kid;
}

/**
 * Checks a signing-key list synchronously (non-empty, explicit distinct kids, secrets of a valid
 * form: a JWK member by member, a PEM as far as its armour, base64 and algorithm),
 * so a control plane with a bad static list refuses to start before serving anything.
 */
export function checkSigningKeyEntries(entries: unknown): SigningKeyEntry[] {
  if (!Array.isArray(entries) || entries.length === 0) {
    refuse('signingKeys must list at least one { kid, secret } entry');
  }
  if (entries.length > MAX_SIGNING_KEYS) {
    refuse(`signingKeys lists more than ${MAX_SIGNING_KEYS} keys`);
  }
  const seen = new Set<string>();
  return entries.map((entry, index) => {
    if (!isPlainRecord(entry)) refuse(`Capability signing key ${index} must be { kid, secret }`);
    refuseUnknownKeys(entry, SIGNING_KEY_ENTRY_FIELDS, `Capability signing key ${index}`, {
      noun: 'field',
      reason: 'invalid_signing_keys',
    });
    const kid = checkKid(entry.kid, index);
    if (seen.has(kid)) refuse(`Duplicate capability signing key id: ${kid}`);
    seen.add(kid);
    const secret = entry.secret;
    if (typeof secret !== 'string' && !isPlainRecord(secret)) {
      refuse(`Capability signing key ${kid}: secret must be a private JWK or a PKCS#8 PEM`);
    }
    checkSecretForm(secret as string | JsonWebKey, kid);
    return { kid, secret: secret as string | JsonWebKey };
  });
}

/** A private P-256 JWK reduced to the members that define the key. */
interface PrivateEcJwk {
  kty: 'EC';
  crv: 'P-256';
  x: string;
  y: string;
  d: string;
}

function requireKeyBytes(value: unknown, member: string, kid: string): string {
  const bytes = typeof value === 'string' ? decodeBase64Url(value) : undefined;
  if (bytes === undefined || bytes.length !== 32) {
    refuse(`Capability signing key ${kid}: "${member}" must be 32 bytes of base64url`);
  }
  return value as string;
}

function checkPrivateJwk(jwk: Record<string, unknown>, kid: string): PrivateEcJwk {
  if (jwk.kty !== 'EC' || jwk.crv !== 'P-256') {
    refuse(`Capability signing key ${kid} must be an EC P-256 key (ES256)`);
  }
  if (jwk.d === undefined) refuse(`Capability signing key ${kid} is a public key: "d" is missing`);
  if (jwk.kid !== undefined && jwk.kid !== kid) {
    refuse(`Capability signing key ${kid}: the JWK's own kid ${JSON.stringify(jwk.kid)} disagrees`);
  }
  if (jwk.alg !== undefined && jwk.alg !== 'ES256') {
    refuse(`Capability signing key ${kid}: the JWK's alg must be ES256`);
  }
  if (jwk.use !== undefined && jwk.use !== 'sig') {
    refuse(`Capability signing key ${kid}: the JWK's use must be sig`);
  }
  return {
    kty: 'EC',
    crv: 'P-256',
    x: requireKeyBytes(jwk.x, 'x', kid),
    y: requireKeyBytes(jwk.y, 'y', kid),
    d: requireKeyBytes(jwk.d, 'd', kid),
  };
}

// The AlgorithmIdentifier of a P-256 EC key inside PKCS#8: id-ecPublicKey, then prime256v1.
const P256_ALGORITHM_DER = [
  0x30,
  0x13,
  0x06,
  0x07,
  0x2a,
  0x86,
  0x48,
  0xce,
  0x3d,
  0x02,
  0x01,
  0x06,
  0x08,
  0x2a,
  0x86,
  0x48,
  0xce,
  0x3d,
  0x03,
  0x01,
  0x07,
];

function containsBytes(haystack: Uint8Array, needle: readonly number[]): boolean {
  outer: for (let i = 0; i + needle.length <= haystack.length; i++) {
    for (let j = 0; j < needle.length; j++) if (haystack[i + j] !== needle[j]) continue outer;
    return true;
  }
  return false;
}

/**
 * The DER body of a PKCS#8 PEM, checked as far as can be without WebCrypto (armour, base64, a
 * P-256 EC algorithm), so a malformed key refuses the plane's construction, not its first token.
 */
function pemDer(pem: string, kid: string): Uint8Array<ArrayBuffer> {
  const match = PKCS8_PEM.exec(pem);
  if (match === null) {
    refuse(
      `Capability signing key ${kid}: expected a PKCS#8 PEM (BEGIN PRIVATE KEY); convert an ` +
        '"EC PRIVATE KEY" with: openssl pkcs8 -topk8 -nocrypt',
    );
  }
  let der: Uint8Array<ArrayBuffer>;
  try {
    const binary = atob(match[1].replace(/\s+/g, ''));
    der = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) der[i] = binary.charCodeAt(i);
  } catch {
    refuse(`Capability signing key ${kid}: the PEM body is not base64`);
  }
  if (!containsBytes(der.subarray(0, 32), P256_ALGORITHM_DER)) {
    refuse(`Capability signing key ${kid}: the PEM is not a P-256 EC private key`);
  }
  return der;
}

async function privateJwkFromPem(pem: string, kid: string): Promise<Record<string, unknown>> {
  const der = pemDer(pem, kid);
  try {
    // Extractable only long enough to read the public coordinates; the key that signs is
    // re-imported non-extractable from the JWK.
    const key = await crypto.subtle.importKey('pkcs8', der, ES256_IMPORT, true, ['sign']);
    return (await crypto.subtle.exportKey('jwk', key)) as Record<string, unknown>;
  } catch {
    refuse(`Capability signing key ${kid}: the PEM is not a P-256 EC private key`);
  }
}

/** JWK JSON text as a JWK object. */
function parsedJwkText(text: string, kid: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    refuse(`Capability signing key ${kid}: secret is neither JWK JSON nor a PKCS#8 PEM`);
  }
  if (!isPlainRecord(parsed)) refuse(`Capability signing key ${kid}: secret JSON is not a JWK`);
  return parsed;
}

/**
 * Checks a secret's form synchronously: a JWK (object or JSON text) fully, member by member; a
 * PEM as far as {@link pemDer} can. What needs WebCrypto (the PEM's key itself, whether `d`
 * belongs to `x`, `y`) is checked on import.
 */
function checkSecretForm(secret: string | JsonWebKey, kid: string): void {
  if (typeof secret !== 'string') {
    checkPrivateJwk(secret as Record<string, unknown>, kid);
    return;
  }
  const text = secret.trim();
  if (text.startsWith('-----BEGIN')) pemDer(text, kid);
  else checkPrivateJwk(parsedJwkText(text, kid), kid);
}

async function privateJwkFromSecret(
  secret: string | JsonWebKey,
  kid: string,
): Promise<PrivateEcJwk> {
  if (typeof secret !== 'string') return checkPrivateJwk(secret as Record<string, unknown>, kid);
  const text = secret.trim();
  if (text.startsWith('-----BEGIN')) {
    return checkPrivateJwk(await privateJwkFromPem(text, kid), kid);
  }
  return checkPrivateJwk(parsedJwkText(text, kid), kid);
}

// A private key whose d does not belong to its x, y would sign tokens nobody can verify.
async function checkKeyPair(kid: string, privateKey: CryptoKey, publicJwk: PrivateEcJwk) {
  const publicKey = await crypto.subtle.importKey(
    'jwk',
    { kty: 'EC', crv: 'P-256', x: publicJwk.x, y: publicJwk.y },
    ES256_IMPORT,
    false,
    ['verify'],
  );
  const probe = new TextEncoder().encode(`svcplane signing key check ${kid}`);
  const signature = await crypto.subtle.sign(ES256, privateKey, probe);
  if (!(await crypto.subtle.verify(ES256, publicKey, signature, probe))) {
    refuse(`Capability signing key ${kid}: "d" does not match the public coordinates`);
  }
}

async function importSigningKey(entry: SigningKeyEntry): Promise<
  CapabilitySigner & {
    publicJwk: CapabilityPublicJwk;
  }
> {
  const jwk = await privateJwkFromSecret(entry.secret, entry.kid);
  let privateKey: CryptoKey;
  try {
    privateKey = await crypto.subtle.importKey('jwk', jwk, ES256_IMPORT, false, ['sign']);
  } catch {
    refuse(`Capability signing key ${entry.kid} is not a valid P-256 private key`);
  }
  await checkKeyPair(entry.kid, privateKey, jwk);
  const publicJwk: CapabilityPublicJwk = Object.freeze({
    kty: 'EC',
    crv: 'P-256',
    x: jwk.x,
    y: jwk.y,
    kid: entry.kid,
    alg: 'ES256',
    use: 'sig',
  });
  return { kid: entry.kid, privateKey, publicJwk };
}

/**
 * Loads the signing keys: validates every entry, imports each key once, and returns the signer
 * (first entry), the public JWKS (every entry; kty, crv, x, y, kid, alg, use only) and a key set.
 * Throws `SvcConfigurationError` for an empty list, a missing, malformed or duplicate kid
 * (`Duplicate capability signing key id: <kid>`), a key that is not a P-256 private key, or a JWK
 * whose own kid disagrees with the entry's.
 */
export async function loadSigningAuthority(
  entries: readonly SigningKeyEntry[],
): Promise<SigningAuthority> {
  const checked = checkSigningKeyEntries(entries);
  const imported = await Promise.all(checked.map(importSigningKey));
  const publicJwks = imported.map((key) => key.publicJwk);
  // Read back as a service would, so the plane never publishes a JWKS its services refuse.
  const keySet = capabilityKeySetFromImported(
    await importCapabilityKeys(readCapabilityJwks({ keys: publicJwks })),
  );
  const first = imported[0];
  return {
    signer: Object.freeze({ kid: first.kid, privateKey: first.privateKey }),
    jwks: Object.freeze({ keys: Object.freeze(publicJwks) as CapabilityPublicJwk[] }),
    keySet,
    kids: checked.map((entry) => entry.kid),
  };
}

const MAX_CACHED_AUTHORITIES = 16;
const authoritiesByContent = new OldestFirstMap<string, Promise<SigningAuthority>>(
  MAX_CACHED_AUTHORITIES,
);

function contentKey(entries: readonly SigningKeyEntry[]): string {
  return JSON.stringify(entries.map((entry) => [entry.kid, entry.secret]));
}

/** Longest wait for a `signingKeys(env)` function's answer; past it the plane fails closed. */
export const SIGNING_KEYS_TIMEOUT_MS = 5000;

/**
 * Resolves the `signingKeys` option for an environment. The authority is cached by the entries'
 * content, so an option computed from `env` on every request imports its keys only the first
 * time a given configuration is seen (and again only after the configuration changes). A
 * function that does not answer within `timeoutMs` fails with 500 `signing_keys_unavailable`.
 */
export async function signingAuthorityFromOption(
  option: SigningKeysOption,
  env: unknown,
  timeoutMs: number = SIGNING_KEYS_TIMEOUT_MS,
): Promise<SigningAuthority> {
  let entries: unknown;
  if (typeof option === 'function') {
    // Like `services(context)`: a function that never settles fails the JWKS route and the
    // mint closed instead of holding them forever.
    entries = await withLazyDeadline(
      () => option(env),
      timeoutMs,
      () =>
        new SvcInternalError(`signingKeys(env) did not settle within ${timeoutMs} ms`, {
          reason: 'signing_keys_unavailable',
        }),
    );
  } else if (Array.isArray(option)) entries = option;
  else refuse('signingKeys must be a list of { kid, secret } or a function of env returning one');
  const checked = checkSigningKeyEntries(entries);
  const key = contentKey(checked);
  let authority = authoritiesByContent.get(key);
  if (authority === undefined) {
    authority = loadSigningAuthority(checked);
    authoritiesByContent.set(key, authority);
    const pending = authority;
    pending.catch(() => {
      if (authoritiesByContent.get(key) === pending) authoritiesByContent.delete(key);
    });
  }
  return authority;
}

/** Options of {@link generateSigningKeyEntry}. */
export interface GenerateSigningKeyOptions {
  /** The kid to use; defaults to `k-<yyyymmdd>-<random>`. */
  kid?: string;
  /** `jwk` (default): secret is private JWK JSON text. `pem`: secret is a PKCS#8 PEM. */
  format?: 'jwk' | 'pem';
}

function defaultKid(): string {
  const day = new Date().toISOString().slice(0, 10).replaceAll('-', '');
  const random = encodeBase64Url(crypto.getRandomValues(new Uint8Array(6)));
  return `k-${day}-${random}`;
}

function pemFromPkcs8(der: ArrayBuffer): string {
  let binary = '';
  for (const byte of new Uint8Array(der)) binary += String.fromCharCode(byte);
  const lines = btoa(binary).match(/.{1,64}/g) ?? [];
  return ['-----BEGIN PRIVATE KEY-----', ...lines, '-----END PRIVATE KEY-----'].join('\n');
}

/**
 * Generates a fresh P-256 signing key as a ready `signingKeys` entry. Rejects with
 * `SvcConfigurationError` for an unknown option, a `format` other than `jwk` or `pem`, or an
 * invalid `kid`.
 */
export async function generateSigningKeyEntry(
  options: GenerateSigningKeyOptions = {},
): Promise<SigningKeyEntry & { secret: string }> {
  if (!isPlainRecord(options)) refuse('generateSigningKeyEntry: options must be an object');
  refuseUnknownKeys(options, GENERATE_OPTIONS, 'generateSigningKeyEntry', {
    reason: 'invalid_signing_keys',
  });
  if (options.format !== undefined && options.format !== 'jwk' && options.format !== 'pem') {
    refuse("generateSigningKeyEntry: `format` must be 'jwk' or 'pem'");
  }
  const kid = checkKid(options.kid ?? defaultKid(), 0);
  const pair = await crypto.subtle.generateKey(ES256_IMPORT, true, ['sign', 'verify']);
  if (options.format === 'pem') {
    return { kid, secret: pemFromPkcs8(await crypto.subtle.exportKey('pkcs8', pair.privateKey)) };
  }
  const jwk = await crypto.subtle.exportKey('jwk', pair.privateKey);
  const secret = JSON.stringify({ kty: 'EC', crv: 'P-256', kid, x: jwk.x, y: jwk.y, d: jwk.d });
  return { kid, secret };
}
