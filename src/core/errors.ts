/**
 * The error taxonomy shared by services, callers and the control plane.
 *
 * Every error raised by svcplane carries `code`, `status`, `retryable` and (optionally) `reason`
 * as own enumerable properties, because Cap'n Web rebuilds received errors as plain `Error`s and
 * only own enumerable properties survive the trip. `instanceof` therefore works locally only;
 * read errors with {@link svcErrorInfo}, which works for both and re-validates every field.
 *
 * @module
 */
// A cycle (config-values throws SvcConfigurationError), safe because neither module calls the
// other while it is being evaluated.
import { firstUnknownKey, unknownKeyProblem } from './unknown-keys.ts';

/** The five classifications of the contract's error taxonomy. */
export type SvcErrorCode =
  | 'capability_auth'
  | 'ability_validation'
  | 'timeout'
  | 'handler'
  | 'internal';

/** The error info record: `{ code, status, retryable, reason? }`. */
export interface SvcErrorInfo {
  /** Taxonomy classification. */
  code: SvcErrorCode;
  /** A classification (not an HTTP status of the RPC response). */
  status: number;
  /** Whether the failure is transient. It never means a retry is safe. */
  retryable: boolean;
  /** A short machine-readable discriminator naming the failed check. */
  reason?: string;
}

/** One validation issue: a message and, when known, the path to the offending value. */
export interface ValidationIssue {
  /** What is wrong with the value, as the schema library worded it. */
  message: string;
  /** Property names and array indexes leading to the offending value, when the schema gave them. */
  path?: (string | number)[];
}

const RETRYABLE_BY_DEFAULT = new Set([408, 429, 502, 503, 504]);

/** Whether a status is transient by default (408, 429, 502, 503, 504). */
export function isRetryableStatusByDefault(status: number): boolean {
  return RETRYABLE_BY_DEFAULT.has(status);
}

/**
 * Base class of every taxonomy error. Not exported as a public name: callers match on `code`,
 * never on a base class, because received errors lose their prototype.
 */
export abstract class SvcError extends Error {
  /** Taxonomy classification; read it with `svcErrorInfo` on a received error. */
  declare code: SvcErrorCode;
  /** A classification (401, 403, 422, 504, 500...), not the HTTP status of the RPC response. */
  declare status: number;
  /** Whether the failure is transient. It never means a retry is safe (see `idempotent`). */
  declare retryable: boolean;
  /** A short machine-readable discriminator naming the failed check; absent when none applies. */
  declare reason?: string;

  protected constructor(message: string, info: SvcErrorInfo) {
    super(message);
    // Assigned (not declared as class fields) so they are own enumerable data properties in
    // every runtime regardless of the class-field semantics the bundler picks.
    this.code = info.code;
    this.status = info.status;
    this.retryable = info.retryable;
    if (info.reason !== undefined) this.reason = info.reason;
  }
}

/**
 * A token, scope, ingress, access-class or proof-of-possession check refused the call.
 * Status 401 for a missing or invalid token, 403 for a missing scope or access mismatch.
 */
export class CapabilityAuthError extends SvcError {
  constructor(message: string, options: { status?: 401 | 403; reason: string }) {
    super(message, {
      code: 'capability_auth',
      status: options.status ?? 401,
      retryable: false,
      reason: options.reason,
    });
    this.name = 'CapabilityAuthError';
  }
}

/** Input (422) or output / streamed item (500) failed its schema. */
export class AbilityValidationError extends SvcError {
  /** What the schema refused, one entry per issue; empty when the schema broke its contract. */
  declare issues: ValidationIssue[];

  constructor(
    message: string,
    options: { status?: 422 | 500; issues?: readonly ValidationIssue[]; reason?: string } = {},
  ) {
    super(message, {
      code: 'ability_validation',
      status: options.status ?? 422,
      retryable: false,
      reason: options.reason ?? (options.status === 500 ? 'invalid_output' : 'invalid_input'),
    });
    this.name = 'AbilityValidationError';
    // A copy: the caller's list stays theirs to change.
    this.issues = options.issues === undefined ? [] : [...options.issues];
  }
}

/** A deadline elapsed (504, retryable). */
export class SvcTimeoutError extends SvcError {
  constructor(message = 'Svc deadline exceeded', options: { reason?: string } = {}) {
    super(message, {
      code: 'timeout',
      status: 504,
      retryable: true,
      reason: options.reason ?? 'deadline_exceeded',
    });
    this.name = 'SvcTimeoutError';
  }
}

/**
 * A handler failed deliberately and chose what the caller sees. `status` defaults to 500;
 * `retryable` defaults by status (true for 408, 429, 502, 503, 504).
 *
 * @throws TypeError when `status` is not an integer from 400 to 599, `reason` is not 1 to 256
 *   characters of letters, digits and `_.:-`, `retryable` is not a boolean, or `options` has
 *   another key (a misspelt `retriable`). Read back, such a field would silently become 500 or
 *   vanish, so the author learns of it instead: thrown inside a handler, the TypeError is an
 *   unshaped failure, logged as `svc.ability.handler_failed`.
 */
export class AbilityHandlerError extends SvcError {
  constructor(
    message: string,
    options: { reason?: string; retryable?: boolean; status?: number } = {},
  ) {
    checkHandlerErrorOptions(options);
    const status = handlerErrorStatus(options.status);
    super(message, {
      code: 'handler',
      status,
      retryable: handlerErrorRetryable(options.retryable, status),
      ...(options.reason !== undefined ? { reason: handlerErrorReason(options.reason) } : {}),
    });
    this.name = 'AbilityHandlerError';
  }
}

const HANDLER_ERROR_OPTIONS: readonly string[] = ['reason', 'retryable', 'status'];

function checkHandlerErrorOptions(options: unknown): void {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(
      'AbilityHandlerError: options must be an object { reason?, retryable?, status? }',
    );
  }
  const key = firstUnknownKey(options, HANDLER_ERROR_OPTIONS);
  if (key !== undefined) {
    throw new TypeError(`AbilityHandlerError: ${unknownKeyProblem(key, HANDLER_ERROR_OPTIONS)}`);
  }
}

function handlerErrorStatus(status: unknown): number {
  if (status === undefined) return 500;
  const valid = validErrorStatus(status);
  if (valid === undefined) {
    throw new TypeError(
      `AbilityHandlerError: status must be an integer from 400 to 599, got ${String(status)}`,
    );
  }
  return valid;
}

function handlerErrorReason(reason: unknown): string {
  const valid = validReason(reason);
  if (valid === undefined) {
    throw new TypeError(
      `AbilityHandlerError: reason must be 1 to ${MAX_REASON_LENGTH} characters of letters, ` +
        'digits and `_.:-`',
    );
  }
  return valid;
}

function handlerErrorRetryable(retryable: unknown, status: number): boolean {
  if (retryable === undefined) return isRetryableStatusByDefault(status);
  if (typeof retryable !== 'boolean') {
    throw new TypeError('AbilityHandlerError: retryable must be a boolean');
  }
  return retryable;
}

/** Anything else: an unshaped handler failure, a broken schema, a bug. Status 500. */
export class SvcInternalError extends SvcError {
  constructor(message: string, options: { reason?: string; status?: number } = {}) {
    const status = validErrorStatus(options.status) ?? 500;
    super(message, {
      code: 'internal',
      status,
      retryable: isRetryableStatusByDefault(status),
      ...(options.reason !== undefined ? { reason: options.reason } : {}),
    });
    this.name = 'SvcInternalError';
  }
}

/**
 * A definition or configuration was refused (at definition, setup or construction time).
 * The message names the thing at fault.
 */
export class SvcConfigurationError extends SvcError {
  constructor(message: string, options: { reason?: string } = {}) {
    super(message, {
      code: 'internal',
      status: 500,
      retryable: false,
      reason: options.reason ?? 'configuration',
    });
    this.name = 'SvcConfigurationError';
  }
}

const CODES: ReadonlySet<string> = new Set<SvcErrorCode>([
  'capability_auth',
  'ability_validation',
  'timeout',
  'handler',
  'internal',
]);

const MAX_REASON_LENGTH = 256;
const REASON_PATTERN = /^[\w.:-]+$/;

function validErrorStatus(status: unknown): number | undefined {
  return typeof status === 'number' && Number.isInteger(status) && status >= 400 && status <= 599
    ? status
    : undefined;
}

function validReason(reason: unknown): string | undefined {
  return typeof reason === 'string' && reason.length > 0 && reason.length <= MAX_REASON_LENGTH &&
      REASON_PATTERN.test(reason)
    ? reason
    : undefined;
}

const INTERNAL: SvcErrorInfo = Object.freeze({ code: 'internal', status: 500, retryable: false });

/**
 * The taxonomy fields of a thrown value with a valid `code`, read once each. A thrown value can
 * be anything, getters and proxies included: one that throws while being read is no taxonomy
 * error (and is replaced like any unshaped failure), never a second exception.
 */
function taxonomyFields(
  error: unknown,
): { code: string; status: unknown; retryable: unknown; reason: unknown } | undefined {
  if (error === null || (typeof error !== 'object' && typeof error !== 'function')) {
    return undefined;
  }
  try {
    const { code, status, retryable, reason } = error as Record<string, unknown>;
    return typeof code === 'string' && CODES.has(code)
      ? { code, status, retryable, reason }
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Reads the error info record of a local or received error, re-validating every field.
 *
 * A peer controls every property of a received error, so nothing is trusted as sent:
 * refusals (`capability_auth`, `ability_validation`) are never retryable, their statuses are
 * pinned to the ones the taxonomy allows, timeouts are always 504, and an error without a valid
 * taxonomy shape reads as `internal` / 500 / not retryable.
 */
export function svcErrorInfo(error: unknown): SvcErrorInfo {
  const record = taxonomyFields(error);
  if (record === undefined) return { ...INTERNAL };
  const code = record.code as SvcErrorCode;
  const reason = validReason(record.reason);
  const withReason = (info: SvcErrorInfo): SvcErrorInfo =>
    reason === undefined ? info : { ...info, reason };
  const status = validErrorStatus(record.status);
  switch (code) {
    case 'capability_auth':
      return withReason({ code, status: status === 403 ? 403 : 401, retryable: false });
    case 'ability_validation':
      return withReason({ code, status: status === 500 ? 500 : 422, retryable: false });
    case 'timeout':
      return withReason({ code, status: 504, retryable: true });
    case 'handler': {
      const handlerStatus = status ?? 500;
      const retryable = typeof record.retryable === 'boolean'
        ? record.retryable
        : isRetryableStatusByDefault(handlerStatus);
      return withReason({ code, status: handlerStatus, retryable });
    }
    default: {
      // `internal` keeps a valid 4xx/5xx status (a 405 for a stream over HTTP-batch, say). A
      // sender may withhold retry but never grant it beyond the status default, so a peer
      // cannot make a 500 look transient (a handler that means it uses AbilityHandlerError).
      const internalStatus = status ?? 500;
      return withReason({
        code: 'internal',
        status: internalStatus,
        retryable: isRetryableStatusByDefault(internalStatus) && record.retryable !== false,
      });
    }
  }
}

/** Whether an error (local or received) already carries a valid taxonomy `code`. */
export function hasSvcErrorShape(error: unknown): boolean {
  return typeof error === 'object' && taxonomyFields(error) !== undefined;
}

const handlerFailureCauses = new WeakMap<object, unknown>();

/** The message of the opaque error that replaces an unshaped handler failure. */
export function opaqueHandlerFailureMessage(methodName: string): string {
  return `Svc ability handler failed: ${methodName}`;
}

/**
 * Builds the opaque 500 that replaces an unshaped handler throw. The original is kept in a
 * process-local side table, never as `cause`, so it cannot be serialised to the caller.
 */
export function opaqueHandlerFailure(methodName: string, original: unknown): SvcInternalError {
  const opaque = new SvcInternalError(opaqueHandlerFailureMessage(methodName), {
    reason: 'handler_failed',
  });
  // The stack would reveal service file paths; the replacement exists to say nothing.
  opaque.stack = `${opaque.name}: ${opaque.message}`;
  handlerFailureCauses.set(opaque, original);
  return opaque;
}

/**
 * The original failure behind an opaque `Svc ability handler failed` error, in the process that
 * replaced it. Returns `undefined` for any other error and for errors received over RPC.
 */
export function handlerFailureCause(error: unknown): unknown {
  return error !== null && typeof error === 'object' ? handlerFailureCauses.get(error) : undefined;
}
