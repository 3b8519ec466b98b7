// How this project bundles code for workerd, shared by the in-workerd test runner and the
// host-driven Worker tests: one ES module, resolved as a Worker resolves packages.

/** The compatibility date every Worker of the test suite runs with. */
export const WORKERD_COMPATIBILITY_DATE = '2026-07-01';

/**
 * esbuild options for a Workers bundle: `cloudflare:*` and `node:*` modules stay imports
 * (workerd provides them); packages resolve their `workerd`/`worker`/`browser` builds.
 */
export const WORKERD_BUNDLE_OPTIONS = Object.freeze({
  bundle: true,
  write: false,
  format: 'esm',
  platform: 'neutral',
  target: 'es2022',
  conditions: ['workerd', 'worker', 'browser', 'import'],
  mainFields: ['module', 'main'],
  logLevel: 'silent',
});
