import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SvcConfigurationError } from '../../src/core/errors.ts';
import { z } from 'zod';
import { defineCapabilities } from '../../src/service/capabilities.ts';
import { parseServiceDiscoveryDocument } from '../../src/service/discovery.ts';
import { abilityMethod } from '../../src/service/method.ts';

const anyObject = z.object({});

function refuses(catalog: unknown, pattern: RegExp): void {
  assert.throws(
    () => defineCapabilities(catalog as never),
    (error) => {
      assert.ok(error instanceof SvcConfigurationError, String(error));
      assert.match(error.message, pattern);
      return true;
    },
  );
}

test('a catalog is validated and returned frozen', () => {
  const catalog = defineCapabilities({
    serviceId: 'svc-a',
    scopes: { 'svc-a.read': { description: 'Read items' }, 'svc-a.write': {} },
  });
  assert.equal(catalog.serviceId, 'svc-a');
  assert.deepEqual({ ...catalog.scopes }, {
    'svc-a.read': { description: 'Read items' },
    'svc-a.write': {},
  });
  assert.equal(Object.isFrozen(catalog), true);
  assert.equal(Object.isFrozen(catalog.scopes), true);
  assert.equal(Object.isFrozen(catalog.scopes!['svc-a.read']), true);
});

test('an empty catalog is valid', () => {
  assert.deepEqual(defineCapabilities({}), {});
});

test('the input is copied: later edits do not change the catalog', () => {
  const scopes: Record<string, { description?: string }> = { 'svc-a.read': { description: 'x' } };
  const catalog = defineCapabilities({ scopes });
  scopes['svc-a.read'].description = 'changed';
  scopes['svc-a.admin'] = {};
  assert.deepEqual(Object.keys(catalog.scopes!), ['svc-a.read']);
  assert.equal(catalog.scopes!['svc-a.read'].description, 'x');
});

test('scope names must be non-empty without whitespace or control characters', () => {
  for (const name of ['', 'has space', 'tab\tname', 'line\nbreak', 'nul\u0000', 'x'.repeat(257)]) {
    refuses({ scopes: { [name]: {} } }, /scope/);
  }
});

test('scope names refuse C1 controls and invisible format characters, wherever they are declared', () => {
  // NEL, the terminal escape CSI, a zero-width space, a bidi override, a soft hyphen: each makes
  // a name that prints like another while comparing unequal.
  const lookalikes = ['\u0085', '\u009b31m', '\u200b', '\u202e', '\u00ad'];
  for (const tail of lookalikes) {
    const scope = `svc-a.read${tail}`;
    refuses({ scopes: { [scope]: {} } }, /invisible format characters/);
    assert.throws(
      () => abilityMethod({ input: anyObject, output: anyObject, scopes: [scope] }),
      (error: unknown) =>
        error instanceof SvcConfigurationError && /invisible format characters/.test(error.message),
      JSON.stringify(scope),
    );
    assert.throws(
      () =>
        parseServiceDiscoveryDocument({
          id: 'svc-a',
          title: 'A',
          version: '1',
          capabilities: { serviceId: 'svc-a', scopes: { [scope]: {} } },
          abilities: [],
        }, 'svc-a'),
      SvcConfigurationError,
      JSON.stringify(scope),
    );
  }
});

test('serviceId, descriptions and unknown fields are checked', () => {
  refuses({ serviceId: '' }, /serviceId must be a non-empty string/);
  refuses({ serviceId: 5 }, /serviceId must be a non-empty string/);
  refuses({ scopes: { 'svc-a.read': { description: 5 } } }, /description must be a string/);
  refuses({ scopes: { 'svc-a.read': 'Read' } }, /must be an object/);
  refuses(
    { scopes: { 'svc-a.read': { title: 'x' } } },
    /unknown field `title` \(accepted: description\)/,
  );
  refuses({ scopes: ['svc-a.read'] }, /scopes must be an object/);
  refuses({ service: 'svc-a' }, /unknown field `service`/);
  refuses(null, /catalog must be an object/);
});

test('a scope named __proto__ is an ordinary scope, not a prototype', () => {
  const catalog = defineCapabilities({
    scopes: JSON.parse('{"__proto__":{"description":"p"},"svc-a.read":{}}'),
  });
  assert.deepEqual(Object.keys(catalog.scopes!), ['__proto__', 'svc-a.read']);
  assert.deepEqual(Object.getOwnPropertyDescriptor(catalog.scopes, '__proto__')?.value, {
    description: 'p',
  });
});
