// The options every serving helper shares: loopback and an ephemeral port unless told
// otherwise, and nothing a listener would read differently from what was meant.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SvcConfigurationError } from '../../src/core/errors.ts';
import { DEFAULT_SERVE_HOSTNAME, resolveServeOptions } from '../../src/adapters/serve-target.ts';

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
