// What the harness builds by hand for the plane conformance tests: the keys of one test file,
// token requests signed (and then tampered with) as HMAC and JWK callers, caller assertions,
// capability tokens signed with a plane key but with claims the plane would never mint, and
// proofs of possession that skip the shipped signer's local checks. Nothing here validates.
import { CAPABILITY_TOKEN_TYP } from '../../src/core/capability-token.ts';
import { encodeBase64Url } from '../../src/core/base64url.ts';
import { CAPABILITY_TOKEN_PATH } from '../../src/plane/control-plane.ts';
import { tokenHashForProof } from '../../src/service/proof-verify.ts';
import {
  encodedRequestBodyHash,
  signCompactEs256,
  signHmacTokenRequest,
} from '../../src/caller/token-request-signing.ts';
import { type FixtureKey, generateFixtureKey, ISS, PLANE_URL } from './fixture.ts';

export type { FixtureKey };

/** The token endpoint of the fixture plane. */
export const TOKEN_URL = `${PLANE_URL}${CAPABILITY_TOKEN_PATH}`;
/** Shared secrets of the HMAC clients hc1 (svc-caller) and hc2 (svc-other). */
export const HMAC_SECRETS = {
  hc1: 'plane-hc1-secret-8c1f0e2d7a4b4c3e9f10',
  hc2: 'plane-hc2-secret-51d7a3b0c9e84f2a6d31',
} as const;

/** Plane signing keys a deployment can be configured with. */
export type SigningKeyName = 'k1' | 'k2' | 'k3';

/** The keys of one test file: plane keys k1..k3, attacker A, client keys K1, K2 (jc1). */
export interface PlaneKeys {
  k1: FixtureKey;
  k2: FixtureKey;
  k3: FixtureKey;
  attacker: FixtureKey;
  K1: FixtureKey;
  K2: FixtureKey;
}

let keysOfThisFile: Promise<PlaneKeys> | undefined;

/** Fresh keys, generated once per test file so that replicas of one file share them. */
export function planeKeys(): Promise<PlaneKeys> {
  keysOfThisFile ??= (async () => {
    const [k1, k2, k3, attacker, K1, K2] = await Promise.all([
      generateFixtureKey('k1'),
      generateFixtureKey('k2'),
      generateFixtureKey('k3'),
      generateFixtureKey('a1'),
      generateFixtureKey('jk1'),
      generateFixtureKey('jk2'),
    ]);
    return { k1, k2, k3, attacker, K1, K2 };
  })();
  return keysOfThisFile;
}

/** The decoded header and claims of a compact JWS (no verification). */
export function decodeJws(token: string): {
  header: Record<string, unknown>;
  claims: Record<string, unknown>;
} {
  const part = (segment: string) =>
    JSON.parse(new TextDecoder().decode(fromBase64Url(segment))) as Record<string, unknown>;
  const [header, claims] = token.split('.');
  return { header: part(header), claims: part(claims) };
}

/** Bytes from unpadded base64url. */
export function fromBase64Url(text: string): Uint8Array {
  const binary = atob(text.replace(/-/g, '+').replace(/_/g, '/'));
  return Uint8Array.from(binary, (character) => character.charCodeAt(0));
}

/** The harness's own RFC 7638 thumbprint of a P-256 public JWK (members in order, no spaces). */
export async function harnessThumbprint(jwk: JsonWebKey): Promise<string> {
  const canonical = `{"crv":"${jwk.crv}","kty":"EC","x":"${jwk.x}","y":"${jwk.y}"}`;
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(canonical));
  return encodeBase64Url(new Uint8Array(digest));
}

/** A standard token request body: hc1's service asking for `svc-a.read` on svc-a. */
export function tokenBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    ...overrides,
  };
}

/** Options of {@link hmacTokenRequest}. */
export interface HmacTokenRequestOptions {
  clientId?: 'hc1' | 'hc2' | string;
  /** Secret to sign with; default the client's registered secret. */
  secret?: string;
  requestId?: string;
  timestampSeconds?: number;
  method?: string;
  url?: string;
  /** What is sent, when it differs from what was signed. */
  send?: { body?: string | Uint8Array; url?: string; method?: string };
  /** Header edits after signing: a string sets, `null` removes. */
  headers?: Record<string, string | null>;
}

/** A correctly HMAC-signed token request (then edited as the options say). */
export async function hmacTokenRequest(
  body: unknown,
  options: HmacTokenRequestOptions = {},
): Promise<Request> {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  const clientId = options.clientId ?? 'hc1';
  const url = options.url ?? TOKEN_URL;
  const method = options.method ?? 'POST';
  const signed = await signHmacTokenRequest({
    clientId,
    clientSecret: options.secret ?? HMAC_SECRETS[clientId as 'hc1'] ?? 'unregistered-secret',
    url,
    body: text,
    requestId: options.requestId ?? crypto.randomUUID(),
    method,
    ...(options.timestampSeconds !== undefined
      ? { timestampSeconds: options.timestampSeconds }
      : {}),
  });
  const headers = new Headers({ 'Content-Type': 'application/json', ...signed });
  for (const [name, value] of Object.entries(options.headers ?? {})) {
    if (value === null) headers.delete(name);
    else headers.set(name, value);
  }
  const sendMethod = options.send?.method ?? method;
  const sendBody = options.send?.body ?? text;
  return new Request(options.send?.url ?? url, {
    method: sendMethod,
    headers,
    ...(sendMethod === 'GET' || sendMethod === 'HEAD' ? {} : { body: sendBody as BodyInit }),
  });
}

/** Options of {@link jwkTokenRequest}. */
export interface JwkTokenRequestOptions {
  /** Key to sign with; default K1. */
  key?: FixtureKey;
  /** Header members replacing / added to `{ alg, kid, typ }` (`undefined` removes one). */
  header?: Record<string, unknown>;
  /** Claims replacing / added to the request-bound set (`undefined` removes one). */
  claims?: Record<string, unknown>;
  requestId?: string;
  /** Scheme word sent before the assertion; default `Svc-JWK`. */
  scheme?: string;
  send?: { body?: string; url?: string; method?: string; requestId?: string | null };
  /** A complete Authorization value, replacing the signed one. */
  authorization?: string;
}

/** The private half of a fixture key, imported once for ES256 signing. */
export async function importSigningKey(key: FixtureKey): Promise<CryptoKey> {
  const { kty, crv, x, y, d } = key.privateJwk;
  return await crypto.subtle.importKey(
    'jwk',
    { kty, crv, x, y, d },
    { name: 'ECDSA', namedCurve: 'P-256' },
    false,
    ['sign'],
  );
}

/** Drops members whose value is `undefined` (how options remove a member). */
function defined(record: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(record).filter(([, value]) => value !== undefined));
}

/** A request-bound JWK caller assertion for jc1, with any member overridden. */
export async function jwkAssertion(
  bodyText: string,
  requestId: string,
  options: Pick<JwkTokenRequestOptions, 'key' | 'header' | 'claims'> & { url?: string } = {},
): Promise<string> {
  const key = options.key ?? (await planeKeys()).K1;
  const now = Math.floor(Date.now() / 1000);
  const url = new URL(options.url ?? TOKEN_URL);
  const header = defined({ alg: 'ES256', kid: key.kid, typ: 'svc-client+jwt', ...options.header });
  const claims = defined({
    iss: 'jc1',
    sub: 'jc1',
    aud: ISS,
    htm: 'POST',
    htu: `${url.pathname}${url.search}`,
    bh: encodedRequestBodyHash(bodyText),
    rid: requestId,
    iat: now,
    exp: now + 60,
    jti: crypto.randomUUID(),
    ...options.claims,
  });
  return await signCompactEs256(header, claims, await importSigningKey(key));
}

/** A JWK-authenticated token request (jc1), with any part of it altered as the options say. */
export async function jwkTokenRequest(
  body: unknown,
  options: JwkTokenRequestOptions = {},
): Promise<Request> {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  const requestId = options.requestId ?? crypto.randomUUID();
  const assertion = await jwkAssertion(text, requestId, options);
  const headers = new Headers({
    'Content-Type': 'application/json',
    Authorization: options.authorization ?? `${options.scheme ?? 'Svc-JWK'} ${assertion}`,
  });
  const sentRequestId = options.send?.requestId === undefined ? requestId : options.send.requestId;
  if (sentRequestId !== null) headers.set('X-Request-Id', sentRequestId);
  const method = options.send?.method ?? 'POST';
  return new Request(options.send?.url ?? TOKEN_URL, {
    method,
    headers,
    ...(method === 'GET' ? {} : { body: options.send?.body ?? text }),
  });
}

/**
 * A capability token signed with a plane key (default k1) but built by the harness: the
 * baseline plain claims (svc-caller → svc-a, `svc-a.read` + `svc-a.internal`, spa service),
 * with `claims` merged over them (`undefined` removes a claim).
 */
export async function forgedToken(
  claims: Record<string, unknown> = {},
  options: { key?: FixtureKey; header?: Record<string, unknown> } = {},
): Promise<string> {
  const key = options.key ?? (await planeKeys()).k1;
  const now = Math.floor(Date.now() / 1000);
  return await signCompactEs256(
    defined({ alg: 'ES256', kid: key.kid, typ: CAPABILITY_TOKEN_TYP, ...options.header }),
    defined({
      iss: ISS,
      sub: 'svc-caller',
      aud: 'svc-a',
      scp: ['svc-a.read', 'svc-a.internal'],
      spa: 'service',
      jti: crypto.randomUUID(),
      iat: now - 5,
      nbf: now - 5,
      exp: now + 120,
      ...claims,
    }),
    await importSigningKey(key),
  );
}

/**
 * A proof of possession built by the harness (bypassing the shipped signer's local checks):
 * header `{ alg, typ, jwk: <public key of key> }`, claims `{ ath, aud, ab, iat, jti }`, each
 * member overridable (`undefined` removes one).
 */
export async function craftedProof(options: {
  token: string;
  key: FixtureKey;
  /** Signs with this key instead of `key` (whose public half stays in the header). */
  signWith?: FixtureKey;
  audience?: string;
  abilityId?: string;
  header?: Record<string, unknown>;
  claims?: Record<string, unknown>;
}): Promise<string> {
  const { kty, crv, x, y } = options.key.publicJwk;
  return await signCompactEs256(
    defined({ alg: 'ES256', typ: 'svc-pop+jwt', jwk: { kty, crv, x, y }, ...options.header }),
    defined({
      ath: await tokenHashForProof(options.token),
      aud: options.audience ?? 'svc-a',
      ab: options.abilityId ?? 'svc-a.echo',
      iat: Math.floor(Date.now() / 1000),
      jti: crypto.randomUUID(),
      ...options.claims,
    }),
    await importSigningKey(options.signWith ?? options.key),
  );
}
