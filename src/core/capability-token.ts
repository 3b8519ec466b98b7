/**
 * Capability tokens: ES256 compact JWS signed by the control plane and verified by services.
 *
 * Signing and verification call WebCrypto directly (ECDSA P-256 / SHA-256 yields the 64-byte
 * R‖S form JWS uses), with keys imported once, because both sit on the hot path of every call.
 * The verifier is deliberately narrow: one algorithm, one `typ`, three header members, the key
 * chosen by `kid` alone, and a closed claim set. Each refusal is a `CapabilityAuthError` (401)
 * whose `reason` names the check that failed.
 *
 * @module
 */
import {
  decodeCheckedBase64Url,
  encodeBase64Url,
  encodeBase64UrlText,
  hasCanonicalBase64UrlEnding,
  writeBase64UrlUnits,
} from './base64url.ts';
import type { CapabilityKeySet } from './capability-key-set.ts';
import { refuseUnknownKeys } from './config-values.ts';
import {
  CapabilityAuthError,
  hasSvcErrorShape,
  SvcConfigurationError,
  SvcInternalError,
} from './errors.ts';
import type { VerifiedIdentity } from './identity.ts';
import {
  type CapabilityTokenClaims,
  freezeCapabilityClaims,
  identityFromClaims,
  readCapabilityClaims,
  sameClaimsBeforeJti,
  writeClaimsJsonFromJti,
  writeClaimsJsonToJti,
} from './token-claims.ts';
import { verifiedTokenCacheFor } from './verified-token-cache.ts';

export {
  type CapabilityKeySet,
  capabilityKeySetFromImported,
  capabilityKeySetFromJwks,
  capabilityKeyThumbprint,
  type CapabilityPublicJwk,
  importCapabilityKeys,
  readCapabilityJwks,
} from './capability-key-set.ts';
export {
  type CapabilityTokenClaims,
  identityFromClaims,
  MAX_PRINCIPAL_KIND_LENGTH,
  readCapabilityClaims,
} from './token-claims.ts';

/** The explicit `typ` header of every capability token (RFC 8725 §3.11). */
export const CAPABILITY_TOKEN_TYP = 'svc-capability+jwt';
/** Clock skew tolerated on `exp`, `nbf` and `iat`, in seconds. */
export const CAPABILITY_TOKEN_CLOCK_SKEW_SECONDS = 30;
/** Tokens longer than this are refused before any parsing (`token_too_large`). */
export const MAX_CAPABILITY_TOKEN_BYTES = 8192;

/** The key that signs new tokens, and the kid its public half is published under. */
export interface CapabilitySigner {
  kid: string;
  privateKey: CryptoKey;
}

/** The outcome of a successful verification. */
export interface VerifiedCapabilityToken {
  /** The identity for handlers; never carries `confirmation` (added after a verified proof). */
  identity: VerifiedIdentity;
  /** The verified claims (closed set only, frozen). */
  claims: CapabilityTokenClaims;
  /** `cnf.jkt` when the token is sender-constrained: a proof must be checked against it. */
  confirmationJkt?: string;
}

/** Options of {@link verifyCapabilityToken}. */
export interface VerifyCapabilityTokenOptions {
  /** Where verification keys come from (selected by the token's kid). */
  keys: CapabilityKeySet;
  /** The expected `iss`, matched exactly. */
  issuer: string;
  /** The expected `aud` (this service's id), matched exactly. */
  audience: string;
  /** Current time in milliseconds; defaults to `Date.now`. */
  now?: () => number;
}

const ES256 = { name: 'ECDSA', hash: 'SHA-256' } as const;
const ES256_SIGNATURE_BYTES = 64;
const ALLOWED_HEADER_MEMBERS = new Set(['alg', 'kid', 'typ']);

// Three non-empty segments over the base64url alphabet; anything else is not a compact JWS.
const COMPACT_JWS_PATTERN = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

const asciiEncoder = new TextEncoder();
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });
const asciiDecoder = new TextDecoder();

function refuse(reason: string, message: string): never {
  throw new CapabilityAuthError(message, { status: 401, reason });
}

// ---------------------------------------------------------------------------------------------
// Signing

// The header is the same for every token of one signer: its base64url segment and the dot after
// it are encoded once, as the ASCII bytes each signing input starts with.
interface EncodedHeader {
  kid: string;
  bytes: Uint8Array;
  /** Where in the scratch the input starts: 0 or 1, so the payload segment starts on a unit. */
  start: number;
}
const encodedHeaders = new WeakMap<CapabilitySigner, EncodedHeader>();

function signingInputPrefix(signer: CapabilitySigner): EncodedHeader {
  const known = encodedHeaders.get(signer);
  if (known !== undefined && known.kid === signer.kid) return known;
  checkSigner(signer);
  const header = encodeBase64UrlText(
    JSON.stringify({ alg: 'ES256', kid: signer.kid, typ: CAPABILITY_TOKEN_TYP }),
  );
  const bytes = asciiEncoder.encode(`${header}.`);
  const encoded = { kid: signer.kid, bytes, start: bytes.length % 2 };
  encodedHeaders.set(signer, encoded);
  return encoded;
}

function base64UrlLength(byteLength: number): number {
  return Math.ceil((byteLength * 4) / 3);
}

// Space the signature segment and its dot take in every token.
const SIGNATURE_SEGMENT_LENGTH = 1 + base64UrlLength(ES256_SIGNATURE_BYTES);
// The most claims JSON any token has room for (with an empty header): longer UTF-8 cannot fit
// whatever it contains.
const MAX_PAYLOAD_JSON_BYTES = Math.floor(
  ((MAX_CAPABILITY_TOKEN_BYTES - SIGNATURE_SEGMENT_LENGTH) * 3) / 4,
);

// Scratch space for one signing input at a time. Each mint writes it and hands it to
// `subtle.sign` with no await in between, and WebCrypto copies the data before `sign` returns
// (it "gets a copy of the bytes" as its first step), so concurrent mints never see each other's
// bytes. Two fixed buffers instead of two fresh ones per token: typed arrays of a few hundred
// bytes are allocated outside the heap on some runtimes and cost more than the encoding itself.
// The input's base64url is written two characters per 16-bit unit; one spare unit at the end
// takes the byte an odd-length encoding writes past itself.
const payloadScratch = new Uint8Array(MAX_PAYLOAD_JSON_BYTES);
const signingInputUnits = new Uint16Array(MAX_CAPABILITY_TOKEN_BYTES / 2 + 2);
const signingInputScratch = new Uint8Array(signingInputUnits.buffer);
// The header bytes the scratch starts with now: a signer's next token skips writing them again.
let lastHeader: Uint8Array | undefined;

/**
 * What the scratch holds from the last token signed, up to `jti`: the claims that decided those
 * bytes, where they end, and how many of them are already encoded (a multiple of three bytes, so
 * the encoding of what follows starts on a whole group). A caller's tokens for one target within
 * a second differ only in `jti`, so a mint whose header and other claims match writes and encodes
 * only the token id.
 */
interface WrittenToJti {
  header: Uint8Array;
  claims: CapabilityTokenClaims;
  /** Payload bytes up to and including the name of `jti`. */
  jsonEnd: number;
  /** Payload bytes whose base64url the scratch holds: `jsonEnd` rounded down to three. */
  encodedBytes: number;
}
let writtenToJti: WrittenToJti | undefined;

function holdsJsonToJti(header: Uint8Array, claims: CapabilityTokenClaims): boolean {
  const held = writtenToJti;
  return held !== undefined && held.header === header && sameClaimsBeforeJti(held.claims, claims);
}

function tooLarge(): never {
  throw new SvcConfigurationError(
    `Refusing to sign a capability token larger than ${MAX_CAPABILITY_TOKEN_BYTES} bytes`,
    { reason: 'invalid_claims' },
  );
}

function refuseMalformedClaims(problem: string): never {
  throw new SvcConfigurationError(`Refusing to sign a malformed capability token: ${problem}`, {
    reason: 'invalid_claims',
  });
}

function checkSigner(signer: CapabilitySigner): void {
  if (signer === null || typeof signer !== 'object') {
    throw new SvcConfigurationError('A capability signer { kid, privateKey } is required');
  }
  if (typeof signer.kid !== 'string' || signer.kid.length === 0) {
    throw new SvcConfigurationError('A capability signer needs a non-empty string kid');
  }
  const key = signer.privateKey as CryptoKey | undefined;
  const algorithm = key?.algorithm as EcKeyAlgorithm | undefined;
  if (
    key?.type !== 'private' || algorithm?.name !== 'ECDSA' || algorithm.namedCurve !== 'P-256' ||
    !key.usages.includes('sign')
  ) {
    throw new SvcConfigurationError(
      `Capability signing key ${JSON.stringify(signer.kid)} must be a P-256 ECDSA private key ` +
        'usable for signing',
    );
  }
}

/**
 * Signs a capability token: header `{ alg: 'ES256', kid, typ }` and the closed claim set.
 *
 * The claims go through the verifier's own shape rules first (plain tokens carry no spk/spo,
 * delegated tokens are never spa `service`, spk is 1..512 characters, every type as the verifier
 * requires), so the issuer can never mint a token a service would refuse as malformed; a
 * violation throws `SvcConfigurationError`. Members outside the closed set are not signed.
 */
export function signCapabilityToken(
  claims: CapabilityTokenClaims,
  signer: CapabilitySigner,
): Promise<string> {
  // Not an async function: the signature is the one thing to wait for, and an async frame
  // around it would cost every token a promise and a suspended frame more.
  let started: StartedCapabilitySignature;
  try {
    started = startCapabilitySignature(claims, signer);
  } catch (error) {
    return Promise.reject(error);
  }
  return started.signature.then((signature) => compactCapabilityToken(started, signature));
}

/** A signature under way: the signed text, and the signature WebCrypto is computing. */
export interface StartedCapabilitySignature {
  /** `header.payload`, the text the signature covers. */
  signedText: string;
  signature: Promise<ArrayBuffer>;
}

/**
 * The synchronous part of {@link signCapabilityToken}: checks the signer and the claims exactly
 * as it does (throwing the same errors), and starts the signature. Finish the token with
 * {@link compactCapabilityToken}; the issuer does both in one step with its own result.
 */
export function startCapabilitySignature(
  claims: CapabilityTokenClaims,
  signer: CapabilitySigner,
): StartedCapabilitySignature {
  const { start, bytes: header } = signingInputPrefix(signer);
  const closed = readCapabilityClaims(claims, refuseMalformedClaims);
  const held = holdsJsonToJti(header, closed) ? writtenToJti : undefined;
  // Forgotten before the scratch is written: a write that fails leaves nothing to trust.
  if (held === undefined) writtenToJti = undefined;
  const jsonEnd = held?.jsonEnd ?? writeClaimsJsonToJti(closed, payloadScratch);
  // Sized before anything is signed: a token the verifier would refuse as too large is never
  // minted at all.
  const written = writeClaimsJsonFromJti(closed, payloadScratch, jsonEnd);
  if (written < 0) tooLarge();
  const inputLength = header.length + base64UrlLength(written);
  if (inputLength + SIGNATURE_SEGMENT_LENGTH > MAX_CAPABILITY_TOKEN_BYTES) tooLarge();
  if (lastHeader !== header) {
    signingInputScratch.set(header, start);
    lastHeader = header;
  }
  const encodedBytes = held?.encodedBytes ?? 0;
  // Where the encoding of the bytes not kept starts: header and kept characters, in units.
  const keptUnits = (start + header.length) / 2 + (encodedBytes / 3) * 2;
  writeBase64UrlUnits(payloadScratch, encodedBytes, written, signingInputUnits, keptUnits);
  const signingInput = signingInputScratch.subarray(start, start + inputLength);
  const signature = crypto.subtle.sign(ES256, signer.privateKey, signingInput);
  // Read back before the signature is waited for: after that the scratch belongs to the next
  // mint.
  const signedText = asciiDecoder.decode(signingInput);
  if (held === undefined) {
    writtenToJti = {
      header,
      claims: closed,
      jsonEnd,
      encodedBytes: jsonEnd - (jsonEnd % 3),
    };
  }
  return { signedText, signature };
}

/**
 * The compact token from a started signature and its result: `header.payload.signature`. Throws
 * when the signing key did not yield a 64-byte ES256 signature.
 */
export function compactCapabilityToken(
  started: StartedCapabilitySignature,
  result: ArrayBuffer,
): string {
  const signature = new Uint8Array(result);
  if (signature.length !== ES256_SIGNATURE_BYTES) {
    throw new SvcConfigurationError('The capability signing key did not yield an ES256 signature');
  }
  return `${started.signedText}.${encodeBase64Url(signature)}`;
}

// ---------------------------------------------------------------------------------------------
// Verification: compact form and header

interface CompactToken {
  headerSegment: string;
  /** `header.payload`, the bytes the signature covers. */
  signingInput: string;
  payloadSegment: string;
  signatureSegment: string;
}

function decodeJsonObject(segment: string, part: string): Record<string, unknown> {
  const bytes = decodeCheckedBase64Url(segment);
  let value: unknown;
  try {
    value = JSON.parse(strictUtf8.decode(bytes));
  } catch {
    refuse('token_malformed', `The capability token ${part} is not UTF-8 JSON`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    refuse('token_malformed', `The capability token ${part} is not a JSON object`);
  }
  return value as Record<string, unknown>;
}

function parseCompactToken(token: string): CompactToken {
  if (!COMPACT_JWS_PATTERN.test(token)) {
    refuse(
      'token_malformed',
      'The capability token is not a compact JWS (header.payload.signature)',
    );
  }
  const firstDot = token.indexOf('.');
  const secondDot = token.indexOf('.', firstDot + 1);
  const headerSegment = token.slice(0, firstDot);
  const payloadSegment = token.slice(firstDot + 1, secondDot);
  const signatureSegment = token.slice(secondDot + 1);
  // A spare character or non-zero trailing bits make a second encoding of the same bytes.
  if (
    !hasCanonicalBase64UrlEnding(headerSegment) || !hasCanonicalBase64UrlEnding(payloadSegment) ||
    !hasCanonicalBase64UrlEnding(signatureSegment)
  ) {
    refuse('token_malformed', 'The capability token has a non-canonical base64url segment');
  }
  return {
    headerSegment,
    signingInput: token.slice(0, secondDot),
    payloadSegment,
    signatureSegment,
  };
}

/** Checks the JOSE header and returns the kid that selects the verification key. */
function checkHeader(header: Record<string, unknown>): string {
  if (header.alg !== 'ES256') {
    refuse('unsupported_alg', 'Capability tokens must be signed with ES256');
  }
  if (header.typ !== CAPABILITY_TOKEN_TYP) {
    refuse(
      'token_type_mismatch',
      `The token is not a capability token (typ ${CAPABILITY_TOKEN_TYP})`,
    );
  }
  // Closed header: jku, x5u, x5c, jwk, crit, b64, cty, zip and anything else are refused, so a
  // token can never point the verifier at a key, a URL or a different processing mode.
  for (const member of Object.keys(header)) {
    if (!ALLOWED_HEADER_MEMBERS.has(member)) {
      refuse(
        'header_not_allowed',
        'The capability token header carries a member other than alg, kid, typ',
      );
    }
  }
  const kid = header.kid;
  if (typeof kid !== 'string' || kid.length === 0) {
    refuse('token_malformed', 'The capability token header needs a non-empty string kid');
  }
  return kid;
}

// Every token from one signer carries the same header bytes, so a header segment that passed
// the checks once is remembered with its kid. Only accepted headers are stored, and the map is
// small and bounded: a flood of distinct headers costs a re-check, never memory.
const acceptedHeaders = new Map<string, string>();
const MAX_ACCEPTED_HEADERS = 64;

function kidOfHeader(headerSegment: string): string {
  const known = acceptedHeaders.get(headerSegment);
  if (known !== undefined) return known;
  const kid = checkHeader(decodeJsonObject(headerSegment, 'header'));
  if (acceptedHeaders.size >= MAX_ACCEPTED_HEADERS) acceptedHeaders.clear();
  acceptedHeaders.set(headerSegment, kid);
  return kid;
}

async function lookUpKey(keys: CapabilityKeySet, kid: string): Promise<CryptoKey | undefined> {
  try {
    return await keys.getKey(kid);
  } catch (error) {
    if (hasSvcErrorShape(error)) throw error;
    throw new SvcInternalError('Capability verification keys are unavailable', {
      reason: 'jwks_unavailable',
      status: 503,
    });
  }
}

async function checkSignature(compact: CompactToken, key: CryptoKey): Promise<void> {
  const signature = decodeCheckedBase64Url(compact.signatureSegment);
  if (signature.length !== ES256_SIGNATURE_BYTES) {
    refuse('bad_signature', 'The capability token signature is not a 64-byte ES256 signature');
  }
  let valid: boolean;
  try {
    valid = await crypto.subtle.verify(
      ES256,
      key,
      signature,
      asciiEncoder.encode(compact.signingInput),
    );
  } catch {
    throw new SvcConfigurationError('A capability verification key cannot verify ES256 signatures');
  }
  if (!valid) refuse('bad_signature', 'The capability token signature does not verify');
}

// ---------------------------------------------------------------------------------------------
// Verification: claims against the options and the clock

function checkIssuerAndAudience(
  claims: CapabilityTokenClaims,
  options: VerifyCapabilityTokenOptions,
): void {
  if (claims.iss !== options.issuer) {
    refuse('issuer_mismatch', 'The capability token was issued by another issuer');
  }
  if (claims.aud !== options.audience) {
    refuse('audience_mismatch', 'The capability token is for another audience');
  }
}

function checkTimeClaims(claims: CapabilityTokenClaims, nowSeconds: number): void {
  const skew = CAPABILITY_TOKEN_CLOCK_SKEW_SECONDS;
  if (nowSeconds >= claims.exp + skew) refuse('token_expired', 'The capability token has expired');
  if (nowSeconds + skew < claims.nbf) {
    refuse('token_not_yet_valid', 'The capability token is not valid yet (nbf)');
  }
  if (nowSeconds + skew < claims.iat) {
    refuse('token_issued_in_future', 'The capability token was issued in the future (iat)');
  }
}

const VERIFY_OPTIONS: readonly string[] = ['keys', 'issuer', 'audience', 'now'];

// Options objects that passed the checks (a service verifies every request with one): the checks
// are of configuration, so they need not walk the object again. What they compare claims with is
// read afresh on every verification.
const checkedOptions = new WeakSet<object>();

function checkOptions(options: VerifyCapabilityTokenOptions): void {
  if (checkedOptions.has(options)) return;
  if (
    options === null || typeof options !== 'object' || typeof options.keys?.getKey !== 'function'
  ) {
    throw new SvcConfigurationError('verifyCapabilityToken needs options.keys (a key set)');
  }
  refuseUnknownKeys(options, VERIFY_OPTIONS, 'verifyCapabilityToken');
  if (typeof options.issuer !== 'string' || options.issuer.length === 0) {
    throw new SvcConfigurationError('verifyCapabilityToken needs a non-empty options.issuer');
  }
  if (typeof options.audience !== 'string' || options.audience.length === 0) {
    throw new SvcConfigurationError('verifyCapabilityToken needs a non-empty options.audience');
  }
  checkedOptions.add(options);
}

function verifiedResult(claims: CapabilityTokenClaims): VerifiedCapabilityToken {
  const result: VerifiedCapabilityToken = { identity: identityFromClaims(claims), claims };
  if (claims.cnf !== undefined) result.confirmationJkt = claims.cnf.jkt;
  return result;
}

/**
 * Verifies a capability token and maps it to the identity handed to handlers.
 *
 * Throws `CapabilityAuthError` (401) with `reason`: `token_missing`, `token_too_large`,
 * `token_malformed`, `unsupported_alg`, `token_type_mismatch`, `header_not_allowed`,
 * `unknown_capability_key_id`, `bad_signature`, `invalid_claims`, `issuer_mismatch`,
 * `audience_mismatch`, `token_expired`, `token_not_yet_valid` or `token_issued_in_future`.
 * A key set that cannot be reached surfaces as `SvcInternalError` (503, `jwks_unavailable`).
 *
 * JSON text with a duplicated member name parses to its last occurrence; the claims are checked
 * and reported from that one parsed value, so the value checked is always the value reported.
 *
 * A token verified before (same string, same key set) skips the signature check while its kid
 * still maps to the same key; issuer, audience and time claims are checked on every call.
 */
export async function verifyCapabilityToken(
  token: unknown,
  options: VerifyCapabilityTokenOptions,
): Promise<VerifiedCapabilityToken> {
  return verifiedResult(await verifyCapabilityClaims(token, options));
}

/**
 * Checks again, without waiting, a token this key set verified before: its kid still names the
 * key that verified it, and issuer, audience and time claims hold now. Returns its frozen claims;
 * throws the verifier's refusal; `undefined` when that cannot be told synchronously (the token
 * is not remembered, or the key set cannot answer at once): then call
 * {@link verifyCapabilityClaims}, which decides every case.
 */
export function recheckVerifiedToken(
  token: string,
  options: VerifyCapabilityTokenOptions,
): CapabilityTokenClaims | undefined {
  checkOptions(options);
  const nowMs = options.now === undefined ? Date.now() : options.now();
  if (typeof nowMs !== 'number' || !Number.isFinite(nowMs)) return undefined;
  const cached = verifiedTokenCacheFor(options.keys).get(token, nowMs);
  if (cached === undefined || options.keys.currentKey?.(cached.kid) !== cached.key) {
    return undefined;
  }
  checkIssuerAndAudience(cached.claims, options);
  checkTimeClaims(cached.claims, nowMs / 1000);
  return cached.claims;
}

/**
 * {@link verifyCapabilityToken} without building an identity: the verified, frozen claims, with
 * the same refusals. A token verified before answers with the very claims object it answered
 * with then (until its verification leaves the cache), so a caller may key what it derives from
 * the claims on that object.
 */
export async function verifyCapabilityClaims(
  token: unknown,
  options: VerifyCapabilityTokenOptions,
): Promise<CapabilityTokenClaims> {
  checkOptions(options);
  if (typeof token !== 'string' || token.length === 0) {
    refuse('token_missing', 'A capability token is required');
  }
  // Valid tokens are ASCII, so UTF-16 length equals byte length for every token worth parsing.
  if (token.length > MAX_CAPABILITY_TOKEN_BYTES) {
    refuse('token_too_large', `Capability tokens are at most ${MAX_CAPABILITY_TOKEN_BYTES} bytes`);
  }
  const nowMs = options.now === undefined ? Date.now() : options.now();
  // A clock reading of NaN would make every time comparison false, accepting any exp.
  if (typeof nowMs !== 'number' || !Number.isFinite(nowMs)) {
    throw new SvcConfigurationError('verifyCapabilityToken: options.now() must return finite ms');
  }
  const cache = verifiedTokenCacheFor(options.keys);
  const cached = cache.get(token, nowMs);
  if (cached !== undefined) {
    if ((await lookUpKey(options.keys, cached.kid)) === cached.key) {
      checkIssuerAndAudience(cached.claims, options);
      checkTimeClaims(cached.claims, nowMs / 1000);
      return cached.claims;
    }
    // The key left the key set or changed: forget the verification and decide afresh.
    cache.delete(token);
  }

  const compact = parseCompactToken(token);
  const kid = kidOfHeader(compact.headerSegment);
  const key = await lookUpKey(options.keys, kid);
  if (key === undefined) {
    refuse('unknown_capability_key_id', 'The capability token names an unknown capability key id');
  }
  await checkSignature(compact, key);
  const claims = freezeCapabilityClaims(
    readCapabilityClaims(
      decodeJsonObject(compact.payloadSegment, 'payload'),
      (problem) => refuse('invalid_claims', `Invalid capability token claims: ${problem}`),
    ),
  );
  checkIssuerAndAudience(claims, options);
  checkTimeClaims(claims, nowMs / 1000);
  cache.set(token, {
    kid,
    key,
    claims,
    expiresAtMs: (claims.exp + CAPABILITY_TOKEN_CLOCK_SKEW_SECONDS) * 1000,
  });
  return claims;
}
