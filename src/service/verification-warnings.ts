/**
 * Warnings for refusals that are the service's own configuration at fault rather than the
 * caller's: a JWKS it cannot fetch, or tokens from an issuer it was not told about. Every call is
 * refused then, and the caller sees only a 503 or a 401; the operator needs the URL, the status
 * and the issuer names to fix it, so they go to the service's log at `warn` (never to the caller).
 *
 * @module
 */
import { decodeBase64Url } from '../core/base64url.ts';
import { svcErrorInfo } from '../core/errors.ts';
import type { SvcLogEvent } from '../core/logging.ts';
import { jwksFailureDetails } from './jwks-sources.ts';

/** Longest issuer quoted from an unverified token: enough for any real one, bounded for a forged one. */
const MAX_QUOTED_ISSUER_CHARS = 200;

/** What the warning needs to know about the service and the request. */
export interface VerificationWarningContext {
  /** The issuer the service accepts (its `auth.issuer`). */
  issuer: string;
  requestId?: string;
  log(event: SvcLogEvent): void;
}

/** The `iss` a token claims, read without verifying it (only quoted in the operator's log). */
function claimedIssuer(token: unknown): string | undefined {
  if (typeof token !== 'string') return undefined;
  const payload = decodeBase64Url(token.split('.')[1] ?? '');
  if (payload === undefined) return undefined;
  try {
    const claims: unknown = JSON.parse(new TextDecoder().decode(payload));
    const iss = (claims as { iss?: unknown } | null)?.iss;
    return typeof iss === 'string' ? iss.slice(0, MAX_QUOTED_ISSUER_CHARS) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Logs `svc.auth.jwks_unavailable` (the JWKS `url`, its HTTP `status` when it answered, the
 * `error`) or
 * `svc.auth.issuer_mismatch` (with the accepted and the claimed issuer) at `warn` when `error`,
 * thrown by verifying `token`, is one of them; any other refusal is the caller's and is left to
 * the request's own log event.
 */
export function warnOfVerificationTrouble(
  error: unknown,
  token: unknown,
  context: VerificationWarningContext,
): void {
  const { reason, status } = svcErrorInfo(error);
  const requestId = context.requestId !== undefined ? { requestId: context.requestId } : {};
  if (reason === 'jwks_unavailable') {
    const details = jwksFailureDetails(error);
    context.log({
      event: 'svc.auth.jwks_unavailable',
      level: 'warn',
      ...requestId,
      ...(details !== undefined ? { url: details.url } : {}),
      // The JWKS route's own answer; absent when it never answered (unreachable, timed out).
      ...(details?.status !== undefined ? { status: details.status } : {}),
      error: error instanceof Error ? error.message : String(error),
    });
  } else if (reason === 'issuer_mismatch') {
    const tokenIssuer = claimedIssuer(token);
    context.log({
      event: 'svc.auth.issuer_mismatch',
      level: 'warn',
      ...requestId,
      status,
      expectedIssuer: context.issuer,
      ...(tokenIssuer !== undefined ? { tokenIssuer } : {}),
    });
  }
}
