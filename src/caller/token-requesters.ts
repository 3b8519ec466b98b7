/**
 * The three shipped token requesters: how a service obtains capability tokens from the control
 * plane for its calls to other services.
 *
 * - {@link controlPlaneHmacTokenRequester}: shared-secret fallback over HTTP.
 * - {@link controlPlaneJwkTokenRequester}: request-bound ES256 assertions over HTTP; the tokens are
 *   bound to the caller key, and the requester carries the matching proof signer.
 * - {@link controlPlaneRpcTokenRequester}: a Workers service binding to the plane (same account).
 *
 * All three cache tokens (see `token-request-cache.ts`), share one fetch between concurrent
 * sessions, never cache a failure, and refuse locally to send a delegated `subject`: only
 * control-plane code may assert one. What the plane answers is read into a token or a typed
 * failure in `token-answer.ts`.
 *
 * @module
 */
import { refuseUnknownKeys } from '../core/config-values.ts';
import { CapabilityAuthError, SvcConfigurationError } from '../core/errors.ts';
import { httpBaseUrlProblem, parseConfiguredUrl } from '../core/http-url.ts';
import { generateRequestId } from '../core/request-id.ts';
import type { HmacSha256Key } from '../core/sha256.ts';
import type { ProofSigner, TokenRequest, TokenRequester } from './ability-session.ts';
import { jwkCapabilityProofSigner } from './proof-signer.ts';
import {
  fetchedTokenFrom,
  invalidResponse,
  MAX_TOKEN_RESPONSE_BYTES,
  parseJson,
  type ReadCapabilityToken,
  readResponseText,
  receivedErrorAsTokenFailure,
  retryAfterMsOf,
  tokenEndpointFailure,
  tokenFromAnswer,
} from './token-answer.ts';
import {
  capabilityTokenCacheKey,
  createCapabilityTokenCache,
  type FetchedCapabilityToken,
  normalizeRequestedScopes,
} from './token-request-cache.ts';
import {
  checkPrivateP256Jwk,
  DEFAULT_CONTROL_PLANE_ISSUER,
  importCallerSigningKey,
  importHmacClientSecret,
  isWellFormedClientId,
  JWK_CALLER_AUTH_SCHEME,
  signHmacTokenRequest,
  signJwkTokenRequestAssertion,
} from './token-request-signing.ts';
import { CapabilityTokenRequestError } from './token-request-error.ts';

export { MAX_TOKEN_RESPONSE_BYTES, tokenEndpointFailure } from './token-answer.ts';

/** Path of the control plane's token endpoint. */
export const CAPABILITY_TOKEN_ENDPOINT_PATH = '/.well-known/svc/capability-token';

/** A token request as the requesters accept it: the session's request, plus an optional TTL. */
export interface RequesterTokenRequest extends TokenRequest {
  /** Requested lifetime in seconds; overrides the requester's `ttlSeconds`. */
  ttlSeconds?: number;
}

/** The fetch a requester uses: the global `fetch`, or an in-process plane's `fetch`. */
export type TokenEndpointFetch = (request: Request) => Promise<Response>;

/** Options of {@link controlPlaneHmacTokenRequester}. */
export interface ControlPlaneHmacTokenRequesterOptions {
  /** The HMAC client id registered on the plane. */
  clientId: string;
  /** The plane's base URL, or the token endpoint URL itself. */
  controlPlaneUrl: string | URL;
  /** The shared secret registered for the client. */
  clientSecret: string;
  /** Transport; default the global `fetch`. Pass `plane.fetch` to reach an in-process plane. */
  fetch?: TokenEndpointFetch;
  /** Requested token lifetime in seconds; default the plane's. */
  ttlSeconds?: number;
}

/** Options of {@link controlPlaneJwkTokenRequester}. */
export interface ControlPlaneJwkTokenRequesterOptions {
  /** The JWK client id registered on the plane. */
  clientId: string;
  /** The plane's base URL, or the token endpoint URL itself. */
  controlPlaneUrl: string | URL;
  /** The `kid` under which the public half of `privateJwk` is registered. */
  keyId: string;
  /** The caller's private P-256 JWK. */
  privateJwk: JsonWebKey;
  /** The plane's issuer, the audience of the assertions; default `control-plane`. */
  issuer?: string;
  /** Transport; default the global `fetch`. Pass `plane.fetch` to reach an in-process plane. */
  fetch?: TokenEndpointFetch;
  /** Requested token lifetime in seconds; default the plane's. */
  ttlSeconds?: number;
}

/**
 * The plane-side entrypoint a service binding exposes for token requests (the plane's
 * `capabilityTokenEntrypoint`, or your own).
 */
export interface CapabilityTokenBinding {
  /**
   * Mints a token for the binding's caller. Resolves with the token endpoint's 200 body (or the
   * bare token), or with a refusal as data: `{ error: { code, status, retryable, reason?,
   * message } }`. A rejection carrying the taxonomy fields is accepted too (an in-process
   * stand-in), but over a binding only data is sure to arrive intact.
   */
  requestCapabilityToken(request: {
    callerServiceId: string;
    targetServiceId: string;
    scopes: readonly string[];
    abilityId?: string;
    ttlSeconds?: number;
  }): Promise<unknown>;
}

/** Options of {@link controlPlaneRpcTokenRequester}. */
export interface ControlPlaneRpcTokenRequesterOptions {
  /** The service binding to the plane's token entrypoint. */
  binding: CapabilityTokenBinding;
  /** This service's id; the entrypoint pins it, so it must match what the plane expects. */
  callerServiceId: string;
  /** Requested token lifetime in seconds; default the plane's. */
  ttlSeconds?: number;
}

function refuseConfig(label: string, message: string): never {
  throw new SvcConfigurationError(`${label}: ${message}`, { reason: 'invalid_token_requester' });
}

/** Refuses options that are not an object, or that carry a key the requester does not read. */
function checkOptionKeys(options: unknown, known: readonly string[], label: string): void {
  if (options === null || typeof options !== 'object') {
    refuseConfig(label, 'options object required');
  }
  refuseUnknownKeys(options, known, label, { reason: 'invalid_token_requester' });
}

const HMAC_REQUESTER_OPTIONS: readonly string[] = [
  'clientId',
  'clientSecret',
  'controlPlaneUrl',
  'fetch',
  'ttlSeconds',
];
const JWK_REQUESTER_OPTIONS: readonly string[] = [
  'clientId',
  'keyId',
  'privateJwk',
  'issuer',
  'controlPlaneUrl',
  'fetch',
  'ttlSeconds',
];
const RPC_REQUESTER_OPTIONS: readonly string[] = ['binding', 'callerServiceId', 'ttlSeconds'];

function checkTtl(label: string, ttl: unknown): number | undefined {
  if (ttl === undefined) return undefined;
  if (typeof ttl !== 'number' || !Number.isSafeInteger(ttl) || ttl <= 0) {
    refuseConfig(label, '`ttlSeconds` must be a positive integer');
  }
  return ttl;
}

function checkFetch(label: string, fetchOption: unknown): TokenEndpointFetch {
  if (fetchOption === undefined) return (request) => fetch(request);
  if (typeof fetchOption !== 'function') refuseConfig(label, '`fetch` must be a function');
  return fetchOption as TokenEndpointFetch;
}

/**
 * The token endpoint URL for a plane base URL: the base itself when it already ends with the
 * endpoint path, otherwise the endpoint path appended to the base path (a plane mounted under a
 * prefix keeps its prefix). Query and fragment of the base are dropped.
 */
export function capabilityTokenEndpointUrl(controlPlaneUrl: string | URL): URL {
  const url = new URL(String(controlPlaneUrl));
  url.search = '';
  url.hash = '';
  if (!url.pathname.endsWith(CAPABILITY_TOKEN_ENDPOINT_PATH)) {
    url.pathname = `${url.pathname.replace(/\/+$/, '')}${CAPABILITY_TOKEN_ENDPOINT_PATH}`;
  }
  return url;
}

/** The token endpoint of a configured `controlPlaneUrl`, refused as `httpService` refuses a url. */
function endpointFor(label: string, controlPlaneUrl: unknown): URL {
  const url = parseConfiguredUrl(controlPlaneUrl);
  if (url === undefined) {
    return refuseConfig(label, '`controlPlaneUrl` must be an absolute http: or https: URL');
  }
  const problem = httpBaseUrlProblem(url);
  if (problem !== undefined) refuseConfig(label, `\`controlPlaneUrl\` ${problem}`);
  return capabilityTokenEndpointUrl(url);
}

/** Refuses, before anything is sent, a request that carries a delegated subject. */
function refuseSubject(request: unknown): void {
  if ((request as { subject?: unknown } | null)?.subject !== undefined) {
    throw new CapabilityAuthError(
      'A token requester may not assert a delegated subject; only control-plane code can',
      { status: 403, reason: 'subject_not_allowed' },
    );
  }
}

/** A request reduced to what is sent and cached: scopes normalised, TTL resolved. */
interface PreparedRequest {
  callerServiceId: string;
  targetServiceId: string;
  scopes: string[];
  abilityId?: string;
  ttlSeconds?: number;
}

function prepare(request: RequesterTokenRequest, defaultTtl: number | undefined): PreparedRequest {
  refuseSubject(request);
  if (!Array.isArray(request?.scopes)) {
    throw new SvcConfigurationError('A token request needs a scopes array', {
      reason: 'invalid_token_request',
    });
  }
  if (request.signal !== undefined && !(request.signal instanceof AbortSignal)) {
    throw new SvcConfigurationError('A token request `signal` must be an AbortSignal', {
      reason: 'invalid_token_request',
    });
  }
  const prepared: PreparedRequest = {
    callerServiceId: request.callerServiceId,
    targetServiceId: request.targetServiceId,
    scopes: normalizeRequestedScopes(request.scopes),
  };
  if (request.abilityId !== undefined) prepared.abilityId = request.abilityId;
  // Checked here rather than left to the plane: a malformed TTL is a caller bug, refused before
  // anything is signed or sent, with the same rule as the requester option.
  if (
    request.ttlSeconds !== undefined &&
    (typeof request.ttlSeconds !== 'number' || !Number.isSafeInteger(request.ttlSeconds) ||
      request.ttlSeconds <= 0)
  ) {
    throw new SvcConfigurationError('A token request `ttlSeconds` must be a positive integer', {
      reason: 'invalid_token_request',
    });
  }
  const ttl = request.ttlSeconds ?? defaultTtl;
  if (ttl !== undefined) prepared.ttlSeconds = ttl;
  return prepared;
}

/**
 * The token a plane answered, refused when it is not what was asked for: not a compact JWS,
 * another audience or caller, or fewer scopes. Presented, such a token would reach a service it
 * was not meant for (which could replay it where it is valid) or be refused on every call while
 * it sat in the cache; so it is neither cached nor sent.
 */
function answeringRequest(
  fetched: ReadCapabilityToken,
  request: PreparedRequest,
): FetchedCapabilityToken {
  const { claims } = fetched;
  const scopes = Array.isArray(claims?.scp) ? claims.scp : [];
  const problem = claims === undefined
    ? 'is not a compact JWS with a JSON claim set'
    : claims.aud !== request.targetServiceId
    ? `is for audience ${JSON.stringify(claims.aud)}, not ${request.targetServiceId}`
    : claims.sub !== request.callerServiceId
    ? `names another caller than ${request.callerServiceId}`
    : request.scopes.some((scope) => !scopes.includes(scope))
    ? 'lacks requested scopes'
    : undefined;
  if (problem !== undefined) {
    throw invalidResponse(undefined, `The capability token the control plane answered ${problem}`);
  }
  return fetched;
}

async function postTokenRequest(
  endpoint: URL,
  fetchToken: TokenEndpointFetch,
  body: string,
  headers: Record<string, string>,
  requestId: string,
  signal: AbortSignal,
): Promise<ReadCapabilityToken> {
  // Built outside the `try`: a request that cannot be built is a bug or a configuration
  // mistake, and must not be reported as a retryable outage of the plane.
  const request = new Request(endpoint, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body,
    // A redirect would carry the signed request to a place the configuration never named.
    redirect: 'manual',
    // Aborted once no session waits for this token any more.
    signal,
  });
  let response: Response;
  try {
    response = await fetchToken(request);
  } catch (cause) {
    throw new CapabilityTokenRequestError(
      'The control plane could not be reached for a capability token',
      { code: 'internal', status: 503, retryable: true, reason: 'control_plane_unreachable' },
      { requestId, cause },
    );
  }
  const read = await readResponseText(response);
  const parsed = 'text' in read ? parseJson(read.text) : undefined;
  if (!response.ok) {
    const failure = tokenEndpointFailure(response.status, parsed, requestId);
    const retryAfterMs = retryAfterMsOf(response.headers.get('Retry-After'));
    if (retryAfterMs !== undefined) Object.assign(failure, { retryAfterMs });
    throw failure;
  }
  if ('problem' in read && read.problem === 'too_large') {
    throw invalidResponse(
      requestId,
      `The control plane's token response is larger than ${MAX_TOKEN_RESPONSE_BYTES} bytes`,
    );
  }
  return fetchedTokenFrom(parsed, requestId);
}

/** Wraps a fetch-one-token function with the cache and the local subject refusal. */
function cachingRequester(
  defaultTtl: number | undefined,
  fetchOne: (request: PreparedRequest, signal: AbortSignal) => Promise<ReadCapabilityToken>,
): TokenRequester {
  const cache = createCapabilityTokenCache();
  return async (request: RequesterTokenRequest) => {
    const prepared = prepare(request, defaultTtl);
    const key = capabilityTokenCacheKey(prepared);
    // A token the service refused is never handed back from the cache.
    if (typeof request.refusedToken === 'string') cache.forget(key, request.refusedToken);
    return await cache.get(
      key,
      async (signal) => answeringRequest(await fetchOne(prepared, signal), prepared),
      request.signal,
    );
  };
}

/**
 * Requests tokens from the plane's token endpoint with HMAC caller authentication (the
 * shared-secret fallback; prefer {@link controlPlaneJwkTokenRequester}). The secret is imported
 * once; each request gets a fresh `X-Request-Id` and timestamp.
 */
export function controlPlaneHmacTokenRequester(
  options: ControlPlaneHmacTokenRequesterOptions,
): TokenRequester {
  const label = 'controlPlaneHmacTokenRequester';
  checkOptionKeys(options, HMAC_REQUESTER_OPTIONS, label);
  if (!isWellFormedClientId(options.clientId)) refuseConfig(label, '`clientId` is malformed');
  if (typeof options.clientSecret !== 'string' || options.clientSecret.length === 0) {
    refuseConfig(label, '`clientSecret` must be a non-empty string');
  }
  const endpoint = endpointFor(label, options.controlPlaneUrl);
  const fetchToken = checkFetch(label, options.fetch);
  const ttl = checkTtl(label, options.ttlSeconds);
  let key: Promise<HmacSha256Key> | undefined;
  return cachingRequester(ttl, async (request, signal) => {
    const body = JSON.stringify(request);
    const requestId = generateRequestId();
    const headers = await signHmacTokenRequest({
      clientId: options.clientId,
      clientSecret: await (key ??= importHmacClientSecret(options.clientSecret, label)),
      url: endpoint,
      body,
      requestId,
    });
    return await postTokenRequest(endpoint, fetchToken, body, headers, requestId, signal);
  });
}

/**
 * Requests tokens from the plane's token endpoint with a request-bound ES256 assertion. The
 * plane binds every token to this key (`cnf.jkt`), so the requester carries
 * `proveTokenPossession = jwkCapabilityProofSigner({ privateJwk })`, which sessions use
 * automatically. `issuer` must equal the plane's issuer (its `issuer` option, else its `id`,
 * else `control-plane`).
 */
export function controlPlaneJwkTokenRequester(
  options: ControlPlaneJwkTokenRequesterOptions,
): TokenRequester & { proveTokenPossession: ProofSigner } {
  const label = 'controlPlaneJwkTokenRequester';
  checkOptionKeys(options, JWK_REQUESTER_OPTIONS, label);
  if (!isWellFormedClientId(options.clientId)) refuseConfig(label, '`clientId` is malformed');
  if (typeof options.keyId !== 'string' || options.keyId.length === 0) {
    refuseConfig(label, '`keyId` must be a non-empty string');
  }
  checkPrivateP256Jwk(options.privateJwk, label);
  const issuer = options.issuer ?? DEFAULT_CONTROL_PLANE_ISSUER;
  if (typeof issuer !== 'string' || issuer.length === 0) {
    refuseConfig(label, '`issuer` must be a non-empty string');
  }
  const endpoint = endpointFor(label, options.controlPlaneUrl);
  const fetchToken = checkFetch(label, options.fetch);
  const ttl = checkTtl(label, options.ttlSeconds);
  let key: Promise<CryptoKey> | undefined;
  const requester = cachingRequester(ttl, async (request, signal) => {
    const body = JSON.stringify(request);
    const requestId = generateRequestId();
    key ??= importCallerSigningKey(options.privateJwk, label).then((imported) =>
      imported.privateKey
    );
    const assertion = await signJwkTokenRequestAssertion({
      clientId: options.clientId,
      keyId: options.keyId,
      privateKey: await key,
      audience: issuer,
      url: endpoint,
      body,
      requestId,
    });
    const headers = {
      Authorization: `${JWK_CALLER_AUTH_SCHEME} ${assertion}`,
      'X-Request-Id': requestId,
    };
    return await postTokenRequest(endpoint, fetchToken, body, headers, requestId, signal);
  });
  return Object.assign(requester, {
    proveTokenPossession: jwkCapabilityProofSigner({ privateJwk: options.privateJwk }),
  });
}

/**
 * Requests tokens over a private Workers service binding to the plane (same-account callers).
 * No assertion is sent and replay does not apply: the caller identity is pinned by the plane's
 * binding entrypoint, which must mint for its own configured caller and ignore any other claim
 * of identity. A session request naming another caller than `callerServiceId` is refused
 * locally. The entrypoint may answer with the token string or `{ token, expiresIn?,
 * expiresAt? }`, and refuses with `{ error: { code, status, retryable, reason?, message } }`:
 * refusals travel as data because Workers RPC keeps a thrown error's own properties only between
 * Workers that both enable `enhanced_error_serialization` (compatibility date 2026-04-21 or
 * later). A thrown error with the taxonomy fields is read the same way; one without them reads as
 * the plane unreachable (503, retryable). Every received field is re-validated by
 * `svcErrorInfo` and the message is cut to 512 characters.
 */
export function controlPlaneRpcTokenRequester(
  options: ControlPlaneRpcTokenRequesterOptions,
): TokenRequester {
  const label = 'controlPlaneRpcTokenRequester';
  checkOptionKeys(options, RPC_REQUESTER_OPTIONS, label);
  const binding = options.binding;
  if (
    binding === null || (typeof binding !== 'object' && typeof binding !== 'function') ||
    typeof (binding as { requestCapabilityToken?: unknown }).requestCapabilityToken !== 'function'
  ) {
    refuseConfig(label, '`binding` must expose requestCapabilityToken()');
  }
  if (typeof options.callerServiceId !== 'string' || options.callerServiceId.length === 0) {
    refuseConfig(label, '`callerServiceId` must be a non-empty string');
  }
  const ttl = checkTtl(label, options.ttlSeconds);
  return cachingRequester(ttl, async (request) => {
    if (
      request.callerServiceId !== undefined && request.callerServiceId !== options.callerServiceId
    ) {
      throw new CapabilityAuthError(
        `This requester obtains tokens for ${options.callerServiceId} only`,
        { status: 403, reason: 'caller_mismatch' },
      );
    }
    let answer: unknown;
    try {
      answer = await binding.requestCapabilityToken({
        ...request,
        callerServiceId: options.callerServiceId,
      });
    } catch (error) {
      throw receivedErrorAsTokenFailure(error);
    }
    return tokenFromAnswer(answer);
  });
}
