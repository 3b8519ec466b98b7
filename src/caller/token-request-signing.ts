/**
 * The wire format of an authenticated token request, shared by the caller that signs it and the
 * control plane that checks it, so both sides build the signed bytes with one implementation.
 *
 * Two schemes (DESIGN.md "HMAC caller auth", "JWK caller auth"):
 *
 * - `Authorization: Svc-HMAC-SHA256 <base64url HMAC-SHA256>` with `X-Svc-Client-Id`,
 *   `X-Svc-Timestamp` (Unix seconds, digits only) and `X-Request-Id`. The signed string is the
 *   newline-joined `SVC-HMAC-SHA256`, method, path with query, base64url SHA-256 of the raw body,
 *   client id, request id and timestamp. The key is the UTF-8 bytes of the client secret.
 * - `Authorization: Svc-JWK <compact JWS>`: ES256, header `{ alg, kid, typ: 'svc-client+jwt' }`,
 *   claims `{ iss, sub, aud, htm, htu, bh, rid, iat, exp, jti }`.
 *
 * Every field that goes into the newline-joined string is a token, a URL path, base64url, a
 * visible-ASCII request id or digits, so no field can smuggle a line break into another's place.
 *
 * @module
 */
import { encodeBase64Url, encodeBase64UrlText } from '../core/base64url.ts';
import { SvcConfigurationError } from '../core/errors.ts';
import { HmacSha256Key, sha256 } from '../core/sha256.ts';
import { acceptRequestId, SVC_REQUEST_ID_HEADER } from '../core/request-id.ts';

/** Authorization scheme of HMAC caller authentication. */
export const HMAC_CALLER_AUTH_SCHEME = 'Svc-HMAC-SHA256';
/** Authorization scheme of JWK (signed assertion) caller authentication. */
export const JWK_CALLER_AUTH_SCHEME = 'Svc-JWK';
/** Header naming the HMAC client. */
export const SVC_CLIENT_ID_HEADER = 'X-Svc-Client-Id';
/** Header carrying the HMAC timestamp (Unix seconds, digits only). */
export const SVC_TIMESTAMP_HEADER = 'X-Svc-Timestamp';
/** First line of the HMAC signed string. */
export const HMAC_SIGNED_STRING_LABEL = 'SVC-HMAC-SHA256';
/** The `typ` header of a JWK caller assertion. */
export const JWK_CALLER_ASSERTION_TYP = 'svc-client+jwt';
/** Longest lifetime (`exp - iat`) a JWK caller assertion may claim. */
export const MAX_JWK_ASSERTION_TTL_SECONDS = 300;
/** Lifetime of the assertions the shipped requester signs. */
export const DEFAULT_JWK_ASSERTION_TTL_SECONDS = 60;
/**
 * The issuer of a control plane created without `id` or `issuer`; the JWK requester's default
 * assertion audience.
 */
export const DEFAULT_CONTROL_PLANE_ISSUER = 'control-plane';

const utf8 = new TextEncoder();
const ES256 = { name: 'ECDSA', hash: 'SHA-256' } as const;
const P256 = { name: 'ECDSA', namedCurve: 'P-256' } as const;
// A client id travels in a header and in the signed string: visible ASCII, no comma (a comma is
// how a header sent twice arrives).
const CLIENT_ID_PATTERN = /^[\x21-\x2b\x2d-\x7e]{1,200}$/;

/** Base64url SHA-256 of the raw body bytes: the `bh` claim and the HMAC body line. */
export function encodedRequestBodyHash(body: Uint8Array | string): string {
  // Computed here rather than by `crypto.subtle.digest`, whose fixed cost per call is far above
  // hashing a token request's few hundred bytes (see core/sha256.ts).
  return encodeBase64Url(sha256(body));
}

/** `/p?q` of a parsed URL; `URL.search` reads an empty query as none, so it is looked up. */
function pathAndQuery(url: URL): string {
  if (url.search !== '') return `${url.pathname}${url.search}`;
  // Before the fragment, a `?` is only ever the query delimiter (one in a path is escaped).
  const fragmentAt = url.href.indexOf('#');
  const beforeFragment = fragmentAt < 0 ? url.href : url.href.slice(0, fragmentAt);
  return beforeFragment.endsWith('?') ? `${url.pathname}?` : url.pathname;
}

// The plane reads the same request URL on every token request and a requester signs for one
// token URL: the last string parsed is remembered with its path, so a repeat costs a comparison.
let lastParsedUrl: string | undefined;
let lastPathWithQuery = '';

/**
 * The path with query of a URL, exactly as both sides sign it (`/p?q`, no fragment). An empty
 * query stays visible (`/p?`), so a request signed for `/p` cannot be replayed to `/p?`.
 */
export function requestPathWithQuery(url: string | URL): string {
  if (typeof url !== 'string') return pathAndQuery(url);
  if (url === lastParsedUrl) return lastPathWithQuery;
  const pathWithQuery = pathAndQuery(new URL(url));
  lastParsedUrl = url;
  lastPathWithQuery = pathWithQuery;
  return pathWithQuery;
}

/** Whether a client id can travel in `X-Svc-Client-Id` (visible ASCII, no comma, ≤ 200). */
export function isWellFormedClientId(clientId: unknown): clientId is string {
  return typeof clientId === 'string' && CLIENT_ID_PATTERN.test(clientId);
}

/** The fields the HMAC signature covers. */
export interface HmacSignedFields {
  /** HTTP method, upper case. */
  method: string;
  /** Path with query of the request URL. */
  pathWithQuery: string;
  /** Base64url SHA-256 of the raw body. */
  bodyHash: string;
  /** The HMAC client id (`X-Svc-Client-Id`). */
  clientId: string;
  /** The request id (`X-Request-Id`). */
  requestId: string;
  /** Unix seconds as sent in `X-Svc-Timestamp` (digits). */
  timestamp: string;
}

/** The newline-joined string an HMAC token request signs. */
export function hmacSignedString(fields: HmacSignedFields): string {
  return [
    HMAC_SIGNED_STRING_LABEL,
    fields.method,
    fields.pathWithQuery,
    fields.bodyHash,
    fields.clientId,
    fields.requestId,
    fields.timestamp,
  ].join('\n');
}

/**
 * Prepares an HMAC client secret (its UTF-8 bytes) as an HMAC-SHA256 key usable to sign and
 * verify, with its padded blocks absorbed once. Refuses an empty or non-string secret.
 */
export async function importHmacClientSecret(
  secret: string,
  label = 'HMAC client',
): Promise<HmacSha256Key> {
  return await Promise.resolve(prepareHmacClientSecret(secret, label));
}

/** {@link importHmacClientSecret} without the promise, for code that holds the key itself. */
export function prepareHmacClientSecret(secret: string, label = 'HMAC client'): HmacSha256Key {
  if (typeof secret !== 'string' || secret.length === 0) {
    throw new SvcConfigurationError(`${label}: the client secret must be a non-empty string`, {
      reason: 'invalid_client_secret',
    });
  }
  return new HmacSha256Key(utf8.encode(secret));
}

/** The MAC of `message` under a client secret not yet prepared as an {@link HmacSha256Key}. */
async function hmacOf(secret: string | CryptoKey, message: string): Promise<Uint8Array> {
  if (isCryptoKey(secret)) {
    return new Uint8Array(await crypto.subtle.sign('HMAC', secret, utf8.encode(message)));
  }
  return (await importHmacClientSecret(secret)).sign(message);
}

/** What {@link signHmacTokenRequest} needs. */
export interface SignHmacTokenRequestInput {
  /** The HMAC client id registered on the plane. */
  clientId: string;
  /** The shared secret, a key from {@link importHmacClientSecret}, or a WebCrypto HMAC key. */
  clientSecret: string | CryptoKey | HmacSha256Key;
  /** The full request URL (the path with query is signed). */
  url: string | URL;
  /** The exact body bytes that will be sent. */
  body: Uint8Array | string;
  /** The `X-Request-Id` that will be sent (1..200 visible ASCII characters). */
  requestId: string;
  /** HTTP method; default `POST`. */
  method?: string;
  /** Unix seconds; default now. */
  timestampSeconds?: number;
}

function checkRequestId(requestId: unknown): string {
  const accepted = acceptRequestId(requestId);
  if (accepted === undefined) {
    throw new SvcConfigurationError(
      'A token request id must be 1 to 200 visible ASCII characters',
      { reason: 'invalid_request_id' },
    );
  }
  return accepted;
}

function checkClientId(clientId: unknown): string {
  if (!isWellFormedClientId(clientId)) {
    throw new SvcConfigurationError(
      'A client id must be 1 to 200 visible ASCII characters without a comma',
      { reason: 'invalid_client_id' },
    );
  }
  return clientId;
}

/**
 * Signs an HMAC token request. Returns the headers to send with it: `Authorization`,
 * `X-Svc-Client-Id`, `X-Svc-Timestamp` and `X-Request-Id`.
 */
export async function signHmacTokenRequest(
  input: SignHmacTokenRequestInput,
): Promise<Record<string, string>> {
  const clientId = checkClientId(input.clientId);
  const requestId = checkRequestId(input.requestId);
  const timestamp = String(Math.floor(input.timestampSeconds ?? Date.now() / 1000));
  const signed = hmacSignedString({
    method: (input.method ?? 'POST').toUpperCase(),
    pathWithQuery: requestPathWithQuery(input.url),
    bodyHash: encodedRequestBodyHash(input.body),
    clientId,
    requestId,
    timestamp,
  });
  // A prepared key signs synchronously: the common case awaits nothing before the request goes.
  const secret = input.clientSecret;
  const signature = secret instanceof HmacSha256Key
    ? secret.sign(signed)
    : await hmacOf(secret, signed);
  return {
    Authorization: `${HMAC_CALLER_AUTH_SCHEME} ${encodeBase64Url(signature)}`,
    [SVC_CLIENT_ID_HEADER]: clientId,
    [SVC_TIMESTAMP_HEADER]: timestamp,
    [SVC_REQUEST_ID_HEADER]: requestId,
  };
}

/** A caller's imported P-256 signing key and its public half. */
export interface CallerSigningKey {
  /** Non-extractable ECDSA P-256 signing key. */
  privateKey: CryptoKey;
  /** The public JWK (`kty`, `crv`, `x`, `y` only). */
  publicJwk: { kty: 'EC'; crv: 'P-256'; x: string; y: string };
}

/** Whether a value is a WebCrypto key (checked by shape: realms differ across runtimes). */
export function isCryptoKey(value: unknown): value is CryptoKey {
  return value !== null && typeof value === 'object' &&
    typeof (value as { type?: unknown }).type === 'string' &&
    typeof (value as { algorithm?: unknown }).algorithm === 'object' &&
    typeof (value as { usages?: unknown }).usages === 'object';
}

function isNonEmptyString(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0;
}

/**
 * Checks, without importing it, that a JWK is a private P-256 EC key (`kty`, `crv`, `x`, `y`,
 * `d`). Throws `SvcConfigurationError` naming `label` otherwise.
 */
export function checkPrivateP256Jwk(jwk: unknown, label: string): JsonWebKey {
  const record = jwk as Record<string, unknown> | null;
  if (
    record === null || typeof record !== 'object' || Array.isArray(record) ||
    record.kty !== 'EC' || record.crv !== 'P-256' || !isNonEmptyString(record.x) ||
    !isNonEmptyString(record.y) || !isNonEmptyString(record.d)
  ) {
    throw new SvcConfigurationError(`${label}: privateJwk must be a private P-256 EC JWK`, {
      reason: 'invalid_private_jwk',
    });
  }
  return record as JsonWebKey;
}

/**
 * Imports a private P-256 JWK once for signing (assertions, proofs). Only the key members are
 * passed to WebCrypto, so `alg`, `key_ops` or `ext` in the stored JWK cannot make it fail.
 */
export async function importCallerSigningKey(
  privateJwk: unknown,
  label = 'caller key',
): Promise<CallerSigningKey> {
  const jwk = checkPrivateP256Jwk(privateJwk, label);
  const publicJwk = { kty: 'EC', crv: 'P-256', x: jwk.x!, y: jwk.y! } as const;
  try {
    const privateKey = await crypto.subtle.importKey(
      'jwk',
      { ...publicJwk, d: jwk.d },
      P256,
      false,
      ['sign'],
    );
    return { privateKey, publicJwk };
  } catch {
    throw new SvcConfigurationError(`${label}: privateJwk does not import as a P-256 key`, {
      reason: 'invalid_private_jwk',
    });
  }
}

/** Signs a compact ES256 JWS over JSON header and claims (64-byte R‖S signature). */
export async function signCompactEs256(
  header: Record<string, unknown>,
  claims: Record<string, unknown>,
  privateKey: CryptoKey,
): Promise<string> {
  return await signEncodedHeaderEs256(
    encodeBase64UrlText(JSON.stringify(header)),
    claims,
    privateKey,
  );
}

async function signEncodedHeaderEs256(
  headerSegment: string,
  claims: Record<string, unknown>,
  privateKey: CryptoKey,
): Promise<string> {
  const signingInput = `${headerSegment}.${encodeBase64UrlText(JSON.stringify(claims))}`;
  const signature = await crypto.subtle.sign(ES256, privateKey, utf8.encode(signingInput));
  return `${signingInput}.${encodeBase64Url(new Uint8Array(signature))}`;
}

// A requester signs every assertion under one key id: the header segment (which only the kid
// varies) is encoded once and reused while the kid stays the same.
let lastAssertionKid: string | undefined;
let lastAssertionHeader = '';

function assertionHeaderSegment(keyId: string): string {
  if (keyId !== lastAssertionKid) {
    lastAssertionHeader = encodeBase64UrlText(
      JSON.stringify({ alg: 'ES256', kid: keyId, typ: JWK_CALLER_ASSERTION_TYP }),
    );
    lastAssertionKid = keyId;
  }
  return lastAssertionHeader;
}

/** What {@link signJwkTokenRequestAssertion} needs. */
export interface SignJwkTokenRequestAssertionInput {
  /** The JWK client id registered on the plane (`iss` and `sub`). */
  clientId: string;
  /** The `kid` of the signing key as registered for this client. */
  keyId: string;
  /** The private key: a P-256 JWK, or a key from {@link importCallerSigningKey}. */
  privateKey: JsonWebKey | CryptoKey;
  /** The plane's issuer (`aud`). */
  audience: string;
  /** The full request URL (its path with query becomes `htu`). */
  url: string | URL;
  /** The exact body bytes that will be sent (hashed into `bh`). */
  body: Uint8Array | string;
  /** The `X-Request-Id` that will be sent (`rid`). */
  requestId: string;
  /** HTTP method (`htm`); default `POST`. */
  method?: string;
  /** Assertion lifetime; default 60, at most 300. */
  ttlSeconds?: number;
  /** Unix seconds for `iat`; default now. */
  nowSeconds?: number;
}

function assertionTtl(ttlSeconds: unknown): number {
  if (ttlSeconds === undefined) return DEFAULT_JWK_ASSERTION_TTL_SECONDS;
  if (
    typeof ttlSeconds !== 'number' || !Number.isInteger(ttlSeconds) || ttlSeconds <= 0 ||
    ttlSeconds > MAX_JWK_ASSERTION_TTL_SECONDS
  ) {
    throw new SvcConfigurationError(
      `A caller assertion lifetime must be an integer in 1..${MAX_JWK_ASSERTION_TTL_SECONDS}`,
      { reason: 'invalid_assertion_ttl' },
    );
  }
  return ttlSeconds;
}

/** Signs the request-bound caller assertion sent as `Authorization: Svc-JWK <assertion>`. */
export async function signJwkTokenRequestAssertion(
  input: SignJwkTokenRequestAssertionInput,
): Promise<string> {
  if (!isNonEmptyString(input.keyId) || !isNonEmptyString(input.audience)) {
    throw new SvcConfigurationError('A caller assertion needs a key id and an audience', {
      reason: 'invalid_assertion_input',
    });
  }
  const clientId = checkClientId(input.clientId);
  const requestId = checkRequestId(input.requestId);
  const ttl = assertionTtl(input.ttlSeconds);
  const privateKey = isCryptoKey(input.privateKey)
    ? input.privateKey
    : (await importCallerSigningKey(input.privateKey)).privateKey;
  const iat = Math.floor(input.nowSeconds ?? Date.now() / 1000);
  return await signEncodedHeaderEs256(
    assertionHeaderSegment(input.keyId),
    {
      iss: clientId,
      sub: clientId,
      aud: input.audience,
      htm: (input.method ?? 'POST').toUpperCase(),
      htu: requestPathWithQuery(input.url),
      bh: encodedRequestBodyHash(input.body),
      rid: requestId,
      iat,
      exp: iat + ttl,
      jti: crypto.randomUUID(),
    },
    privateKey,
  );
}
