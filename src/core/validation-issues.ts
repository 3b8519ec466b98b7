/**
 * Validation issues as a caller may rely on them.
 *
 * An `ability_validation` refusal carries `issues`, a list of `{ message, path? }`. Locally that
 * is an `AbilityValidationError`; received over RPC it is a plain `Error` whose own properties are
 * whatever the peer sent, so a forged or broken peer can put anything there: a string for a
 * list, a million entries, a number for a message, an object inside a path. The same reading
 * bounds what a problem body lists and what a caller gets: a record without a string message is
 * dropped, a message is cut, a path that does not fit is dropped (its issue stays).
 *
 * @module
 */
import { type SvcErrorInfo, svcErrorInfo, type ValidationIssue } from './errors.ts';

/** Most issues read from one refusal; later ones are dropped. */
export const MAX_VALIDATION_ISSUES = 100;

/** Longest issue message kept; a longer one is cut and ends with `…`. */
export const MAX_VALIDATION_ISSUE_MESSAGE_LENGTH = 2048;

/** Most segments in an issue's path; a deeper path is dropped. */
export const MAX_VALIDATION_ISSUE_PATH_DEPTH = 64;

/** Longest property name in an issue's path; a path with a longer one is dropped. */
export const MAX_VALIDATION_ISSUE_PATH_KEY_LENGTH = 1024;

/**
 * One path segment as Standard Schema gives it (a property key, or `{ key }`), reduced to a
 * string or an integer (an index), as the OpenAPI document describes it; `undefined` when it is
 * neither (a symbol, an object, NaN, a fraction).
 */
export function issuePathSegment(segment: unknown): string | number | undefined {
  const key = segment !== null && typeof segment === 'object' && 'key' in segment
    ? (segment as { key: unknown }).key
    : segment;
  if (typeof key === 'string') return key;
  if (typeof key === 'number' && Number.isSafeInteger(key)) return key;
  return undefined;
}

function boundedMessage(message: string): string {
  return message.length > MAX_VALIDATION_ISSUE_MESSAGE_LENGTH
    ? `${message.slice(0, MAX_VALIDATION_ISSUE_MESSAGE_LENGTH)}…`
    : message;
}

function boundedPath(raw: unknown): (string | number)[] | undefined {
  if (!Array.isArray(raw) || raw.length > MAX_VALIDATION_ISSUE_PATH_DEPTH) return undefined;
  const path: (string | number)[] = [];
  for (let index = 0; index < raw.length; index++) {
    const segment = issuePathSegment(raw[index]);
    if (segment === undefined) return undefined;
    if (typeof segment === 'string' && segment.length > MAX_VALIDATION_ISSUE_PATH_KEY_LENGTH) {
      return undefined;
    }
    path.push(segment);
  }
  return path;
}

/** One `{ message, path? }` record read from `raw`, or `undefined` when it has no string message. */
function readIssue(raw: unknown): ValidationIssue | undefined {
  if (raw === null || typeof raw !== 'object') return undefined;
  const { message, path } = raw as { message?: unknown; path?: unknown };
  if (typeof message !== 'string') return undefined;
  const issue: ValidationIssue = { message: boundedMessage(message) };
  const checkedPath = boundedPath(path);
  if (checkedPath !== undefined) issue.path = checkedPath;
  return issue;
}

/**
 * The issues of `raw` that fit `{ message: string, path?: (string | integer)[] }`, at most
 * {@link MAX_VALIDATION_ISSUES}, as fresh records; `undefined` when `raw` is no array. A value
 * whose reading throws (a getter, a proxy) yields what was read before it.
 */
export function readValidationIssues(raw: unknown): ValidationIssue[] | undefined {
  if (!Array.isArray(raw)) return undefined;
  const issues: ValidationIssue[] = [];
  try {
    const count = Math.min(raw.length, MAX_VALIDATION_ISSUES);
    for (let index = 0; index < count; index++) {
      const issue = readIssue(raw[index]);
      if (issue !== undefined) issues.push(issue);
    }
  } catch {
    // What threw is not an issue; the ones already read stand.
  }
  return issues;
}

/**
 * An `ability_validation` refusal, local or received, after {@link isAbilityValidationError}
 * checked it: 422 for invalid input, 500 for an invalid output or streamed item (whose issues
 * carry no library message, only where the value went wrong).
 */
export interface AbilityValidationFailure extends Error {
  /** Always `ability_validation`. */
  readonly code: 'ability_validation';
  /** 422 for input; 500 for output or a streamed item. */
  readonly status: 422 | 500;
  /** A refusal is never transient. */
  readonly retryable: false;
  /** `invalid_input`, `invalid_output`, `schema_contract_broken`, ... when the sender named one. */
  readonly reason?: string;
  /** What the schema refused, checked and bounded; empty when none was sent. */
  readonly issues: readonly ValidationIssue[];
}

function ownsTaxonomyOf(error: object, info: SvcErrorInfo, issues: ValidationIssue[]): void {
  const define = (key: string, value: unknown) =>
    Object.defineProperty(error, key, {
      value,
      writable: true,
      enumerable: true,
      configurable: true,
    });
  define('code', info.code);
  define('status', info.status);
  define('retryable', info.retryable);
  if (info.reason === undefined) {
    if (!Reflect.deleteProperty(error, 'reason')) throw new TypeError('reason is fixed');
  } else define('reason', info.reason);
  define('issues', issues);
}

function isErrorObject(value: unknown): value is Error {
  // The tag, not `instanceof`: an error from another realm (a Worker isolate, a vm context) is
  // still an error.
  return value !== null && typeof value === 'object' &&
    Object.prototype.toString.call(value) === '[object Error]';
}

/**
 * Whether `error` is an `ability_validation` refusal, local or received over any transport. When
 * it is, the error is normalised in place so that its type holds: `issues` becomes the checked
 * copy ({@link readValidationIssues}: bounded, malformed records dropped, `[]` when the sender
 * sent none or no list), and `code`, `status`, `retryable`, `reason` the values `svcErrorInfo`
 * reads (a peer cannot make a refusal retryable or give it another status). An error that cannot
 * be normalised (frozen, a proxy that refuses) is not reported as one.
 */
export function isAbilityValidationError(error: unknown): error is AbilityValidationFailure {
  if (!isErrorObject(error)) return false;
  const info = svcErrorInfo(error);
  if (info.code !== 'ability_validation') return false;
  let raw: unknown;
  try {
    raw = (error as { issues?: unknown }).issues;
  } catch {
    raw = undefined;
  }
  try {
    ownsTaxonomyOf(error, info, readValidationIssues(raw) ?? []);
    return true;
  } catch {
    return false;
  }
}
