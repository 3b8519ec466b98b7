/**
 * Token-endpoint caller authentication: who may ask the control plane for tokens.
 *
 * A caller authenticator handles one `Authorization` scheme. The token endpoint parses the
 * header once, strictly (exactly one scheme and one value), and hands the request to the
 * authenticator whose scheme matches, case-insensitively. Everything an authenticator admits
 * becomes a service-class caller.
 *
 * @module
 */
import { CapabilityAuthError, SvcInternalError } from '../core/errors.ts';
import { isCanonicalBase64Url } from '../core/base64url.ts';

/** A caller the plane proved to be a registered service client. */
export interface AuthenticatedCaller {
  /** The registered client id that authenticated. */
  clientId: string;
  /** The service the client acts for: `sub` of the tokens it receives. */
  serviceId: string;
  /** JWK callers: RFC 7638 thumbprint of the key that authenticated (stamped as `cnf.jkt`). */
  confirmationJkt?: string;
}

/** What an authenticator knows about the request besides its bytes. */
export interface CallerAuthContext {
  /** The plane's issuer (the audience of caller assertions). */
  issuer: string;
  /** The request id the plane assigned, for log events. */
  requestId?: string;
  /** The plane's request context (Hono's `c`): the second argument of refusal log events. */
  requestContext?: unknown;
}

/** One `Authorization` scheme of token-endpoint caller authentication. */
export interface CallerAuthenticator {
  /** The scheme name, e.g. `Svc-HMAC-SHA256` (matched case-insensitively). */
  scheme: string;
  /** The `WWW-Authenticate` challenge a 401 carries for this scheme. */
  challenge: string;
  /**
   * Authenticates a request whose `Authorization` scheme is this one. `body` holds the raw bytes
   * already read (the request body must not be read again). Throws {@link CallerAuthError}.
   */
  authenticate(
    request: Request,
    body: Uint8Array,
    context: CallerAuthContext,
  ): Promise<AuthenticatedCaller>;
  /**
   * Told when a request was refused before reaching any authenticator (no or malformed
   * `Authorization`, unknown scheme) so it can emit its own refusal event. Optional.
   */
  reportRefusal?(reason: string, context: CallerAuthContext): void;
}

/**
 * A token request was not authenticated: a `CapabilityAuthError` with status 401, a `reason`
 * naming the failed check and the `WWW-Authenticate` challenge to answer with.
 */
export class CallerAuthError extends CapabilityAuthError {
  /** The `WWW-Authenticate` value of the 401. */
  declare challenge: string;

  constructor(message: string, options: { reason: string; challenge: string }) {
    super(message, { status: 401, reason: options.reason });
    this.name = 'CallerAuthError';
    // Not enumerable: it is response metadata, not part of the error info record.
    Object.defineProperty(this, 'challenge', {
      value: options.challenge,
      enumerable: false,
      writable: true,
      configurable: true,
    });
  }
}

/** The two parts of an `Authorization` header. */
export interface ParsedAuthorization {
  /** The scheme as sent. */
  scheme: string;
  /** The single credential value (token68). */
  value: string;
}

// RFC 9110 §11.4: auth-scheme = token; the value is one token68 (no comma, no quote, no space).
const AUTHORIZATION_PATTERN = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) +([A-Za-z0-9._~+/-]+=*)$/;

/** Longest `Authorization` value looked at; real credentials are far shorter. */
export const MAX_AUTHORIZATION_LENGTH = 16_384;

/** Why an `Authorization` header was not split, as the `reason` of the refusal. */
type AuthorizationProblem = 'authorization_missing' | 'authorization_malformed';

/**
 * A header value without the optional whitespace around it: spaces and tabs only (RFC 9110
 * section 5.5), where `String.prototype.trim` would also drop NBSP, VT, FF and line separators.
 */
function withoutOptionalWhitespace(value: string): string {
  return value.replace(/^[ \t]+|[ \t]+$/g, '');
}

/** The scheme and value of a well-formed header, or what is wrong with it. */
function splitAuthorization(header: string | null): ParsedAuthorization | AuthorizationProblem {
  const value = header === null ? '' : withoutOptionalWhitespace(header);
  if (value.length === 0) return 'authorization_missing';
  const match = value.length <= MAX_AUTHORIZATION_LENGTH ? AUTHORIZATION_PATTERN.exec(value) : null;
  return match === null ? 'authorization_malformed' : { scheme: match[1], value: match[2] };
}

function authorizationRefusal(problem: AuthorizationProblem, challenge: string): CallerAuthError {
  return problem === 'authorization_missing'
    ? new CallerAuthError('The token request carries no Authorization header', {
      reason: problem,
      challenge,
    })
    : new CallerAuthError(
      'The Authorization header must carry exactly one scheme and one value',
      { reason: problem, challenge },
    );
}

/**
 * Splits an `Authorization` header into exactly one scheme and one value. A missing header, a
 * scheme alone, extra tokens, a comma-joined double header, a missing separator or an oversized
 * value throw {@link CallerAuthError} (reason `authorization_missing` or
 * `authorization_malformed`) carrying `challenge`.
 */
export function parseAuthorization(
  header: string | null,
  challenge = '',
): ParsedAuthorization {
  const parsed = splitAuthorization(header);
  if (typeof parsed === 'string') throw authorizationRefusal(parsed, challenge);
  return parsed;
}

/** The `WWW-Authenticate` value listing the challenges of every configured scheme. */
export function combinedChallenge(authenticators: readonly CallerAuthenticator[]): string {
  return authenticators.map((authenticator) => authenticator.challenge).join(', ');
}

function sameScheme(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase();
}

/** The first whitespace-delimited word of a header, to route a refusal to its scheme's log. */
function leadingWord(header: string | null): string | undefined {
  const word = header?.trim().split(/[\s,]/, 1)[0];
  return word !== undefined && word.length > 0 ? word : undefined;
}

function reportToAuthenticators(
  authenticators: readonly CallerAuthenticator[],
  header: string | null,
  reason: string,
  context: CallerAuthContext,
): void {
  const word = leadingWord(header);
  const named = word === undefined
    ? undefined
    : authenticators.find((authenticator) => sameScheme(authenticator.scheme, word));
  for (const authenticator of named !== undefined ? [named] : authenticators) {
    try {
      authenticator.reportRefusal?.(reason, context);
    } catch {
      // Reporting is a side channel; it never changes the refusal.
    }
  }
}

const JKT_LENGTH = 43;

/** An authenticator is configuration the plane trusts, but what it returns still has a shape. */
function checkAuthenticatedCaller(caller: unknown): AuthenticatedCaller {
  const record = caller as Record<string, unknown> | null;
  const valid = record !== null && typeof record === 'object' &&
    typeof record.clientId === 'string' && record.clientId.length > 0 &&
    typeof record.serviceId === 'string' && record.serviceId.length > 0 &&
    (record.confirmationJkt === undefined ||
      (typeof record.confirmationJkt === 'string' &&
        record.confirmationJkt.length === JKT_LENGTH &&
        isCanonicalBase64Url(record.confirmationJkt)));
  if (!valid) {
    throw new SvcInternalError('A caller authenticator returned a malformed caller', {
      reason: 'caller_authenticator_invalid',
    });
  }
  const checked: AuthenticatedCaller = {
    clientId: record.clientId as string,
    serviceId: record.serviceId as string,
  };
  if (record.confirmationJkt !== undefined) {
    checked.confirmationJkt = record.confirmationJkt as string;
  }
  return checked;
}

/**
 * Authenticates a token request with the authenticator its `Authorization` scheme names.
 * A missing or malformed header, or a scheme no authenticator handles, is refused with a 401
 * whose challenge lists every configured scheme. A plain 401 `CapabilityAuthError` from a custom
 * authenticator is turned into a {@link CallerAuthError} with that authenticator's challenge;
 * any other error passes through untouched.
 */
export async function authenticateTokenRequest(
  request: Request,
  body: Uint8Array,
  authenticators: readonly CallerAuthenticator[],
  context: CallerAuthContext,
): Promise<AuthenticatedCaller> {
  const header = request.headers.get('Authorization');
  const parsed = splitAuthorization(header);
  if (typeof parsed === 'string') {
    reportToAuthenticators(authenticators, header, parsed, context);
    throw authorizationRefusal(parsed, combinedChallenge(authenticators));
  }
  const authenticator = authenticators.find((candidate) =>
    sameScheme(candidate.scheme, parsed.scheme)
  );
  if (authenticator === undefined) {
    reportToAuthenticators(authenticators, null, 'unsupported_scheme', context);
    throw new CallerAuthError('The Authorization scheme is not accepted here', {
      reason: 'unsupported_scheme',
      challenge: combinedChallenge(authenticators),
    });
  }
  let caller: unknown;
  try {
    caller = await authenticator.authenticate(request, body, context);
  } catch (error) {
    throw asCallerAuthError(error, authenticator.challenge);
  }
  return checkAuthenticatedCaller(caller);
}

function asCallerAuthError(error: unknown, challenge: string): unknown {
  if (error instanceof CallerAuthError) return error;
  if (error instanceof CapabilityAuthError && error.status === 401) {
    return new CallerAuthError(error.message, {
      reason: error.reason ?? 'caller_unauthenticated',
      challenge,
    });
  }
  return error;
}
