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

/**
 * Whether `text` holds whitespace, a control character (C0 or C1, such as U+0085 or the terminal
 * escape U+009B) or an invisible format character (zero-width, bidi override, soft hyphen). Such
 * names would look equal in logs and configuration while comparing unequal, so names that are
 * matched exactly (scopes, grant callers) refuse them outright.
 */
export function hasLookalikeCharacter(text: string): boolean {
  return /[\s\p{Cc}\p{Cf}]/u.test(text);
}

/**
 * Method names that a caller could not reach, or that would change how the ability object
 * behaves, when reached by name over RPC: the gateway's `authenticate`, the promise protocol
 * (`then`, `catch`, `finally`), the names a Cap'n Web stub answers itself (`dup`, `map`,
 * `onRpcBroken`), and everything on `Object.prototype` (checked separately).
 */
const RESERVED_METHOD_NAMES: ReadonlySet<string> = new Set([
  'authenticate',
  // A caller's session answers it itself, so that logging or serialising a session never
  // sends a call.
  'toJSON',
  'constructor',
  'then',
  'catch',
  'finally',
  'dup',
  'map',
  'onRpcBroken',
]);

/**
 * Whether `abilityId` names an ability of `serviceId`: its service part (before the one dot) is
 * that id. Abilities are named after their service, so no other ability can be served by it.
 */
export function isAbilityOfService(abilityId: string, serviceId: string): boolean {
  return abilityId.startsWith(`${serviceId}.`);
}

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
  if (hasLookalikeCharacter(scope)) {
    return 'must not contain whitespace, control or invisible format characters';
  }
  return undefined;
}

/**
 * Whether a scope is written as a pattern. Patterns are never expanded: a grant or request for
 * `svc-a.*` would otherwise read as permission for scopes the target adds later.
 */
export function isWildcardScope(scope: string): boolean {
  return scope.includes('*');
}

/** One RPC path segment: RFC 3986 unreserved characters only, so it needs no escaping. */
const RPC_PATH_SEGMENT = /^[A-Za-z0-9._~-]+$/;

/**
 * Where a service serves its own routes (discovery); an ability route there would shadow them,
 * or be shadowed by them.
 */
const SERVICE_ROUTES_PREFIX = '/.well-known/svc/';

/**
 * Why an RPC path is not acceptable, or `undefined` when it is.
 *
 * The plane appends a received path to the service's base URL and sends a token there, so the
 * path must name exactly one route below that base whatever parses it: no `.` or `..` segment
 * (resolved away by URL parsers), no `%` escape (decoded by some), no `\` (read as `/` by WHATWG
 * URL parsers), and no empty segment (`//` becomes a host in a relative reference). A trailing
 * `/` stays accepted, as it always was.
 */
export function rpcPathProblem(path: unknown): string | undefined {
  if (typeof path !== 'string' || !path.startsWith('/')) {
    return 'must be a string starting with `/`';
  }
  const segments = path.slice(1).split('/');
  if (segments.length > 1 && segments.at(-1) === '') segments.pop();
  if (!segments.every((segment) => RPC_PATH_SEGMENT.test(segment))) {
    return 'must be a literal path: non-empty segments of ASCII letters, digits, `-`, `.`, `_` ' +
      'or `~`, separated by single `/`';
  }
  if (segments.some((segment) => segment === '.' || segment === '..')) {
    return 'must not contain a `.` or `..` segment';
  }
  if (`${path}/`.startsWith(SERVICE_ROUTES_PREFIX)) {
    return `must not be ${SERVICE_ROUTES_PREFIX} or below it (the service's own routes)`;
  }
  return undefined;
}
