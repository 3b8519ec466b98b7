/**
 * The plane side of `controlPlaneRpcTokenRequester`: the object a Workers entrypoint exposes to
 * one same-account caller over a private service binding.
 *
 * A binding carries no credentials, so the caller is whoever the deployment wired the binding
 * to. The entrypoint is therefore configured with exactly one `callerServiceId` and mints for
 * that service only: a request naming another caller is refused (403), as is a delegated
 * `subject` (403). The answer has the token endpoint's shape, so the requester caches it the same
 * way. Everything else (grants, scopes, targets, TTL caps) is the plane's ordinary issuance.
 *
 * Refusals are answered, not thrown: `{ error: { code, status, retryable, reason?, message } }`.
 * Workers RPC carries a thrown error's own properties only when both Workers run with
 * `enhanced_error_serialization` (compatibility date 2026-04-21 or later); otherwise the caller
 * receives a bare `Error` whose name is folded into its message, and a 403 refusal would read as
 * an unreachable plane. Plain data crosses every binding unchanged, whatever either side's
 * compatibility date.
 *
 * @module
 */
import { refuseUnknownKeys } from '../core/config-values.ts';
import {
  AbilityValidationError,
  CapabilityAuthError,
  hasSvcErrorShape,
  SvcConfigurationError,
  type SvcErrorCode,
  svcErrorInfo,
  type ValidationIssue,
} from '../core/errors.ts';
import {
  createEventLog,
  describeErrorForLog,
  type SvcEventLog,
  type SvcLogOption,
} from '../core/logging.ts';
import { OPAQUE_PROBLEM_DETAIL } from '../core/problem.ts';
import { generateRequestId } from '../core/request-id.ts';
import type { IssuedCapabilityToken } from './issuer.ts';
import { PLANE_REQUEST_FAILED_EVENT } from './request-failure.ts';
import type { IssueForCallerOptions } from './control-plane.ts';
import {
  CAPABILITY_TOKEN_TYPE,
  MAX_TOKEN_REQUEST_ID_LENGTH,
  MAX_TOKEN_REQUEST_SCOPES,
} from './token-endpoint.ts';

/** What the entrypoint needs from a control plane. */
export interface TokenIssuingPlane {
  /** Mints a service-class token for an authenticated caller (a control plane's own method). */
  issueCapabilityTokenForCaller(request: IssueForCallerOptions): Promise<IssuedCapabilityToken>;
}

/** Options of {@link capabilityTokenEntrypoint}. */
export interface CapabilityTokenEntrypointOptions {
  /** The one service the binding belongs to: `sub` of every token minted here. */
  callerServiceId: string;
  /**
   * Runtime context handed to the plane's `services(context)` and `signingKeys(env)`, such as
   * the entrypoint's `env`; optional for static configuration.
   */
  context?: unknown;
  /**
   * Where a request the plane cannot serve (answered 5xx) is logged, once, as
   * `svc.plane.request_failed` with `method: 'RPC'` and `path: 'requestCapabilityToken'`, as the
   * token endpoint logs its own. Default: one JSON line on the console; `false` silences it.
   */
  log?: SvcLogOption;
}

/** A token request as it arrives over the binding. */
export interface CapabilityTokenEntrypointRequest {
  /** Must equal the configured caller. */
  callerServiceId: string;
  /** The service the token is for (`aud`). */
  targetServiceId: string;
  /** Scopes asked for: at least one, each granted to the caller on the target. */
  scopes: readonly string[];
  /** When given, the ability must exist on the target. */
  abilityId?: string;
  /** Lifetime in seconds (a positive integer); default, and ceiling, the plane's `ttlSeconds`. */
  ttlSeconds?: number;
}

/** A minted token: the same members as the token endpoint's 200 body. */
export interface CapabilityTokenEntrypointResponse {
  /** The capability token (compact ES256 JWS). */
  token: string;
  /** Always `svc-capability`. */
  tokenType: typeof CAPABILITY_TOKEN_TYPE;
  /** ISO 8601. */
  expiresAt: string;
  /** Seconds from now. */
  expiresIn: number;
  /** The granted scopes, sorted and de-duplicated. */
  scopes: string[];
  /** Never present on a minted token: its presence marks a refusal. */
  error?: never;
}

/** What a refusal says, as plain data: the taxonomy fields and a bounded message. */
export interface CapabilityTokenEntrypointError {
  /** Taxonomy classification. */
  code: SvcErrorCode;
  /** The classification status (403, 422, 500...). */
  status: number;
  /** Whether the failure is transient. */
  retryable: boolean;
  /** The failed check (`grant_denied`, `caller_mismatch`, `unknown_target`...). */
  reason?: string;
  /** What went wrong, at most {@link MAX_ENTRYPOINT_ERROR_MESSAGE_LENGTH} characters. */
  message: string;
}

/**
 * A refusal: `{ error }` and none of the token members, so no reader can take it for a token.
 * The requester re-validates every field with `svcErrorInfo` all the same.
 */
export interface CapabilityTokenEntrypointRefusal {
  /** The refusal's taxonomy fields and message. */
  error: CapabilityTokenEntrypointError;
  /** Absent on a refusal. */
  token?: never;
  /** Absent on a refusal. */
  tokenType?: never;
  /** Absent on a refusal. */
  expiresAt?: never;
  /** Absent on a refusal. */
  expiresIn?: never;
  /** Absent on a refusal. */
  scopes?: never;
}

/** What the entrypoint resolves with: a minted token, or a refusal as data. */
export type CapabilityTokenEntrypointAnswer =
  | CapabilityTokenEntrypointResponse
  | CapabilityTokenEntrypointRefusal;

/** Longest message a refusal carries across the binding. */
export const MAX_ENTRYPOINT_ERROR_MESSAGE_LENGTH = 512;

/** The object a Workers entrypoint exposes for `controlPlaneRpcTokenRequester`. */
export interface CapabilityTokenEntrypoint {
  /**
   * Mints a token for the configured caller, or resolves with a refusal `{ error }`: 422
   * `ability_validation` (`invalid_token_request`) for a malformed request, 403
   * `capability_auth` for a `subject` (`subject_not_allowed`) or another caller
   * (`caller_mismatch`), and otherwise whatever taxonomy error the plane's issuance raised
   * (`grant_denied`, `unknown_scope`, `unknown_target`, `target_unreachable`...). A failure
   * that is no refusal (a bug, an `SvcConfigurationError` meant for the operator) answers an
   * opaque internal error, as the token endpoint does, and is logged as
   * `svc.plane.request_failed`; the entrypoint itself never rejects.
   */
  requestCapabilityToken(
    request: CapabilityTokenEntrypointRequest,
  ): Promise<CapabilityTokenEntrypointAnswer>;
}

const LABEL = 'capabilityTokenEntrypoint';
const ENTRYPOINT_OPTIONS: readonly string[] = ['callerServiceId', 'context', 'log'];
/** How the entrypoint names itself in `svc.plane.request_failed`, where a route has a path. */
const ENTRYPOINT_METHOD = 'requestCapabilityToken';

function isText(value: unknown, maxLength: number): value is string {
  return typeof value === 'string' && value.length > 0 && value.length <= maxLength;
}

function scopeIssues(scopes: unknown): ValidationIssue[] {
  if (!Array.isArray(scopes) || scopes.length === 0) {
    return [{ message: 'scopes must be a non-empty array of strings', path: ['scopes'] }];
  }
  if (scopes.length > MAX_TOKEN_REQUEST_SCOPES) {
    return [{ message: `at most ${MAX_TOKEN_REQUEST_SCOPES} scopes`, path: ['scopes'] }];
  }
  return scopes.flatMap((scope, index) =>
    isText(scope, MAX_TOKEN_REQUEST_ID_LENGTH)
      ? []
      : [{ message: 'a scope must be a non-empty string', path: ['scopes', index] }]
  );
}

function requestIssues(request: Record<string, unknown>): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  if (!isText(request.targetServiceId, MAX_TOKEN_REQUEST_ID_LENGTH)) {
    issues.push({
      message: 'targetServiceId must be a non-empty string',
      path: ['targetServiceId'],
    });
  }
  issues.push(...scopeIssues(request.scopes));
  if (
    request.abilityId !== undefined && !isText(request.abilityId, MAX_TOKEN_REQUEST_ID_LENGTH * 2)
  ) {
    issues.push({ message: 'abilityId must be a non-empty string', path: ['abilityId'] });
  }
  const ttl = request.ttlSeconds;
  if (ttl !== undefined && (typeof ttl !== 'number' || !Number.isSafeInteger(ttl) || ttl <= 0)) {
    issues.push({ message: 'ttlSeconds must be a positive integer', path: ['ttlSeconds'] });
  }
  return issues;
}

/** The request as a plain record; anything else is an invalid request. */
function requestRecord(request: unknown): Record<string, unknown> {
  if (request === null || typeof request !== 'object' || Array.isArray(request)) {
    throw new AbilityValidationError(`${LABEL}: the token request must be an object`, {
      reason: 'invalid_token_request',
      issues: [{ message: 'expected an object' }],
    });
  }
  return request as Record<string, unknown>;
}

/** The subject refusal runs before the caller check: nothing about a subject is ever read. */
function refuseSubject(request: Record<string, unknown>): void {
  if (Object.hasOwn(request, 'subject')) {
    throw new CapabilityAuthError('A caller may not assert a delegated subject', {
      status: 403,
      reason: 'subject_not_allowed',
    });
  }
}

function refuseOtherCaller(request: Record<string, unknown>, callerServiceId: string): void {
  if (request.callerServiceId !== callerServiceId) {
    throw new CapabilityAuthError(
      `This entrypoint issues tokens for ${callerServiceId} only`,
      { status: 403, reason: 'caller_mismatch' },
    );
  }
}

function checkOptions(plane: unknown, options: unknown): CapabilityTokenEntrypointOptions {
  if (
    plane === null || typeof plane !== 'object' ||
    typeof (plane as Partial<TokenIssuingPlane>).issueCapabilityTokenForCaller !== 'function'
  ) {
    throw new SvcConfigurationError(`${LABEL}: \`plane\` must be a control plane`, {
      reason: 'invalid_token_entrypoint',
    });
  }
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new SvcConfigurationError(`${LABEL}: options must be an object { callerServiceId }`, {
      reason: 'invalid_token_entrypoint',
    });
  }
  refuseUnknownKeys(options, ENTRYPOINT_OPTIONS, LABEL, { reason: 'invalid_token_entrypoint' });
  const callerServiceId = (options as Partial<CapabilityTokenEntrypointOptions>).callerServiceId;
  if (!isText(callerServiceId, MAX_TOKEN_REQUEST_ID_LENGTH)) {
    throw new SvcConfigurationError(`${LABEL}: \`callerServiceId\` must be a non-empty string`, {
      reason: 'invalid_token_entrypoint',
    });
  }
  return options as CapabilityTokenEntrypointOptions;
}

function entrypointResponse(issued: IssuedCapabilityToken): CapabilityTokenEntrypointResponse {
  const expiresAtMs = issued.expiresAt.getTime();
  return {
    token: issued.token,
    tokenType: CAPABILITY_TOKEN_TYPE,
    expiresAt: issued.expiresAt.toISOString(),
    expiresIn: Math.max(0, Math.floor((expiresAtMs - Date.now()) / 1000)),
    scopes: [...issued.scopes],
  };
}

/** The first issues of an invalid request, as one line (a refusal carries no issue list). */
function issueSummary(issues: readonly ValidationIssue[]): string {
  return issues.slice(0, 3).map((issue) =>
    issue.path === undefined || issue.path.length === 0
      ? issue.message
      : `${issue.path.join('.')}: ${issue.message}`
  ).join('; ');
}

/** A refusal's message as the binding carries it: bounded, never empty. */
function refusalMessage(error: unknown): string {
  const text = (error as { message?: unknown }).message;
  return typeof text === 'string' && text.length > 0
    ? text.slice(0, MAX_ENTRYPOINT_ERROR_MESSAGE_LENGTH)
    : 'Capability token request refused';
}

/**
 * A thrown error as the refusal the binding carries, with what the token endpoint would answer:
 * the taxonomy fields and the message, except for an error without the taxonomy (a bug) or an
 * `SvcConfigurationError` (it speaks to the operator and can quote configuration), which the
 * caller sees as an opaque internal error. Every 5xx answer is logged for the operator.
 */
function refusalAnswer(
  error: unknown,
  log: SvcEventLog,
  requestId: string,
): CapabilityTokenEntrypointRefusal {
  const info = svcErrorInfo(error);
  const opaque = !hasSvcErrorShape(error) || error instanceof SvcConfigurationError;
  if (info.status >= 500) {
    log({
      event: PLANE_REQUEST_FAILED_EVENT,
      level: 'error',
      requestId,
      method: 'RPC',
      path: ENTRYPOINT_METHOD,
      status: info.status,
      error: describeErrorForLog(error),
    });
  }
  if (opaque) {
    return {
      error: {
        code: info.code,
        status: info.status,
        retryable: info.retryable,
        message: OPAQUE_PROBLEM_DETAIL,
      },
    };
  }
  return { error: { ...info, message: refusalMessage(error) } };
}

/**
 * Builds the token entrypoint for one caller service. Order of checks: the request is an object
 * (422), carries no `subject` (403), names the configured caller (403), has valid members (422);
 * then the plane's issuance runs its full grant check, and its errors keep their taxonomy.
 * Refusals resolve as `{ error }` (see the module notes for why they are not thrown).
 *
 * On Workers, expose it from a `WorkerEntrypoint` the caller's binding points at:
 * `requestCapabilityToken(request) { return entrypoint.requestCapabilityToken(request); }`.
 */
export function capabilityTokenEntrypoint(
  plane: TokenIssuingPlane,
  options: CapabilityTokenEntrypointOptions,
): CapabilityTokenEntrypoint {
  const { callerServiceId, context } = checkOptions(plane, options);
  const log = createEventLog(options.log, `${LABEL}: log`);
  const issue = async (request: unknown, requestId: string): Promise<IssuedCapabilityToken> => {
    const record = requestRecord(request);
    refuseSubject(record);
    refuseOtherCaller(record, callerServiceId);
    const issues = requestIssues(record);
    if (issues.length > 0) {
      throw new AbilityValidationError(
        `${LABEL}: the token request is invalid: ${issueSummary(issues)}`,
        { reason: 'invalid_token_request', issues },
      );
    }
    // Only the accepted members reach the issuer.
    return await plane.issueCapabilityTokenForCaller({
      caller: { clientId: callerServiceId, serviceId: callerServiceId },
      targetServiceId: record.targetServiceId as string,
      scopes: [...(record.scopes as string[])],
      ...(record.abilityId !== undefined ? { abilityId: record.abilityId as string } : {}),
      ...(record.ttlSeconds !== undefined ? { ttlSeconds: record.ttlSeconds as number } : {}),
      ...(context !== undefined ? { context } : {}),
      requestId,
    });
  };
  return {
    async requestCapabilityToken(request) {
      // A binding carries no request id: one is made here for the plane's events and discovery.
      const requestId = generateRequestId();
      let issued: IssuedCapabilityToken;
      try {
        issued = await issue(request, requestId);
      } catch (error) {
        return refusalAnswer(error, log, requestId);
      }
      return entrypointResponse(issued);
    },
  };
}
