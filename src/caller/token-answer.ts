/**
 * Reading what the control plane answered a token request with: an HTTP token response or a
 * binding entrypoint's answer becomes a token with its lifetime, or a typed failure whose
 * taxonomy is re-validated so nothing between the plane and the caller can make a refusal look
 * retryable.
 *
 * @module
 */
import { decodeBase64Url } from '../core/base64url.ts';
import { readBoundedBytes } from '../core/bounded-body.ts';
import { MAX_CAPABILITY_TOKEN_BYTES } from '../core/capability-token.ts';
import { hasSvcErrorShape, svcErrorInfo } from '../core/errors.ts';
import { CapabilityTokenRequestError } from './token-request-error.ts';
import type { FetchedCapabilityToken } from './token-request-cache.ts';

/** Largest token-endpoint response body a requester reads. */
export const MAX_TOKEN_RESPONSE_BYTES = 64 * 1024;
/** Longest error detail kept from a problem body. */
const MAX_ERROR_DETAIL_LENGTH = 512;

/**
 * Rebuilds a token endpoint error response as a plain error carrying `code`, `status`,
 * `retryable` and `reason` from its problem body, re-validated with `svcErrorInfo` so the plane
 * (or anything between) cannot make a refusal look retryable. A body without the taxonomy is
 * classified `internal` with the HTTP status.
 */
export function tokenEndpointFailure(httpStatus: number, body: unknown, requestId?: string): Error {
  const byStatus = svcErrorInfo({ code: 'internal', status: httpStatus });
  const fromBody = hasSvcErrorShape(body) ? svcErrorInfo(body) : undefined;
  // The body's taxonomy is believed only where it agrees with the HTTP status; otherwise the
  // status decides, and the body can only take retryability away (a 403 answered with a 503
  // body must not read as a transient outage, nor a 503 with a 403 body as a final refusal).
  const info = fromBody !== undefined && fromBody.status === httpStatus ? fromBody : {
    ...byStatus,
    retryable: byStatus.retryable && fromBody?.retryable !== false,
  };
  const detail = (body as { detail?: unknown } | null)?.detail;
  const message = typeof detail === 'string' && detail.length > 0
    ? detail.slice(0, MAX_ERROR_DETAIL_LENGTH)
    : `Capability token request failed with HTTP ${httpStatus}`;
  return new CapabilityTokenRequestError(
    message,
    info,
    requestId !== undefined ? { requestId } : {},
  );
}

/**
 * A `Retry-After` in delay-seconds, in milliseconds (an HTTP date is not read: it would need the
 * caller's clock to agree with the plane's).
 */
export function retryAfterMsOf(header: string | null): number | undefined {
  return header !== null && /^[0-9]{1,9}$/.test(header.trim())
    ? Number(header.trim()) * 1000
    : undefined;
}

/** A token answer the caller cannot use: a typed, retryable failure of the plane. */
export function invalidResponse(
  requestId?: string,
  message = 'The control plane answered a token request with an invalid body',
): Error {
  return new CapabilityTokenRequestError(
    message,
    { code: 'internal', status: 502, retryable: true, reason: 'token_response_invalid' },
    requestId !== undefined ? { requestId } : {},
  );
}

/** What reading a token response body gave: its text, or why there is none. */
export type ResponseText = { text: string } | { problem: 'too_large' | 'not_utf8' };

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** A token response body, read within {@link MAX_TOKEN_RESPONSE_BYTES} and as strict UTF-8. */
export async function readResponseText(response: Response): Promise<ResponseText> {
  const bytes = await readBoundedBytes(response, MAX_TOKEN_RESPONSE_BYTES);
  if (bytes === undefined) return { problem: 'too_large' };
  try {
    return { text: strictUtf8.decode(bytes) };
  } catch {
    return { problem: 'not_utf8' };
  }
}

/** The JSON value of `text`, or `undefined` when there is none. */
export function parseJson(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The claims a token carries, read without verifying it (the service verifies). */
function unverifiedClaims(token: string): Record<string, unknown> | undefined {
  const segments = token.split('.');
  if (segments.length !== 3) return undefined;
  const bytes = decodeBase64Url(segments[1]);
  if (bytes === undefined) return undefined;
  const claims = parseJson(new TextDecoder().decode(bytes));
  return claims !== null && typeof claims === 'object' && !Array.isArray(claims)
    ? claims as Record<string, unknown>
    : undefined;
}

/** A token as a response delivered it, with its claims read once for the checks after. */
export interface ReadCapabilityToken extends FetchedCapabilityToken {
  claims: Record<string, unknown> | undefined;
}

/** `exp - iat` of a token's claims, as its lifetime. */
function claimedLifetimeMs(claims: Record<string, unknown> | undefined): number | undefined {
  return typeof claims?.exp === 'number' && typeof claims.iat === 'number'
    ? (claims.exp - claims.iat) * 1000
    : undefined;
}

/**
 * A token and its lifetime from a token response (`{ token, expiresIn?, expiresAt? }`) or a bare
 * token string. Lifetimes are relative, so the caller's clock never needs to agree with the
 * plane's: the response's `expiresIn`, never more than the token's own `exp - iat`.
 */
export function fetchedTokenFrom(value: unknown, requestId?: string): ReadCapabilityToken {
  const record = (typeof value === 'string' ? { token: value } : value) as
    | Record<string, unknown>
    | null
    | undefined;
  const token = record?.token;
  // A token longer than any service accepts would only be carried around and refused.
  if (
    typeof token !== 'string' || token.length === 0 || token.length > MAX_CAPABILITY_TOKEN_BYTES
  ) {
    throw invalidResponse(requestId);
  }
  const expiresIn = record!.expiresIn;
  const claims = unverifiedClaims(token);
  const claimed = claimedLifetimeMs(claims);
  const stated = typeof expiresIn === 'number' && Number.isFinite(expiresIn) && expiresIn >= 0
    ? expiresIn * 1000
    : undefined;
  // A response may not stretch a token past its own lifetime: a cached token outliving its
  // `exp` would be presented, and refused, until the cache let it go.
  const lifetimeMs = stated !== undefined && claimed !== undefined
    ? Math.min(stated, claimed)
    : stated ?? claimed;
  return { token, lifetimeMs: lifetimeMs ?? 0, claims };
}

/** A received error's message, bounded; a default when it has none. */
function receivedMessage(error: object): string {
  const message = (error as { message?: unknown }).message;
  return typeof message === 'string' && message.length > 0
    ? message.slice(0, MAX_ERROR_DETAIL_LENGTH)
    : 'Capability token request failed';
}

/** An error a binding entrypoint threw, as the typed failure of the token request. */
export function receivedErrorAsTokenFailure(error: unknown): unknown {
  if (!hasSvcErrorShape(error)) {
    // Anything else (a binding that lost its connection, a thrown string, an error whose fields
    // the runtime dropped on the way) is the plane being unreachable, as for the HTTP
    // requesters: typed, transient, the original kept as `cause`.
    return new CapabilityTokenRequestError(
      'The control plane could not be reached for a capability token',
      { code: 'internal', status: 503, retryable: true, reason: 'control_plane_unreachable' },
      { cause: error },
    );
  }
  return new CapabilityTokenRequestError(receivedMessage(error as object), svcErrorInfo(error));
}

/** Whether an answer is a refusal: an object with its own `error` member, whatever else it has. */
function isRefusalAnswer(answer: unknown): answer is { error: unknown } {
  return answer !== null && typeof answer === 'object' && Object.hasOwn(answer, 'error');
}

/**
 * A refusal the entrypoint answered as data, as the failure to throw. It is never a token, even
 * beside one; its fields are re-validated like a thrown error's, and a record without the
 * taxonomy is an invalid answer.
 */
function refusalAsTokenFailure(error: unknown): Error {
  if (!hasSvcErrorShape(error)) {
    return invalidResponse(undefined, 'The control plane answered a refusal without its taxonomy');
  }
  return new CapabilityTokenRequestError(receivedMessage(error as object), svcErrorInfo(error));
}

/** The token an entrypoint answered, or the failure its answer stands for. */
export function tokenFromAnswer(answer: unknown): ReadCapabilityToken {
  try {
    if (isRefusalAnswer(answer)) throw refusalAsTokenFailure(answer.error);
    return fetchedTokenFrom(answer);
  } catch (error) {
    // A getter on the answer that throws is an invalid answer, not the caller's failure.
    throw hasSvcErrorShape(error) ? error : invalidResponse();
  }
}
