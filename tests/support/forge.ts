/**
 * Builders for arbitrary compact JWS, for the token security tests: raw header and payload text,
 * chosen signature bytes, signatures by any key and algorithm. Nothing here validates anything;
 * the point is to produce exactly the bytes a hostile caller would send.
 */
import { CAPABILITY_TOKEN_TYP } from '../../src/core/capability-token.ts';

/** Fixture issuer (ISS) and plane service id (PLANE_ID) of the security checklist. */
export const TEST_ISSUER = 'https://plane.test';
export const PLANE_ID = 'svc-plane';

const encoder = new TextEncoder();

/** Unpadded base64url of bytes or of a string's UTF-8 bytes. */
export function b64url(input: Uint8Array | string): string {
  const bytes = typeof input === 'string' ? encoder.encode(input) : input;
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** Bytes from base64url. */
export function fromB64url(text: string): Uint8Array<ArrayBuffer> {
  const binary = atob(text.replace(/-/g, '+').replace(/_/g, '/'));
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/**
 * A header or payload part: an object or value (serialised with JSON.stringify), `{ raw }`
 * (exact JSON text, e.g. with duplicate members) or `{ bytes }` (exact bytes, e.g. invalid UTF-8).
 */
export type JwsPart = { raw: string } | { bytes: Uint8Array } | unknown;

/** Encodes one part as a base64url segment. */
export function encodePart(part: JwsPart): string {
  if (part !== null && typeof part === 'object') {
    if ('raw' in part && typeof part.raw === 'string') return b64url(part.raw);
    if ('bytes' in part && part.bytes instanceof Uint8Array) return b64url(part.bytes);
  }
  return b64url(JSON.stringify(part));
}

/** The header of a real plane token: `{ alg: 'ES256', kid, typ }`. */
export function capabilityHeader(kid = 'k1'): Record<string, unknown> {
  return { alg: 'ES256', kid, typ: CAPABILITY_TOKEN_TYP };
}

/** Current harness time in seconds. */
export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

/** The baseline claim set B (plain service token from svc-caller to svc-a). */
export function baselineClaims(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const now = nowSeconds();
  return {
    iss: TEST_ISSUER,
    sub: 'svc-caller',
    aud: 'svc-a',
    scp: ['svc-a.read'],
    spa: 'service',
    jti: crypto.randomUUID(),
    iat: now - 5,
    nbf: now - 5,
    exp: now + 120,
    ...overrides,
  };
}

/** B with the named claims removed. */
export function claimsWithout(...names: string[]): Record<string, unknown> {
  const claims = baselineClaims();
  for (const name of names) delete claims[name];
  return claims;
}

/** Raw 64-byte R‖S ES256 signature of `input` with a P-256 private key. */
export async function es256Signature(
  key: CryptoKey,
  input: string,
): Promise<Uint8Array<ArrayBuffer>> {
  const signature = await crypto.subtle.sign(
    { name: 'ECDSA', hash: 'SHA-256' },
    key,
    encoder.encode(input),
  );
  return new Uint8Array(signature);
}

/** How a forged token is signed. */
export type ForgedSignature =
  | { key: CryptoKey } // ES256 over the signing input
  | { bytes: Uint8Array } // exactly these signature bytes
  | { segment: string }; // exactly this third segment (may be empty)

/** Builds `header.payload.signature` from arbitrary parts. */
export async function forgeToken(options: {
  header?: JwsPart;
  payload?: JwsPart;
  signature: ForgedSignature;
}): Promise<string> {
  const signingInput = `${encodePart(options.header ?? capabilityHeader())}.${
    encodePart(options.payload ?? baselineClaims())
  }`;
  const signature = options.signature;
  if ('segment' in signature) return `${signingInput}.${signature.segment}`;
  if ('bytes' in signature) return `${signingInput}.${b64url(signature.bytes)}`;
  return `${signingInput}.${b64url(await es256Signature(signature.key, signingInput))}`;
}

/** A correctly signed capability-shaped token with the given header and claims. */
export function signedToken(
  key: CryptoKey,
  payload: JwsPart = baselineClaims(),
  header: JwsPart = capabilityHeader(),
): Promise<string> {
  return forgeToken({ header, payload, signature: { key } });
}

/** Replaces the payload segment of a token, keeping its header and signature. */
export function withPayload(token: string, payload: JwsPart): string {
  const [header, , signature] = token.split('.');
  return `${header}.${encodePart(payload)}.${signature}`;
}

/** Decodes the JSON of a token segment (0 = header, 1 = payload). */
export function decodeSegment(token: string, index: 0 | 1): Record<string, unknown> {
  return JSON.parse(new TextDecoder().decode(fromB64url(token.split('.')[index])));
}

// ---------------------------------------------------------------------------------------------
// Signature bytes

/** P-256 group order n. */
export const P256_N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
/** P-256 field prime p. */
export const P256_P = 0xffffffff00000001000000000000000000000000ffffffffffffffffffffffffn;

/** Big-endian bytes of a non-negative integer, left-padded to `size`. */
export function integerBytes(value: bigint, size: number): Uint8Array {
  const bytes = new Uint8Array(size);
  let rest = value;
  for (let i = size - 1; i >= 0; i--) {
    bytes[i] = Number(rest & 0xffn);
    rest >>= 8n;
  }
  if (rest !== 0n) throw new Error(`integer does not fit in ${size} bytes`);
  return bytes;
}

/** An R‖S signature from chosen scalars, each encoded in `size` bytes. */
export function rawSignature(r: bigint, s: bigint, size = 32): Uint8Array {
  const bytes = new Uint8Array(size * 2);
  bytes.set(integerBytes(r, size), 0);
  bytes.set(integerBytes(s, size), size);
  return bytes;
}

/** The integer value of big-endian bytes. */
export function bytesInteger(bytes: Uint8Array): bigint {
  let value = 0n;
  for (const byte of bytes) value = (value << 8n) | BigInt(byte);
  return value;
}

function derInteger(bytes: Uint8Array): number[] {
  let start = 0;
  while (start < bytes.length - 1 && bytes[start] === 0) start++;
  const body = [...bytes.subarray(start)];
  if (body[0] & 0x80) body.unshift(0);
  return [0x02, body.length, ...body];
}

/** Re-encodes a raw R‖S signature as ASN.1 DER `SEQUENCE { INTEGER r, INTEGER s }`. */
export function derFromRawSignature(raw: Uint8Array): Uint8Array {
  const half = raw.length / 2;
  const content = [...derInteger(raw.subarray(0, half)), ...derInteger(raw.subarray(half))];
  return new Uint8Array([0x30, content.length, ...content]);
}

// ---------------------------------------------------------------------------------------------
// Other algorithms, for algorithm-confusion cases

/** HMAC-SHA256 of `input` keyed by `secret` (the HS256 confusion attack). */
export async function hs256Signature(
  secret: Uint8Array | string,
  input: string,
): Promise<Uint8Array> {
  const keyBytes = typeof secret === 'string' ? encoder.encode(secret) : secret;
  const key = await crypto.subtle.importKey(
    'raw',
    new Uint8Array(keyBytes),
    { name: 'HMAC', hash: 'SHA-256' },
    false,
    ['sign'],
  );
  return new Uint8Array(await crypto.subtle.sign('HMAC', key, encoder.encode(input)));
}

interface ForeignAlgorithm {
  generate: RsaHashedKeyGenParams | EcKeyGenParams | { name: string };
  sign: AlgorithmIdentifier | EcdsaParams | RsaPssParams;
}

const FOREIGN_ALGORITHMS: Record<string, ForeignAlgorithm> = {
  ES384: {
    generate: { name: 'ECDSA', namedCurve: 'P-384' },
    sign: { name: 'ECDSA', hash: 'SHA-384' },
  },
  ES512: {
    generate: { name: 'ECDSA', namedCurve: 'P-521' },
    sign: { name: 'ECDSA', hash: 'SHA-512' },
  },
  RS256: {
    generate: {
      name: 'RSASSA-PKCS1-v1_5',
      modulusLength: 2048,
      publicExponent: new Uint8Array([1, 0, 1]),
      hash: 'SHA-256',
    },
    sign: { name: 'RSASSA-PKCS1-v1_5' },
  },
  PS256: {
    generate: {
      name: 'RSA-PSS',
      modulusLength: 2048,
      publicExponent: new Uint8Array([1, 0, 1]),
      hash: 'SHA-256',
    },
    sign: { name: 'RSA-PSS', saltLength: 32 },
  },
  EdDSA: { generate: { name: 'Ed25519' }, sign: { name: 'Ed25519' } },
};

/**
 * A signature by a freshly generated attacker key of another JOSE algorithm. Returns random
 * bytes of a plausible length when the runtime cannot generate that key type; the verifier must
 * refuse on `alg` before it ever looks at them.
 */
export async function foreignSignature(alg: keyof typeof FOREIGN_ALGORITHMS, input: string) {
  const algorithm = FOREIGN_ALGORITHMS[alg];
  try {
    const pair = await crypto.subtle.generateKey(algorithm.generate, false, [
      'sign',
      'verify',
    ]) as CryptoKeyPair;
    return new Uint8Array(
      await crypto.subtle.sign(algorithm.sign, pair.privateKey, encoder.encode(input)),
    );
  } catch {
    return crypto.getRandomValues(new Uint8Array(alg.startsWith('ES') ? 132 : 256));
  }
}

/** PEM (SPKI) text of a public key. */
export async function spkiPem(publicKey: CryptoKey): Promise<string> {
  const der = new Uint8Array(await crypto.subtle.exportKey('spki', publicKey));
  let binary = '';
  for (const byte of der) binary += String.fromCharCode(byte);
  const lines = btoa(binary).match(/.{1,64}/g) ?? [];
  return ['-----BEGIN PUBLIC KEY-----', ...lines, '-----END PUBLIC KEY-----', ''].join('\n');
}

let unsignedTokens = 0;

/**
 * A compact-JWS-shaped token for `svc-caller` at `svc-a` with scope `svc-a.read` (each claim
 * overridable), signed by nobody: for the token requesters, which read a token's audience,
 * caller, scopes and lifetime but never verify it.
 */
export function unsignedRequesterToken(claims: Record<string, unknown> = {}): string {
  const header = b64url(JSON.stringify({ alg: 'ES256', typ: 'svc-capability+jwt' }));
  const payload = {
    jti: `u${++unsignedTokens}`,
    aud: 'svc-a',
    sub: 'svc-caller',
    scp: ['svc-a.read'],
    ...claims,
  };
  return `${header}.${b64url(JSON.stringify(payload))}.c2ln`;
}
