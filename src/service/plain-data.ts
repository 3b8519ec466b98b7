/**
 * Telling plain data from values that hold resources. A Cap'n Web session disposes, when it
 * ends, what it exported: functions, RPC targets, stubs, promises and streams among the values
 * it returned. Plain data holds none of them, so a session that only ever returned plain data
 * has nothing to dispose.
 *
 * @module
 */

/** Most values looked at before a value is taken as not plain (a cycle, or just very large). */
export const MAX_PLAIN_DATA_NODES = 10_000;

/** Whether `value` is a leaf Cap'n Web carries as data and never disposes. */
function isDataLeaf(value: object): boolean {
  return value instanceof Date || value instanceof Uint8Array || value instanceof Error;
}

/** Whether `value` is an array or object whose members are walked as data. */
function isDataContainer(value: object): boolean {
  const prototype = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null || prototype === Array.prototype;
}

/**
 * Whether `value` is plain data all the way down: primitives, plain objects and arrays, dates,
 * byte arrays and errors. Anything else (a function, a class instance such as an RPC target or a
 * stream, a stub, a promise, a proxy whose traps throw) is not, and neither is a value with more
 * than {@link MAX_PLAIN_DATA_NODES} members (a cycle among them): the answer errs towards "not
 * plain", never the other way.
 */
export function isPlainData(value: unknown): boolean {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return true;
  const pending: unknown[] = [value];
  let seen = 0;
  try {
    while (pending.length > 0) {
      const next = pending.pop();
      if (next === null || typeof next !== 'object') {
        if (typeof next === 'function') return false;
        continue;
      }
      if (++seen > MAX_PLAIN_DATA_NODES) return false;
      if (isDataLeaf(next)) continue;
      if (!isDataContainer(next)) return false;
      for (const member of Object.values(next)) pending.push(member);
    }
  } catch {
    // A getter or proxy trap that throws: whatever it guards is not plain data.
    return false;
  }
  return true;
}
