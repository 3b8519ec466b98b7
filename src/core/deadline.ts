/**
 * Deadline budgets: the relative milliseconds a caller grants a call, how they are read from the
 * wire, how policies and method ceilings shape them, and how a hop measures what is left.
 *
 * A budget is advisory input from any caller (it is never an authorization input), so parsing is
 * strict: only a plain positive integer counts, everything else is ignored rather than refused.
 * Configuration, by contrast, is ours, and an invalid value refuses the construction.
 *
 * @module
 */
import { describeConfigValue, isPlainObject, refuseUnknownKeys } from './config-values.ts';
import { SvcConfigurationError } from './errors.ts';

/** Ceiling of every unary ability method, service side, when nothing else is configured. */
export const DEFAULT_ABILITY_TIMEOUT_MS = 10_000;

/** Clamp applied to any caller-supplied budget (10 minutes). */
export const MAX_SVC_TIMEOUT_MS = 600_000;

/** A caller waits this much longer than the budget it forwards, so the peer's verdict wins. */
export const SVC_TIMEOUT_GRACE_MS = 250;

/** Header that carries the budget over HTTP-batch and service-binding transports. */
export const SVC_TIMEOUT_HEADER = 'X-Svc-Timeout';

/** Query parameter that carries the budget on a WebSocket upgrade URL. */
export const SVC_TIMEOUT_QUERY_PARAM = 'timeout';

/** Largest per-method or service-wide ceiling a definition may declare (24 hours). */
export const MAX_METHOD_TIMEOUT_MS = 86_400_000;

// Any number of digits: a budget too large for a number reads as Infinity, then clamps.
const PLAIN_DECIMAL_BUDGET = /^[0-9]+$/;

/**
 * Reads a budget from a header or query value. Only a plain decimal positive integer is a budget;
 * it is clamped to {@link MAX_SVC_TIMEOUT_MS}. Signs, fractions, exponents, hex, whitespace,
 * trailing text, zero and the empty string are ignored (`undefined`), never an error.
 */
export function parseTimeoutBudget(raw: string | null | undefined): number | undefined {
  if (typeof raw !== 'string' || !PLAIN_DECIMAL_BUDGET.test(raw)) return undefined;
  const value = Number(raw);
  return value > 0 ? Math.min(value, MAX_SVC_TIMEOUT_MS) : undefined;
}

/**
 * Reads a budget from a numeric field (the native binding's `timeoutMs`): a positive safe
 * integer, clamped to {@link MAX_SVC_TIMEOUT_MS}; anything else is ignored (`undefined`).
 */
export function normalizeTimeoutBudget(value: unknown): number | undefined {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) return undefined;
  return Math.min(value, MAX_SVC_TIMEOUT_MS);
}

/** The `timeout` option of the control plane and of a service. */
export interface TimeoutPolicy {
  /** Budget supplied on per-call transports (HTTP-batch) when the caller sent none. */
  defaultMs?: number;
  /** Clamp applied to any budget, supplied or defaulted. */
  maxMs?: number;
}

function requirePolicyMs(value: unknown, label: string, field: string): number {
  if (
    typeof value !== 'number' || !Number.isInteger(value) || value <= 0 ||
    value > MAX_SVC_TIMEOUT_MS
  ) {
    throw new SvcConfigurationError(
      `${label}: timeout.${field} must be a positive integer number of milliseconds no greater ` +
        `than ${MAX_SVC_TIMEOUT_MS} (got ${describeConfigValue(value)})`,
      { reason: 'invalid_timeout_policy' },
    );
  }
  return value;
}

/** The fields of a {@link TimeoutPolicy}: what a `timeout` option holds unless told otherwise. */
export const TIMEOUT_POLICY_FIELDS: readonly string[] = ['defaultMs', 'maxMs'];

/**
 * Validates a `timeout: { defaultMs, maxMs }` option at construction. `undefined` means no
 * policy. Each present field must be a positive integer of at most {@link MAX_SVC_TIMEOUT_MS};
 * `defaultMs` may not exceed `maxMs`. A key `known` does not list is refused (a misspelt
 * `defaultMS` would leave no default in force); the ones beyond the policy's own (a service's
 * `methodMs`) are left to their own validator and are not copied. Throws
 * `SvcConfigurationError` naming `label` and the field.
 */
export function validateTimeoutPolicy(
  policy: unknown,
  label: string,
  known: readonly string[] = TIMEOUT_POLICY_FIELDS,
): TimeoutPolicy {
  if (policy === undefined) return {};
  if (!isPlainObject(policy)) {
    throw new SvcConfigurationError(
      `${label}: timeout must be an object { defaultMs?, maxMs? } (got ${
        describeConfigValue(policy)
      })`,
      { reason: 'invalid_timeout_policy' },
    );
  }
  refuseUnknownKeys(policy, known, label, { reason: 'invalid_timeout_policy' });
  const validated: TimeoutPolicy = {};
  if (policy.defaultMs !== undefined) {
    validated.defaultMs = requirePolicyMs(policy.defaultMs, label, 'defaultMs');
  }
  if (policy.maxMs !== undefined) {
    validated.maxMs = requirePolicyMs(policy.maxMs, label, 'maxMs');
  }
  if (
    validated.defaultMs !== undefined && validated.maxMs !== undefined &&
    validated.defaultMs > validated.maxMs
  ) {
    throw new SvcConfigurationError(
      `${label}: timeout.defaultMs (${validated.defaultMs}) exceeds timeout.maxMs ` +
        `(${validated.maxMs})`,
      { reason: 'invalid_timeout_policy' },
    );
  }
  return validated;
}

/**
 * Applies a validated policy to the budget a call arrived with. `defaultMs` is used only on a
 * per-call transport and only when the caller sent no budget (a WebSocket budget is fixed at
 * open, so a default there would bound the whole session); `maxMs` clamps whatever results.
 */
export function applyTimeoutPolicy(
  budget: number | undefined,
  policy: TimeoutPolicy | undefined,
  options: { perCallTransport: boolean },
): number | undefined {
  let effective = budget;
  if (effective === undefined && options.perCallTransport) effective = policy?.defaultMs;
  if (effective !== undefined && policy?.maxMs !== undefined) {
    effective = Math.min(effective, policy.maxMs);
  }
  return effective;
}

function refuseCeiling(label: string, field: string, rule: string, value: unknown): never {
  throw new SvcConfigurationError(
    `${label}: ${field} must be ${rule} (got ${describeConfigValue(value)})`,
    {
      reason: 'invalid_method_timeout',
    },
  );
}

/**
 * Validates a method definition's `timeoutMs` at definition time: a non-negative integer of at
 * most 24 hours, where `0` opts the method out of any ceiling. `undefined` means not declared.
 * It is deliberately not clamped to the wire limit. Throws `SvcConfigurationError` naming `label`.
 */
export function validateMethodTimeoutMs(value: unknown, label: string): number | undefined {
  if (value === undefined) return undefined;
  if (
    typeof value !== 'number' || !Number.isInteger(value) || value < 0 ||
    value > MAX_METHOD_TIMEOUT_MS
  ) {
    refuseCeiling(
      label,
      'timeoutMs',
      `a non-negative integer number of milliseconds no greater than ${MAX_METHOD_TIMEOUT_MS}`,
      value,
    );
  }
  return value;
}

/**
 * Validates a service's `timeout.methodMs`: a positive integer of at most 24 hours, or `false`
 * to remove the service-wide ceiling. `undefined` means not configured. Throws
 * `SvcConfigurationError` naming `label`.
 */
export function validateServiceMethodCeiling(
  value: unknown,
  label: string,
): number | false | undefined {
  if (value === undefined || value === false) return value;
  if (
    typeof value !== 'number' || !Number.isInteger(value) || value <= 0 ||
    value > MAX_METHOD_TIMEOUT_MS
  ) {
    refuseCeiling(
      label,
      'timeout.methodMs',
      `false or a positive integer number of milliseconds no greater than ${MAX_METHOD_TIMEOUT_MS}`,
      value,
    );
  }
  return value;
}

/**
 * The ceiling that bounds one method on the service side, or `undefined` for none.
 *
 * The method's own `timeoutMs` is the most specific setting and wins (`0` = no ceiling). Without
 * it, a unary method gets the service-wide `timeout.methodMs` (`false` = no ceiling), else
 * {@link DEFAULT_ABILITY_TIMEOUT_MS}. A streaming method is bounded only by its own `timeoutMs`:
 * the defaults exist for unary calls and a deadline never bounds a stream's lifetime.
 */
export function effectiveMethodCeilingMs(options: {
  methodTimeoutMs?: number;
  serviceMethodMs?: number | false;
  stream?: boolean;
}): number | undefined {
  if (options.methodTimeoutMs !== undefined) {
    return options.methodTimeoutMs === 0 ? undefined : options.methodTimeoutMs;
  }
  if (options.stream === true) return undefined;
  if (options.serviceMethodMs === false) return undefined;
  return options.serviceMethodMs ?? DEFAULT_ABILITY_TIMEOUT_MS;
}

/**
 * The budget that expires first among several (caller budget, method ceiling, policy);
 * `undefined` entries are unbounded, and all-unbounded yields `undefined`.
 */
export function earliestBudgetMs(...budgets: (number | undefined)[]): number | undefined {
  let earliest: number | undefined;
  for (const budget of budgets) {
    if (budget !== undefined && (earliest === undefined || budget < earliest)) earliest = budget;
  }
  return earliest;
}

/** A point in time by which a call must finish, measured on the local clock. */
export interface Deadline {
  /** Epoch milliseconds at which the budget runs out, or `undefined` when unbounded. */
  readonly endsAt: number | undefined;
  /** Milliseconds left (never negative), or `undefined` when unbounded. */
  remainingMs(): number | undefined;
  /** Whether a bounded budget has run out. An unbounded deadline never expires. */
  expired(): boolean;
}

/**
 * Starts measuring a relative budget on this hop's clock. `undefined` (or `Infinity`) is
 * unbounded; `0`, a negative or `NaN` budget is already spent, so the call fails immediately
 * (fail closed). `clock` exists so tests need not wait.
 */
export function deadlineFromBudget(
  budgetMs: number | undefined,
  now: number = Date.now(),
  clock: () => number = () => Date.now(),
): Deadline {
  if (budgetMs === undefined || budgetMs === Infinity) {
    return { endsAt: undefined, remainingMs: () => undefined, expired: () => false };
  }
  const endsAt = now + (budgetMs > 0 ? budgetMs : 0);
  const remainingMs = () => Math.max(0, endsAt - clock());
  return { endsAt, remainingMs, expired: () => remainingMs() === 0 };
}

/** The longest delay a timer accepts (signed 32 bits): a longer one fires at once everywhere. */
export const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

/**
 * How long a caller waits locally for a call it forwarded `budgetMs` with, as a timer delay
 * (at most about 24.8 days: any budget past that waits that long, never less).
 */
export function callerWaitMs(budgetMs: number): number {
  return Math.min(budgetMs + SVC_TIMEOUT_GRACE_MS, MAX_TIMER_DELAY_MS);
}
