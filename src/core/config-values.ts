/**
 * How checks of options, documents and received fields look at a value they were handed: whether
 * it is a plain object (an object literal, not an array or a class instance), and how a refused
 * value is named in an error message without quoting more of it than a glance needs.
 *
 * @module
 */

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
