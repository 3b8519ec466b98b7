/**
 * The shapes of the names an ability definition declares: ability ids, method names, scope
 * names, MCP tool names and RPC paths. Definitions and received discovery documents are checked
 * against the same rules, so a service cannot publish what the plane would refuse.
 *
 * @module
 */

/**
 * An ability id is `<service>.<name>`: exactly one dot separating two non-empty parts of ASCII
 * letters, digits, `-` and `_` (for example `svc-a.echo`). One dot keeps the service part
 * unambiguous, which is why service ids cannot contain dots.
 */
export const ABILITY_ID_PATTERN = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/** Longest ability id accepted. */
export const MAX_ABILITY_ID_LENGTH = 256;

/** A method name: 1 to 128 ASCII letters, digits, `_`, `.` or `-` (so `items.get` works). */
export const METHOD_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;

/** An MCP tool name: 1 to 128 ASCII letters, digits, `_`, `.` or `-`. */
export const MCP_TOOL_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;

/** Longest scope name accepted. */
export const MAX_SCOPE_NAME_LENGTH = 256;

// Whitespace and control characters would make two scopes look equal in logs and configuration
// while comparing unequal, so they are refused outright.
// deno-lint-ignore no-control-regex
const SCOPE_FORBIDDEN_CHARACTER = /[\s\u0000-\u001f\u007f]/;

/**
 * Method names that a caller could not reach, or that would change how the ability object
 * behaves, when reached by name over RPC: the gateway's `authenticate`, the promise protocol
 * (`then`, `catch`, `finally`), the names a Cap'n Web stub answers itself (`dup`, `map`,
 * `onRpcBroken`), and everything on `Object.prototype` (checked separately).
 */
const RESERVED_METHOD_NAMES: ReadonlySet<string> = new Set([
  'authenticate',
  'constructor',
  'then',
  'catch',
  'finally',
  'dup',
  'map',
  'onRpcBroken',
]);

/** Whether a string is a well-formed ability id. */
export function isAbilityId(value: unknown): value is string {
  return typeof value === 'string' && value.length <= MAX_ABILITY_ID_LENGTH &&
    ABILITY_ID_PATTERN.test(value);
}

/** Why a method name cannot be declared, or `undefined` when it can. */
export function methodNameProblem(name: string): string | undefined {
  if (!METHOD_NAME_PATTERN.test(name)) {
    return 'must be 1 to 128 ASCII letters, digits, `_`, `.` or `-`';
  }
  if (RESERVED_METHOD_NAMES.has(name) || name in Object.prototype) {
    return 'is reserved (it cannot be reached by name over RPC)';
  }
  return undefined;
}

/** Why a scope name is not acceptable, or `undefined` when it is. */
export function scopeNameProblem(scope: unknown): string | undefined {
  if (typeof scope !== 'string' || scope.length === 0) return 'must be a non-empty string';
  if (scope.length > MAX_SCOPE_NAME_LENGTH) {
    return `must be at most ${MAX_SCOPE_NAME_LENGTH} characters`;
  }
  if (SCOPE_FORBIDDEN_CHARACTER.test(scope)) {
    return 'must not contain whitespace or control characters';
  }
  return undefined;
}

/** Why an RPC path is not acceptable, or `undefined` when it is. */
export function rpcPathProblem(path: unknown): string | undefined {
  if (typeof path !== 'string' || !path.startsWith('/')) {
    return 'must be a string starting with `/`';
  }
  if (/[\s?#{}*:]/.test(path) || path.includes('//')) {
    return 'must be a literal path without whitespace, `?`, `#`, `{`, `}`, `*`, `:` or `//`';
  }
  return undefined;
}
