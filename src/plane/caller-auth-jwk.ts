/**
 * JWK caller authentication (asymmetric): `Authorization: Svc-JWK <compact JWS>`, a short-lived
 * ES256 assertion bound to this request (method, path with query, body hash, request id) and to
 * this plane (`aud` = the plane issuer).
 *
 * The client is named by `iss` (which must equal `sub`) and the header `kid` selects one of THAT
 * client's registered public keys; a key is never taken from the assertion itself, so `jwk`,
 * `jku`, `x5u`, `x5c` and every other header member are refused. The thumbprint of the key that
 * verified becomes the caller's `confirmationJkt`, which the plane stamps as `cnf.jkt`.
 *
 * @module
 */
import { decodeBase64Url, isCanonicalBase64Url } from '../core/base64url.ts';
import { capabilityKeyThumbprint } from '../core/capability-token.ts';
import type { SvcLogOption } from '../core/logging.ts';
import { acceptRequestId, SVC_REQUEST_ID_HEADER } from '../core/request-id.ts';
import {
  encodedRequestBodyHash,
  JWK_CALLER_ASSERTION_TYP,
  JWK_CALLER_AUTH_SCHEME,
  MAX_JWK_ASSERTION_TTL_SECONDS,
  requestPathWithQuery,
} from '../caller/token-request-signing.ts';
import {
  type AuthenticatedCaller,
  type CallerAuthContext,
  type CallerAuthenticator,
  parseAuthorization,
} from './caller-auth.ts';
import {
  boundedIntegerOption,
  CallerAuthRefusal,
  type ConfigurationRefuser,
  configurationRefuser,
  type Once,
  once,
  refusalLoggingAuthenticator,
  refuseUnknownOptions,
  registeredClients,
} from './caller-auth-scheme.ts';

export {
  JWK_CALLER_ASSERTION_TYP,
  JWK_CALLER_AUTH_SCHEME,
  MAX_JWK_ASSERTION_TTL_SECONDS,
  signJwkTokenRequestAssertion,
  type SignJwkTokenRequestAssertionInput,
} from '../caller/token-request-signing.ts';

/** Clock skew accepted on the assertion's `iat`, `nbf` and `exp`. */
export const JWK_ASSERTION_CLOCK_SKEW_SECONDS = 30;
/** Assertions longer than this are refused before parsing. */
export const MAX_JWK_ASSERTION_BYTES = 4096;
/** Event emitted for every refused JWK token request. */
export const JWK_UNAUTHORIZED_EVENT = 'svc.caller_auth.jwk_unauthorized';

/** One registered JWK client. */
export interface JwkServiceClient {
  /** The service the client acts for. */
  serviceId: string;
  /** Public P-256 JWKs, each with a distinct `kid`. Register two while rotating. */
  keys: readonly JsonWebKey[];
}

/** Options of {@link jwkServiceClientAuth}. */
export interface JwkServiceClientAuthOptions {
  /** Registered clients by client id (the assertion's `iss`). */
  clients: Record<string, JwkServiceClient>;
  /** Longest accepted `exp - iat`; default and maximum 300. */
  maxAssertionTtlSeconds?: number;
  /** Sink of `svc.caller_auth.jwk_unauthorized` events. */
  log?: SvcLogOption;
  /** Clock in milliseconds; default `Date.now`. */
  now?: () => number;
}

const CHALLENGE = `${JWK_CALLER_AUTH_SCHEME} realm="svc-capability-token"`;
const ALLOWED_HEADER_MEMBERS = new Set(['alg', 'kid', 'typ']);
const PRIVATE_KEY_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k', 'oth'];
const P256 = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const ES256 = { name: 'ECDSA', hash: 'SHA-256' } as const;
const SIGNATURE_BYTES = 64;
const COORDINATE_LENGTH = 43;
const MAX_JTI_LENGTH = 256;
const ascii = new TextEncoder();
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

interface RegisteredKey {
  key: Once<CryptoKey>;
  thumbprint: Once<string>;
}

interface RegisteredClient {
  serviceId: string;
  keys: Map<string, RegisteredKey>;
}

const refuseConfig: ConfigurationRefuser = configurationRefuser('jwkServiceClientAuth');

function isCoordinate(value: unknown): value is string {
  return typeof value === 'string' && value.length === COORDINATE_LENGTH &&
    isCanonicalBase64Url(value);
}

function registeredKey(jwk: unknown, where: string): [string, RegisteredKey] {
  const record = jwk as Record<string, unknown> | null;
  if (record === null || typeof record !== 'object' || Array.isArray(record)) {
    refuseConfig(`${where} is not a JWK`);
  }
  if (PRIVATE_KEY_MEMBERS.some((member) => member in record)) {
    refuseConfig(`${where} carries a private member; register the public key only`);
  }
  if (
    record.kty !== 'EC' || record.crv !== 'P-256' || !isCoordinate(record.x) ||
    !isCoordinate(record.y)
  ) {
    refuseConfig(`${where} must be a public P-256 EC JWK`);
  }
  if (typeof record.kid !== 'string' || record.kid.length === 0) {
    refuseConfig(`${where} needs a non-empty kid`);
  }
  if (record.use !== undefined && record.use !== 'sig') {
    refuseConfig(`${where} is not a signing key`);
  }
  if (record.alg !== undefined && record.alg !== 'ES256') {
    refuseConfig(`${where} is not an ES256 key`);
  }
  const publicJwk = { kty: 'EC', crv: 'P-256', x: record.x, y: record.y };
  return [record.kid, {
    key: once(async () => {
      try {
        return await crypto.subtle.importKey('jwk', publicJwk, P256, false, ['verify']);
      } catch {
        refuseConfig(`${where} does not import as a P-256 public key`);
      }
    }),
    thumbprint: once(() => capabilityKeyThumbprint(publicJwk)),
  }];
}

function jwkClients(clients: unknown): Map<string, RegisteredClient> {
  return registeredClients(clients, ['serviceId', 'keys'], refuseConfig, (clientId, client) => {
    const { keys } = client;
    if (!Array.isArray(keys) || keys.length === 0) {
      refuseConfig(`client ${clientId} needs at least one public key`);
    }
    const byKid = new Map<string, RegisteredKey>();
    keys.forEach((jwk, index) => {
      const [kid, key] = registeredKey(jwk, `client ${clientId} keys[${index}]`);
      if (byKid.has(kid)) refuseConfig(`client ${clientId} registers kid ${kid} twice`);
      byKid.set(kid, key);
    });
    return { keys: byKid };
  });
}

/** One refusal: the error for the caller plus the registered client id for the log. */
class JwkRefusal extends CallerAuthRefusal {
  constructor(reason: string, message: string, clientId?: string) {
    super(reason, message, CHALLENGE, clientId);
  }
}

interface ParsedAssertion {
  header: Record<string, unknown>;
  claims: Record<string, unknown>;
  signingInput: string;
  signature: Uint8Array;
}

function decodeJsonObject(segment: string): Record<string, unknown> | undefined {
  const bytes = decodeBase64Url(segment);
  if (bytes === undefined) return undefined;
  try {
    const value = JSON.parse(strictUtf8.decode(bytes));
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

function parseAssertion(value: string): ParsedAssertion {
  const segments = value.length <= MAX_JWK_ASSERTION_BYTES ? value.split('.') : [];
  if (segments.length !== 3 || segments.some((segment) => segment.length === 0)) {
    throw new JwkRefusal('assertion_malformed', 'The assertion is not a compact JWS');
  }
  const header = decodeJsonObject(segments[0]);
  const claims = decodeJsonObject(segments[1]);
  const signature = decodeBase64Url(segments[2]);
  if (header === undefined || claims === undefined || signature === undefined) {
    throw new JwkRefusal('assertion_malformed', 'The assertion is not a compact JWS');
  }
  return { header, claims, signingInput: `${segments[0]}.${segments[1]}`, signature };
}

function checkHeader(header: Record<string, unknown>): string {
  for (const member of Object.keys(header)) {
    if (!ALLOWED_HEADER_MEMBERS.has(member)) {
      throw new JwkRefusal(
        'assertion_header_not_allowed',
        `Header member ${member} is not allowed`,
      );
    }
  }
  if (header.alg !== 'ES256') {
    throw new JwkRefusal('assertion_algorithm_not_allowed', 'The assertion must be ES256');
  }
  if (header.typ !== JWK_CALLER_ASSERTION_TYP) {
    throw new JwkRefusal(
      'assertion_type_mismatch',
      `The assertion typ must be ${JWK_CALLER_ASSERTION_TYP}`,
    );
  }
  if (typeof header.kid !== 'string' || header.kid.length === 0) {
    throw new JwkRefusal('assertion_kid_missing', 'The assertion names no key id');
  }
  return header.kid;
}

function isNumericDate(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0;
}

function checkTimes(
  claims: Record<string, unknown>,
  nowSeconds: number,
  maxTtl: number,
  clientId: string,
): void {
  const { iat, exp, nbf } = claims;
  if (!isNumericDate(iat) || !isNumericDate(exp) || (nbf !== undefined && !isNumericDate(nbf))) {
    throw new JwkRefusal('assertion_time_malformed', 'iat and exp must be NumericDates', clientId);
  }
  if (exp <= iat || exp - iat > maxTtl) {
    throw new JwkRefusal(
      'assertion_lifetime_too_long',
      `The assertion lifetime must be at most ${maxTtl} s`,
      clientId,
    );
  }
  const skew = JWK_ASSERTION_CLOCK_SKEW_SECONDS;
  if (iat > nowSeconds + skew) {
    throw new JwkRefusal(
      'assertion_issued_in_future',
      'The assertion is issued in the future',
      clientId,
    );
  }
  if (nbf !== undefined && nbf > nowSeconds + skew) {
    throw new JwkRefusal('assertion_not_yet_valid', 'The assertion is not valid yet', clientId);
  }
  if (nowSeconds > exp + skew) {
    throw new JwkRefusal('assertion_expired', 'The assertion has expired', clientId);
  }
}

function expectClaim(
  actual: unknown,
  expected: string,
  reason: string,
  message: string,
  clientId: string,
): void {
  if (actual !== expected) throw new JwkRefusal(reason, message, clientId);
}

function checkRequestBinding(
  claims: Record<string, unknown>,
  request: Request,
  body: Uint8Array,
  clientId: string,
): void {
  const requestId = acceptRequestId(request.headers.get(SVC_REQUEST_ID_HEADER));
  if (requestId === undefined) {
    throw new JwkRefusal('request_id_missing', 'A valid X-Request-Id is required', clientId);
  }
  expectClaim(claims.htm, request.method.toUpperCase(), 'method_mismatch', 'htm differs', clientId);
  expectClaim(
    claims.htu,
    requestPathWithQuery(request.url),
    'url_mismatch',
    'htu differs',
    clientId,
  );
  expectClaim(claims.rid, requestId, 'request_id_mismatch', 'rid differs', clientId);
  expectClaim(
    claims.bh,
    encodedRequestBodyHash(body),
    'body_hash_mismatch',
    'bh differs',
    clientId,
  );
}

/** What a function threw, or `undefined` when it returned. */
function thrownBy(check: () => void): unknown {
  try {
    check();
    return undefined;
  } catch (error) {
    return error;
  }
}

/**
 * Caller authentication with request-bound ES256 assertions signed by a registered client key.
 * Every refusal is a 401 with the `Svc-JWK` challenge and emits
 * `svc.caller_auth.jwk_unauthorized` (level `warn`, `requestId`, `reason`, and `clientId` once
 * `iss` names a registered client); the assertion itself is never logged. Replay is bounded by
 * the assertion lifetime plus 30 s of skew.
 */
export function jwkServiceClientAuth(options: JwkServiceClientAuthOptions): CallerAuthenticator {
  if (options === null || typeof options !== 'object') refuseConfig('options object required');
  refuseUnknownOptions(options, ['clients', 'maxAssertionTtlSeconds', 'log', 'now'], refuseConfig);
  const clients = jwkClients(options.clients);
  const maxTtl = boundedIntegerOption(
    options.maxAssertionTtlSeconds,
    MAX_JWK_ASSERTION_TTL_SECONDS,
    MAX_JWK_ASSERTION_TTL_SECONDS,
    'maxAssertionTtlSeconds',
    refuseConfig,
  );
  const now = options.now ?? Date.now;

  async function verify(
    request: Request,
    body: Uint8Array,
    context: CallerAuthContext,
  ): Promise<AuthenticatedCaller> {
    const { value } = parseAuthorization(request.headers.get('Authorization'), CHALLENGE);
    const assertion = parseAssertion(value);
    const kid = checkHeader(assertion.header);
    const clientId = assertion.claims.iss;
    const client = typeof clientId === 'string' ? clients.get(clientId) : undefined;
    if (client === undefined) throw new JwkRefusal('unknown_client', 'Unknown client');
    const key = client.keys.get(kid);
    if (key === undefined) {
      throw new JwkRefusal(
        'unknown_key',
        'The key id is not registered for this client',
        clientId as string,
      );
    }
    const id = clientId as string;
    const verifying = assertion.signature.length === SIGNATURE_BYTES
      ? crypto.subtle.verify(
        ES256,
        key.key.value ?? await key.key(),
        assertion.signature as BufferSource,
        ascii.encode(assertion.signingInput),
      )
      : undefined;
    // The checks that do not need the signature run while it is being verified, and what they
    // refuse is raised only after it: a bad signature is still the refusal a forgery gets.
    const claimsProblem = thrownBy(() => checkClaims(assertion.claims, request, body, context, id));
    if (verifying === undefined || !(await verifying)) {
      throw new JwkRefusal('signature_mismatch', 'The assertion signature does not verify', id);
    }
    if (claimsProblem !== undefined) throw claimsProblem;
    return {
      clientId: id,
      serviceId: client.serviceId,
      confirmationJkt: key.thumbprint.value ?? await key.thumbprint(),
    };
  }

  /** Subject, audience, times, jti and the request binding, in that order. */
  function checkClaims(
    claims: Record<string, unknown>,
    request: Request,
    body: Uint8Array,
    context: CallerAuthContext,
    id: string,
  ): void {
    expectClaim(claims.sub, id, 'subject_mismatch', 'sub must equal iss', id);
    expectClaim(claims.aud, context.issuer, 'audience_mismatch', 'aud is not this plane', id);
    checkTimes(claims, Math.floor(now() / 1000), maxTtl, id);
    if (
      typeof claims.jti !== 'string' || claims.jti.length === 0 ||
      claims.jti.length > MAX_JTI_LENGTH
    ) {
      throw new JwkRefusal('assertion_jti_missing', 'The assertion needs a jti', id);
    }
    checkRequestBinding(claims, request, body, id);
  }

  return refusalLoggingAuthenticator({
    scheme: JWK_CALLER_AUTH_SCHEME,
    challenge: CHALLENGE,
    event: JWK_UNAUTHORIZED_EVENT,
    log: options.log,
    logLabel: 'jwkServiceClientAuth: `log`',
    verify,
  });
}
