/**
 * The capability-token endpoint handler (`POST /.well-known/svc/capability-token`).
 *
 * Order of checks, each one answered before the next runs: method (405); body read with a hard
 * byte limit while streaming (413; the limit holds whatever `Content-Length` claims); caller
 * authentication (401, before the body is even parsed, so an unauthenticated request learns
 * nothing about its JSON or its subject); JSON shape (400); a caller-supplied `subject` (403);
 * the stated caller against the authenticated one (403); issuance (its own status). Every
 * response carries `Cache-Control: no-store` and `Pragma: no-cache`.
 *
 * @module
 */
import {
  CapabilityAuthError,
  SvcConfigurationError,
  type ValidationIssue,
} from '../core/errors.ts';
import {
  BODY_ABANDONED_HEADERS,
  BodyReadTimeout,
  discardBody,
  readBoundedBytes,
} from '../core/bounded-body.ts';
import { NO_STORE_HEADERS } from '../core/http-cache.ts';
import type { SvcLogEvent } from '../core/logging.ts';
import { problemFromError, problemResponse } from '../core/problem.ts';
import { planeRequestFailed } from './request-failure.ts';
import {
  HMAC_CALLER_AUTH_SCHEME,
  JWK_CALLER_AUTH_SCHEME,
} from '../caller/token-request-signing.ts';
import {
  type AuthenticatedCaller,
  authenticateTokenRequest,
  type CallerAuthenticator,
  CallerAuthError,
  combinedChallenge,
} from './caller-auth.ts';

/** Default largest token-request body, in bytes. */
export const DEFAULT_TOKEN_REQUEST_MAX_BODY_BYTES = 16 * 1024;
/** Default time allowed to receive the whole body, in milliseconds. */
export const DEFAULT_TOKEN_REQUEST_BODY_TIMEOUT_MS = 10_000;
/** Longest `targetServiceId`, scope or ability id accepted. */
export const MAX_TOKEN_REQUEST_ID_LENGTH = 128;
/** Most scopes one token request may ask for. */
export const MAX_TOKEN_REQUEST_SCOPES = 64;
/** Event emitted when a token request arrives at a plane without caller authentication. */
export const CALLER_AUTH_NOT_CONFIGURED_EVENT = 'svc.caller_auth.not_configured';
/** The failed check `svc.caller_auth.not_configured` names, as every caller-auth event does. */
export const CALLER_AUTH_NOT_CONFIGURED_REASON = 'no_caller_authentication';
/** The `tokenType` of every token the endpoint returns. */
export const CAPABILITY_TOKEN_TYPE = 'svc-capability';

/** The accepted body of a token request; every other member is ignored. */
export interface TokenRequestBody {
  /** Must equal the authenticated caller's service id. */
  callerServiceId: string;
  /** The service the token is for. */
  targetServiceId: string;
  /** Requested scopes. */
  scopes: string[];
  /** When given, the ability must exist on the target. */
  abilityId?: string;
  /** Requested lifetime; the issuer caps it. */
  ttlSeconds?: number;
}

/** What the issuing function returns. */
export interface IssuedToken {
  token: string;
  expiresAt: Date;
  scopes: string[];
}

/** What the issuing function learns about the request besides its body. */
export interface TokenIssueContext {
  /** The request id the plane assigned. */
  requestId: string;
  /** The plane's request context (e.g. Hono's `c`), passed through untouched when given. */
  requestContext?: unknown;
}

/** The token endpoint handler: one request in, one response out, never a throw. */
export type TokenEndpointHandler = (
  request: Request,
  requestId: string,
  requestContext?: unknown,
) => Promise<Response>;

/** Options of {@link createTokenEndpoint}. */
export interface TokenEndpointOptions {
  /** Who may request tokens; `undefined` or empty refuses every request with 401. */
  authenticators: CallerAuthenticator[] | undefined;
  /** The plane issuer (the audience of JWK caller assertions). */
  issuer: string;
  /** Mints the token (runs the full grant check). Its taxonomy errors keep their status. */
  issue(
    caller: AuthenticatedCaller,
    request: TokenRequestBody,
    context: TokenIssueContext,
  ): Promise<IssuedToken>;
  /** Event sink (`svc.caller_auth.not_configured`). */
  log: (event: SvcLogEvent, c?: unknown) => void;
  /** Largest body in bytes; default 16 KiB. */
  maxBodyBytes?: number;
  /** Time allowed to receive the body; default 10 s. */
  bodyTimeoutMs?: number;
}

/** The reason of every caller-auth 401 body: the specific check is logged, never answered. */
export const CALLER_UNAUTHENTICATED_REASON = 'caller_unauthenticated';

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

// A 401 must carry a challenge (RFC 9110, section 11.6.1). A plane with no authenticator still
// names the schemes this endpoint speaks; none succeeds until one is configured, and
// `svc.caller_auth.not_configured` tells the operator why.
const UNCONFIGURED_CHALLENGE = [HMAC_CALLER_AUTH_SCHEME, JWK_CALLER_AUTH_SCHEME]
  .map((scheme) => `${scheme} realm="svc-capability-token"`)
  .join(', ');

function positiveInteger(value: unknown, fallback: number, field: string): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    throw new SvcConfigurationError(`createTokenEndpoint: \`${field}\` must be a positive integer`);
  }
  return value;
}

function checkAuthenticators(list: unknown): CallerAuthenticator[] {
  if (list === undefined) return [];
  if (!Array.isArray(list)) {
    throw new SvcConfigurationError('createTokenEndpoint: `authenticators` must be an array');
  }
  const schemes = new Set<string>();
  for (const authenticator of list as CallerAuthenticator[]) {
    const scheme = authenticator?.scheme;
    if (
      typeof scheme !== 'string' || scheme.length === 0 ||
      typeof authenticator.authenticate !== 'function'
    ) {
      throw new SvcConfigurationError(
        'createTokenEndpoint: an authenticator needs a scheme and authenticate()',
      );
    }
    if (schemes.has(scheme.toLowerCase())) {
      throw new SvcConfigurationError(
        `createTokenEndpoint: two caller authenticators handle the scheme ${scheme}`,
      );
    }
    schemes.add(scheme.toLowerCase());
  }
  return [...list];
}

function isNonEmptyString(value: unknown, maxLength: number): value is string {
  return typeof value === 'string' && value.length > 0 && value.length <= maxLength;
}

function issue(
  message: string,
  path: string | number,
  ...rest: (string | number)[]
): ValidationIssue {
  return { message, path: [path, ...rest] };
}

function scopeIssues(scopes: unknown): ValidationIssue[] {
  if (!Array.isArray(scopes) || scopes.length === 0) {
    return [issue('scopes must be a non-empty array of strings', 'scopes')];
  }
  if (scopes.length > MAX_TOKEN_REQUEST_SCOPES) {
    return [issue(`at most ${MAX_TOKEN_REQUEST_SCOPES} scopes may be requested`, 'scopes')];
  }
  const issues: ValidationIssue[] = [];
  scopes.forEach((scope, index) => {
    if (!isNonEmptyString(scope, MAX_TOKEN_REQUEST_ID_LENGTH)) {
      issues.push(
        issue(
          `a scope must be a non-empty string of at most ${MAX_TOKEN_REQUEST_ID_LENGTH} characters`,
          'scopes',
          index,
        ),
      );
    }
  });
  return issues;
}

function fieldIssues(body: Record<string, unknown>): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  if (typeof body.callerServiceId !== 'string' || body.callerServiceId.length === 0) {
    issues.push(issue('callerServiceId must be a non-empty string', 'callerServiceId'));
  }
  if (!isNonEmptyString(body.targetServiceId, MAX_TOKEN_REQUEST_ID_LENGTH)) {
    issues.push(
      issue(
        `targetServiceId must be a non-empty string of at most ${MAX_TOKEN_REQUEST_ID_LENGTH} characters`,
        'targetServiceId',
      ),
    );
  }
  issues.push(...scopeIssues(body.scopes));
  if (
    body.abilityId !== undefined &&
    !isNonEmptyString(body.abilityId, MAX_TOKEN_REQUEST_ID_LENGTH * 2)
  ) {
    issues.push(issue('abilityId must be a non-empty string', 'abilityId'));
  }
  if (
    body.ttlSeconds !== undefined &&
    (typeof body.ttlSeconds !== 'number' || !Number.isSafeInteger(body.ttlSeconds) ||
      body.ttlSeconds <= 0)
  ) {
    issues.push(issue('ttlSeconds must be a positive integer', 'ttlSeconds'));
  }
  return issues;
}

/** Copies only the accepted members: nothing else a caller sends can reach the issuer. */
function acceptedMembers(body: Record<string, unknown>): TokenRequestBody {
  const accepted: TokenRequestBody = {
    callerServiceId: body.callerServiceId as string,
    targetServiceId: body.targetServiceId as string,
    scopes: [...(body.scopes as string[])],
  };
  if (body.abilityId !== undefined) accepted.abilityId = body.abilityId as string;
  if (body.ttlSeconds !== undefined) accepted.ttlSeconds = body.ttlSeconds as number;
  return accepted;
}

function parseJsonObject(bytes: Uint8Array): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(strictUtf8.decode(bytes));
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Builds the token endpoint handler. The returned function answers one request; the plane
 * passes the request id it assigned (echoed in problem bodies; the plane sets the header) and,
 * optionally, its request context, which reaches `issue` as `context.requestContext` and the
 * log callback as its second argument.
 */
export function createTokenEndpoint(
  options: TokenEndpointOptions,
): TokenEndpointHandler {
  const authenticators = checkAuthenticators(options.authenticators);
  const maxBodyBytes = positiveInteger(
    options.maxBodyBytes,
    DEFAULT_TOKEN_REQUEST_MAX_BODY_BYTES,
    'maxBodyBytes',
  );
  const bodyTimeoutMs = positiveInteger(
    options.bodyTimeoutMs,
    DEFAULT_TOKEN_REQUEST_BODY_TIMEOUT_MS,
    'bodyTimeoutMs',
  );
  if (typeof options.issue !== 'function') {
    throw new SvcConfigurationError('createTokenEndpoint: `issue` must be a function');
  }
  const challenge = authenticators.length > 0
    ? combinedChallenge(authenticators)
    : UNCONFIGURED_CHALLENGE;

  const refuse = (
    requestId: string,
    init: {
      status: number;
      detail: string;
      reason: string;
      code?: 'capability_auth' | 'ability_validation' | 'internal';
      issues?: ValidationIssue[];
      headers?: Readonly<Record<string, string>>;
    },
  ): Response =>
    problemResponse({
      status: init.status,
      code: init.code ?? 'internal',
      detail: init.detail,
      reason: init.reason,
      retryable: init.status === 408,
      requestId,
      ...(init.issues !== undefined ? { issues: init.issues } : {}),
      headers: { ...NO_STORE_HEADERS, ...init.headers },
    });

  // One body for every caller-auth refusal: the failed check goes to the log, not to the caller,
  // so an unknown client and a bad signature cannot be told apart.
  const unauthenticated = (requestId: string): Response =>
    refuse(requestId, {
      status: 401,
      code: 'capability_auth',
      detail: 'The token request could not be authenticated',
      reason: CALLER_UNAUTHENTICATED_REASON,
      headers: { 'WWW-Authenticate': challenge },
    });

  const forbidden = (requestId: string, reason: string, detail: string): Response =>
    problemFromError(
      new CapabilityAuthError(detail, { status: 403, reason }),
      requestId,
      NO_STORE_HEADERS,
    );

  async function handle(
    request: Request,
    requestId: string,
    requestContext: unknown,
  ): Promise<Response> {
    if (request.method !== 'POST') {
      discardBody(request);
      return refuse(requestId, {
        status: 405,
        detail: 'The token endpoint accepts POST only',
        reason: 'method_not_allowed',
        headers: { Allow: 'POST' },
      });
    }
    if (authenticators.length === 0) {
      discardBody(request);
      options.log(
        {
          event: CALLER_AUTH_NOT_CONFIGURED_EVENT,
          level: 'warn',
          requestId,
          reason: CALLER_AUTH_NOT_CONFIGURED_REASON,
        },
        requestContext,
      );
      return unauthenticated(requestId);
    }
    let body: Uint8Array | undefined;
    try {
      body = await readBoundedBytes(request, maxBodyBytes, { timeoutMs: bodyTimeoutMs });
    } catch (error) {
      if (error instanceof BodyReadTimeout) {
        return refuse(requestId, {
          status: 408,
          detail: 'The body did not arrive in time',
          reason: 'body_timeout',
          headers: BODY_ABANDONED_HEADERS,
        });
      }
      // The stream failed: the client went away or broke the framing mid-body.
      return refuse(requestId, {
        status: 400,
        detail: 'The body could not be read to its end',
        reason: 'body_unreadable',
        headers: BODY_ABANDONED_HEADERS,
      });
    }
    if (body === undefined) {
      return refuse(requestId, {
        status: 413,
        detail: `The body exceeds ${maxBodyBytes} bytes`,
        reason: 'body_too_large',
      });
    }
    let caller: AuthenticatedCaller;
    try {
      caller = await authenticateTokenRequest(request, body, authenticators, {
        issuer: options.issuer,
        requestId,
        ...(requestContext !== undefined ? { requestContext } : {}),
      });
    } catch (error) {
      if (error instanceof CallerAuthError) return unauthenticated(requestId);
      throw error;
    }
    const parsed = parseJsonObject(body);
    if (parsed === undefined) {
      return refuse(requestId, {
        status: 400,
        code: 'ability_validation',
        detail: 'The token request body must be a JSON object',
        reason: 'invalid_token_request',
        issues: [{ message: 'expected a JSON object' }],
      });
    }
    if (Object.hasOwn(parsed, 'subject')) {
      return forbidden(
        requestId,
        'subject_not_allowed',
        'A caller may not assert a delegated subject',
      );
    }
    const issues = fieldIssues(parsed);
    if (issues.length > 0) {
      return refuse(requestId, {
        status: 400,
        code: 'ability_validation',
        detail: 'The token request body is invalid',
        reason: 'invalid_token_request',
        issues,
      });
    }
    const accepted = acceptedMembers(parsed);
    if (accepted.callerServiceId !== caller.serviceId) {
      return forbidden(
        requestId,
        'caller_mismatch',
        'callerServiceId is not the authenticated caller',
      );
    }
    // Not `request.signal`: nothing here aborts a mint, and on Deno merely reading it prints a
    // runtime warning about its legacy abort behaviour.
    const context: TokenIssueContext = { requestId };
    if (requestContext !== undefined) context.requestContext = requestContext;
    const issued = await options.issue(caller, accepted, context);
    return tokenResponse(issued);
  }

  return async (request, requestId, requestContext) => {
    try {
      return await handle(request, requestId, requestContext);
    } catch (error) {
      const response = problemFromError(error, requestId, NO_STORE_HEADERS);
      if (response.status >= 500) {
        options.log(planeRequestFailed(request, requestId, response.status, error), requestContext);
      }
      return response;
    }
  };
}

// Built once: every token response carries the same headers (the plane adds the request id).
const TOKEN_RESPONSE_HEADERS = Object.freeze({
  'Content-Type': 'application/json',
  ...NO_STORE_HEADERS,
});

// Tokens expire on whole seconds, so the tokens issued within one second share their expiry:
// the last one formatted is remembered (formatting a date costs more than the rest of the body).
let lastExpiryMs = Number.NaN;
let lastExpiryText = '';

function isoTime(ms: number): string {
  if (ms !== lastExpiryMs) {
    lastExpiryText = new Date(ms).toISOString();
    lastExpiryMs = ms;
  }
  return lastExpiryText;
}

function tokenResponse(issued: IssuedToken): Response {
  const expiresAtMs = issued.expiresAt.getTime();
  const body = {
    token: issued.token,
    tokenType: CAPABILITY_TOKEN_TYPE,
    expiresAt: isoTime(expiresAtMs),
    expiresIn: Math.max(0, Math.floor((expiresAtMs - Date.now()) / 1000)),
    scopes: issued.scopes,
  };
  return new Response(JSON.stringify(body), { status: 200, headers: TOKEN_RESPONSE_HEADERS });
}
