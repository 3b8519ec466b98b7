/**
 * The token-endpoint fixture of the caller-auth tests: HMAC clients `hc1` (svc-caller) and `hc2`
 * (svc-other), JWK clients `jc1` (svc-jwk, keys `jk1`/`jk2`) and `jc2` (svc-jwk2, key `jk3`),
 * and an endpoint whose issuing function signs real capability tokens with a fresh `k1`.
 *
 * The issuing function mirrors the plane's decisions this layer hands over to it: svc-a and
 * svc-c are known targets, svc-d's discovery is unreachable (500), anything else is an unknown
 * target (403), and a scope the target does not publish is an unknown scope (403).
 */
import assert from 'node:assert/strict';
import { signCapabilityToken } from '../../src/core/capability-token.ts';
import type { CapabilityTokenClaims } from '../../src/core/capability-token.ts';
import { CapabilityAuthError, SvcInternalError } from '../../src/core/errors.ts';
import type { SvcLogEvent } from '../../src/core/logging.ts';
import { hmacServiceClientAuth } from '../../src/plane/caller-auth-hmac.ts';
import { jwkServiceClientAuth } from '../../src/plane/caller-auth-jwk.ts';
import type { AuthenticatedCaller, CallerAuthenticator } from '../../src/plane/caller-auth.ts';
import { createTokenEndpoint, type TokenRequestBody } from '../../src/plane/token-endpoint.ts';
import { encodeBase64Url } from '../../src/core/base64url.ts';
import {
  signCompactEs256,
  signHmacTokenRequest,
  signJwkTokenRequestAssertion,
} from '../../src/caller/token-request-signing.ts';

/** The plane issuer of the fixture. */
export const ISSUER = 'https://plane.test';
/** Where the token endpoint is mounted. */
export const TOKEN_URL = 'https://plane.test/.well-known/svc/capability-token';
/** Largest token lifetime the fixture issuer grants. */
export const MAX_TTL_SECONDS = 3600;

/** One generated P-256 key pair. */
export interface FixtureKey {
  kid: string;
  privateKey: CryptoKey;
  privateJwk: JsonWebKey;
  publicJwk: JsonWebKey & { kid: string };
}

/** Generates a fresh P-256 key (never stored anywhere). */
export async function generateKey(kid: string): Promise<FixtureKey> {
  const pair = await crypto.subtle.generateKey(
    { name: 'ECDSA', namedCurve: 'P-256' },
    true,
    ['sign', 'verify'],
  ) as CryptoKeyPair;
  const jwk = await crypto.subtle.exportKey('jwk', pair.privateKey);
  return {
    kid,
    privateKey: pair.privateKey,
    privateJwk: { kty: 'EC', crv: 'P-256', x: jwk.x, y: jwk.y, d: jwk.d },
    publicJwk: { kty: 'EC', crv: 'P-256', x: jwk.x!, y: jwk.y!, kid },
  };
}

/** A random secret as base64url text. */
export function randomSecret(): string {
  return encodeBase64Url(crypto.getRandomValues(new Uint8Array(32)));
}

/** The published scopes of the fixture's known targets. */
const TARGET_SCOPES: Record<string, string[]> = {
  'svc-a': ['svc-a.read', 'svc-a.write', 'svc-a.internal'],
  'svc-c': ['svc-c.read'],
};

/** Scopes each caller service is granted (svc-other only reads svc-a). */
const GRANTS: Record<string, string[]> = {
  'svc-caller': ['svc-a.read', 'svc-a.write', 'svc-a.internal', 'svc-c.read'],
  'svc-other': ['svc-a.read'],
  'svc-jwk': ['svc-a.read', 'svc-a.write', 'svc-c.read'],
  'svc-jwk2': ['svc-a.read'],
};

/** Everything a caller-auth test needs. */
export interface EndpointFixture {
  secrets: { hc1: string; hc2: string };
  keys: { jk1: FixtureKey; jk2: FixtureKey; jk3: FixtureKey; k1: FixtureKey; attacker: FixtureKey };
  /** Events from the HMAC and JWK authenticators and from the endpoint. */
  events: SvcLogEvent[];
  /** What the issuing function was asked for (one entry per issued or refused mint). */
  issued: { caller: AuthenticatedCaller; request: TokenRequestBody }[];
  /** The endpoint with both authenticators. */
  handle: (request: Request, requestId?: string) => Promise<Response>;
  hmac: CallerAuthenticator;
  jwk: CallerAuthenticator;
}

/** Builds a fresh fixture (own keys, own event and issue logs). */
export async function endpointFixture(
  options: {
    authenticators?: 'both' | 'hmac' | 'jwk' | 'none';
    maxBodyBytes?: number;
    bodyTimeoutMs?: number;
  } = {},
): Promise<EndpointFixture> {
  const keys = {
    jk1: await generateKey('jk1'),
    jk2: await generateKey('jk2'),
    jk3: await generateKey('jk3'),
    k1: await generateKey('k1'),
    attacker: await generateKey('jk1'),
  };
  const secrets = { hc1: randomSecret(), hc2: randomSecret() };
  const events: SvcLogEvent[] = [];
  const issued: EndpointFixture['issued'] = [];
  const hmac = hmacServiceClientAuth({
    clients: {
      hc1: { serviceId: 'svc-caller', secret: secrets.hc1 },
      hc2: { serviceId: 'svc-other', secret: secrets.hc2 },
    },
    log: (event) => events.push(event),
  });
  const jwk = jwkServiceClientAuth({
    clients: {
      jc1: { serviceId: 'svc-jwk', keys: [keys.jk1.publicJwk, keys.jk2.publicJwk] },
      jc2: { serviceId: 'svc-jwk2', keys: [keys.jk3.publicJwk] },
    },
    log: (event) => events.push(event),
  });
  const chosen = options.authenticators ?? 'both';
  const authenticators = chosen === 'none'
    ? undefined
    : chosen === 'hmac'
    ? [hmac]
    : chosen === 'jwk'
    ? [jwk]
    : [hmac, jwk];
  const endpoint = createTokenEndpoint({
    authenticators,
    issuer: ISSUER,
    log: (event) => events.push(event),
    ...(options.maxBodyBytes !== undefined ? { maxBodyBytes: options.maxBodyBytes } : {}),
    ...(options.bodyTimeoutMs !== undefined ? { bodyTimeoutMs: options.bodyTimeoutMs } : {}),
    async issue(caller, request) {
      issued.push({ caller, request });
      if (request.targetServiceId === 'svc-d') {
        throw new SvcInternalError('Target service "svc-d" is unreachable', {
          reason: 'target_unreachable',
        });
      }
      const published = TARGET_SCOPES[request.targetServiceId];
      if (published === undefined) {
        throw new CapabilityAuthError(`Unknown target service "${request.targetServiceId}"`, {
          status: 403,
          reason: 'unknown_target',
        });
      }
      for (const scope of request.scopes) {
        if (!published.includes(scope)) {
          throw new CapabilityAuthError(`Unknown scope "${scope}"`, {
            status: 403,
            reason: 'unknown_scope',
          });
        }
        if (!(GRANTS[caller.serviceId] ?? []).includes(scope)) {
          throw new CapabilityAuthError(`Scope "${scope}" is not granted`, {
            status: 403,
            reason: 'grant_denied',
          });
        }
      }
      const iat = Math.floor(Date.now() / 1000);
      const claims: CapabilityTokenClaims = {
        iss: ISSUER,
        sub: caller.serviceId,
        aud: request.targetServiceId,
        scp: [...new Set(request.scopes)].sort(),
        spa: 'service',
        jti: crypto.randomUUID(),
        iat,
        nbf: iat,
        exp: iat + Math.min(request.ttlSeconds ?? 120, MAX_TTL_SECONDS),
      };
      if (caller.confirmationJkt !== undefined) claims.cnf = { jkt: caller.confirmationJkt };
      const token = await signCapabilityToken(claims, {
        kid: keys.k1.kid,
        privateKey: keys.k1.privateKey,
      });
      return { token, expiresAt: new Date(claims.exp * 1000), scopes: claims.scp };
    },
  });
  let counter = 0;
  return {
    secrets,
    keys,
    events,
    issued,
    hmac,
    jwk,
    handle: (request, requestId) => endpoint(request, requestId ?? `plane-rid-${++counter}`),
  };
}

/** The baseline token request body of `hc1`. */
export function hmacBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    ...overrides,
  };
}

/** The baseline token request body of `jc1`. */
export function jwkBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    callerServiceId: 'svc-jwk',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    ...overrides,
  };
}

/** The parts of a signed request a test may change after signing. */
export interface SignedParts {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: string;
}

/** Signs an HMAC token request as `hc1` (or another client) and returns its editable parts. */
export async function signedHmacParts(
  fixture: EndpointFixture,
  options: {
    clientId?: string;
    secret?: string;
    body?: Record<string, unknown> | string;
    url?: string;
    method?: string;
    requestId?: string;
    timestampSeconds?: number;
  } = {},
): Promise<SignedParts> {
  const body = typeof options.body === 'string'
    ? options.body
    : JSON.stringify(options.body ?? hmacBody());
  const url = options.url ?? TOKEN_URL;
  const method = options.method ?? 'POST';
  const headers = await signHmacTokenRequest({
    clientId: options.clientId ?? 'hc1',
    clientSecret: options.secret ?? fixture.secrets.hc1,
    url,
    body,
    method,
    requestId: options.requestId ?? crypto.randomUUID(),
    ...(options.timestampSeconds !== undefined
      ? { timestampSeconds: options.timestampSeconds }
      : {}),
  });
  return { url, method, headers: { 'Content-Type': 'application/json', ...headers }, body };
}

/** A `Request` from (possibly edited) parts. */
export function requestFrom(parts: SignedParts): Request {
  const init: RequestInit = { method: parts.method, headers: parts.headers };
  if (parts.method !== 'GET' && parts.method !== 'HEAD') init.body = parts.body;
  return new Request(parts.url, init);
}

/** Signs a JWK token request as `jc1` with `jk1` unless told otherwise. */
export async function signedJwkParts(
  fixture: EndpointFixture,
  options: {
    clientId?: string;
    key?: FixtureKey;
    keyId?: string;
    body?: Record<string, unknown> | string;
    url?: string;
    method?: string;
    requestId?: string;
    audience?: string;
    ttlSeconds?: number;
    nowSeconds?: number;
  } = {},
): Promise<SignedParts> {
  const body = typeof options.body === 'string'
    ? options.body
    : JSON.stringify(options.body ?? jwkBody());
  const url = options.url ?? TOKEN_URL;
  const method = options.method ?? 'POST';
  const requestId = options.requestId ?? crypto.randomUUID();
  const key = options.key ?? fixture.keys.jk1;
  const assertion = await signJwkTokenRequestAssertion({
    clientId: options.clientId ?? 'jc1',
    keyId: options.keyId ?? key.kid,
    privateKey: key.privateKey,
    audience: options.audience ?? ISSUER,
    url,
    body,
    method,
    requestId,
    ...(options.ttlSeconds !== undefined ? { ttlSeconds: options.ttlSeconds } : {}),
    ...(options.nowSeconds !== undefined ? { nowSeconds: options.nowSeconds } : {}),
  });
  return {
    url,
    method,
    headers: {
      'Content-Type': 'application/json',
      Authorization: `Svc-JWK ${assertion}`,
      'X-Request-Id': requestId,
    },
    body,
  };
}

/** The claims the shipped signer would put in a `jc1` assertion for `parts`, for forging. */
export async function forgedJwkParts(
  key: CryptoKey,
  header: Record<string, unknown>,
  claims: (base: Record<string, unknown>) => Record<string, unknown>,
  options: { body?: string; requestId?: string; url?: string } = {},
): Promise<SignedParts> {
  const body = options.body ?? JSON.stringify(jwkBody());
  const requestId = options.requestId ?? crypto.randomUUID();
  const url = options.url ?? TOKEN_URL;
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(body));
  const now = Math.floor(Date.now() / 1000);
  const base = {
    iss: 'jc1',
    sub: 'jc1',
    aud: ISSUER,
    htm: 'POST',
    htu: new URL(url).pathname + new URL(url).search,
    bh: encodeBase64Url(new Uint8Array(digest)),
    rid: requestId,
    iat: now,
    exp: now + 60,
    jti: crypto.randomUUID(),
  };
  const assertion = await signCompactEs256(header, claims(base), key);
  return {
    url,
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      Authorization: `Svc-JWK ${assertion}`,
      'X-Request-Id': requestId,
    },
    body,
  };
}

/** Decodes a token's claims (no verification: the tests check what was minted). */
export function tokenClaims(token: string): Record<string, unknown> {
  const segment = token.split('.')[1];
  const padded = segment.replace(/-/g, '+').replace(/_/g, '/');
  const binary = atob(padded + '='.repeat((4 - (padded.length % 4)) % 4));
  const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
  return JSON.parse(new TextDecoder().decode(bytes));
}

/** Asserts both no-store headers. */
export function assertNoStore(response: Response): void {
  assert.equal(response.headers.get('Cache-Control'), 'no-store');
  assert.equal(response.headers.get('Pragma'), 'no-cache');
}

/** Asserts a caller-auth 401 with no-store headers and a challenge for `scheme`. */
export async function assertUnauthorized(response: Response, scheme = 'Svc-HMAC-SHA256') {
  assert.equal(response.status, 401);
  assertNoStore(response);
  const challenge = response.headers.get('WWW-Authenticate') ?? '';
  assert.ok(
    challenge.toLowerCase().includes(scheme.toLowerCase()),
    `challenge ${challenge} names ${scheme}`,
  );
  const body = await response.json();
  assert.equal(body.code, 'capability_auth');
  assert.equal(body.status, 401);
  assert.equal(body.retryable, false);
  assert.equal('token' in body, false);
  return body;
}

/** Reads a 200 token response, asserting its shape, and returns the body and decoded claims. */
export async function assertIssued(response: Response) {
  assert.equal(response.status, 200, await response.clone().text());
  assertNoStore(response);
  const body = await response.json();
  assert.equal(body.tokenType, 'svc-capability');
  assert.equal(typeof body.token, 'string');
  assert.ok(!Number.isNaN(Date.parse(body.expiresAt)));
  assert.equal(typeof body.expiresIn, 'number');
  return { body, claims: tokenClaims(body.token) };
}

/** The refusal events of one kind, for the given request id. */
export function refusalEvents(
  fixture: EndpointFixture,
  event: string,
  requestId?: string,
): SvcLogEvent[] {
  return fixture.events.filter((e) =>
    e.event === event && (requestId === undefined || e.requestId === requestId)
  );
}
