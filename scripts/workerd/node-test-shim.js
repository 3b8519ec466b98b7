// A small stand-in for `node:test` inside workerd: it records flat `test()` calls and file-level
// hooks, and runs them when the harness asks. Only what the suite uses is implemented; anything
// else throws so a test cannot pass by accident.
const registered = [];
const hooks = { before: [], after: [], beforeEach: [], afterEach: [] };

function normalise(name, options, fn) {
  if (typeof options === 'function') return { name, options: {}, fn: options };
  return { name, options: options ?? {}, fn };
}

export function test(name, options, fn) {
  registered.push(normalise(name, options, fn));
}
test.skip = () => {
  throw new Error('test.skip is not allowed: pass { skip: "<reason>" }');
};
test.only = () => {
  throw new Error('test.only is not allowed');
};
export const it = test;
export function describe() {
  throw new Error('describe is not supported: the suite uses flat test() calls');
}
export const before = (fn) => hooks.before.push(fn);
export const after = (fn) => hooks.after.push(fn);
export const beforeEach = (fn) => hooks.beforeEach.push(fn);
export const afterEach = (fn) => hooks.afterEach.push(fn);
export const mock = new Proxy({}, {
  get() {
    throw new Error('node:test mock is not available in the workerd shim');
  },
});
export default test;

async function withTimeout(promise, ms, name) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`test timed out after ${ms} ms: ${name}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function describeError(error) {
  if (error instanceof Error) return `${error.name}: ${error.message}\n${error.stack ?? ''}`;
  return String(error);
}

/** Runs every registered test in order and returns one record per test. */
export async function runRegisteredTests() {
  const results = [];
  for (const fn of hooks.before) await fn();
  for (const { name, options, fn } of registered) {
    if (options.skip) {
      results.push({ name, status: 'skipped', reason: String(options.skip) });
      continue;
    }
    const controller = new AbortController();
    const context = { name, signal: controller.signal, diagnostic() {} };
    try {
      for (const hook of hooks.beforeEach) await hook(context);
      await withTimeout(Promise.resolve().then(() => fn(context)), options.timeout ?? 60_000, name);
      for (const hook of hooks.afterEach) await hook(context);
      results.push({ name, status: 'passed' });
    } catch (error) {
      results.push({ name, status: 'failed', error: describeError(error) });
    } finally {
      controller.abort();
    }
  }
  for (const fn of hooks.after) await fn();
  return results;
}
