// The options every serving helper shares: loopback and an ephemeral port unless told
// otherwise, and nothing a listener would read differently from what was meant.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SvcConfigurationError } from '../../src/core/errors.ts';
import {
  checkFetchTarget,
  DEFAULT_SERVE_HOSTNAME,
  resolveServeOptions,
} from '../../src/adapters/serve-target.ts';
import { workersEntrypoint } from '../../src/adapters/workers.ts';

test('serve options default to 127.0.0.1 and an ephemeral port', () => {
  assert.equal(DEFAULT_SERVE_HOSTNAME, '127.0.0.1');
  assert.deepEqual(resolveServeOptions({}), { hostname: '127.0.0.1', port: 0, env: {} });
  assert.deepEqual(resolveServeOptions({ hostname: '::1', port: 65_535 }), {
    hostname: '::1',
    port: 65_535,
    env: {},
  });
});

test('an empty hostname is refused: Node would listen on every interface', () => {
  for (const hostname of ['', '  ', 42]) {
    assert.throws(
      () => resolveServeOptions({ hostname } as { hostname: string }),
      (error: unknown) => error instanceof SvcConfigurationError && /hostname/.test(error.message),
      JSON.stringify(hostname),
    );
  }
});

test('a port outside 0-65535, fractional or not a number is refused', () => {
  for (const port of [-1, 65_536, 80.5, Number.NaN, '8080']) {
    assert.throws(
      () => resolveServeOptions({ port } as { port: number }),
      (error: unknown) => error instanceof SvcConfigurationError && /port/.test(error.message),
      String(port),
    );
  }
});

test('a misspelt serve option is refused, not served on the defaults', () => {
  for (const options of [{ host: '0.0.0.0' }, { prot: 8080 }, { hostname: '127.0.0.1', evn: {} }]) {
    assert.throws(
      () => resolveServeOptions(options as never, 'serveNode'),
      (error: unknown) =>
        error instanceof SvcConfigurationError &&
        /^serveNode: unknown option `\w+` \(accepted: port, hostname, env\)$/.test(error.message),
      JSON.stringify(options),
    );
  }
});

test('serve options that are not an object, or an env that is not a plain object, are refused', () => {
  for (const options of [null, 'port=80', [8080]]) {
    assert.throws(() => resolveServeOptions(options), SvcConfigurationError, String(options));
  }
  for (const env of ['abc', [1, 2], null, new Map()]) {
    assert.throws(
      () => resolveServeOptions({ env } as never),
      /`env` must be a plain object/,
      String(env),
    );
  }
  assert.deepEqual(resolveServeOptions({ env: { REGION: 'eu' } }).env, { REGION: 'eu' });
  assert.deepEqual(resolveServeOptions(undefined).env, {});
});

test('a target without a fetch handler is refused before anything is served', () => {
  for (const target of [undefined, null, {}, { fetch: 'https://x' }, 'svc']) {
    assert.throws(
      () => checkFetchTarget(target, 'serveBun'),
      /serveBun: the target must have a fetch/,
      String(target),
    );
    assert.throws(() => workersEntrypoint(target as never), SvcConfigurationError);
  }
  const target = { fetch: () => new Response('ok') };
  assert.equal(checkFetchTarget(target, 'serveBun'), target);
});
