/**
 * How checks of options, documents and received fields look at a value they were handed: whether
 * it is a plain object (an object literal, not an array or a class instance), how a refused
 * value is named in an error message without quoting more of it than a glance needs, and the
 * one refusal of a key that no reader of an options object knows.
 *
 * @module
 */
import { SvcConfigurationError } from './errors.ts';
import { firstUnknownKey, unknownKeyProblem } from './unknown-keys.ts';

/** Whether `value` is an object literal (or has a `null` prototype). */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const prototype = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/**
 * A short description of a refused value for an error message: numbers and booleans as written,
 * strings quoted and cut at 40 characters, anything else by its kind.
 */
export function describeConfigValue(value: unknown): string {
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (typeof value === 'string') return JSON.stringify(value.slice(0, 40));
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}

/** How {@link refuseUnknownKeys} words and tags its refusal. */
export interface UnknownKeyRefusal {
  /** What a key is called in the message: `option` (default) or `field` for definitions. */
  noun?: 'option' | 'field';
  /** The `reason` of the thrown `SvcConfigurationError`; default `configuration`. */
  reason?: string;
  /** A sentence appended to the message, for advice specific to one option object. */
  advice?: string;
}

/**
 * Refuses an options object (or a definition) carrying a key nobody reads. A misspelt key
 * would otherwise leave its default in force without a word, and some defaults are the unsafe
 * choice (an `ingres` typo serving non-brokered tokens). Throws `SvcConfigurationError` with the
 * message ``<label>: unknown option `<key>` (accepted: a, b, c)``; keys whose value is
 * `undefined` count too, since a misspelt key is wrong whatever it holds.
 */
export function refuseUnknownKeys(
  value: object,
  known: readonly string[],
  label: string,
  refusal: UnknownKeyRefusal = {},
): void {
  const key = firstUnknownKey(value, known);
  if (key === undefined) return;
  const advice = refusal.advice === undefined ? '' : `. ${refusal.advice}`;
  throw new SvcConfigurationError(
    `${label}: ${unknownKeyProblem(key, known, refusal.noun)}${advice}`,
    { reason: refusal.reason ?? 'configuration' },
  );
}
