import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type } from 'arktype';
import { z } from 'zod';
import { SvcConfigurationError } from '../../src/core/errors.ts';
import type { SvcSchema } from '../../src/core/schema.ts';
import { abilityMethod, methodJsonSchemas } from '../../src/service/method.ts';

// workerd permits code generation only at startup, where arktype compiles its validators, so
// arktype schemas are declared at module scope.
const arkItem = type({ id: 'string', 'note?': 'string' });

const itemInput = z.object({ id: z.string(), name: z.string().optional() });
const anyOutput = z.object({});

function refuses(definition: unknown, pattern: RegExp): void {
  assert.throws(
    () => abilityMethod(definition as never),
    (error) => {
      assert.ok(error instanceof SvcConfigurationError, String(error));
      assert.match(error.message, pattern);
      return true;
    },
  );
}

test('a valid definition is normalised and frozen', () => {
  const method = abilityMethod({
    input: itemInput,
    output: anyOutput,
    scopes: ['svc-a.read', 'svc-a.read'],
    rest: { method: 'get', path: '/items/{id}' },
    mcp: { name: 'items_get', description: 'Get an item' },
    idempotent: true,
    timeoutMs: 2_000,
    description: 'Reads one item',
  });
  assert.equal(Object.isFrozen(method), true);
  assert.deepEqual(method.scopes, ['svc-a.read']);
  assert.deepEqual(method.rest, { method: 'get', path: '/items/{id}', status: 200 });
  assert.equal(method.idempotent, true);
  assert.equal(method.stream, false);
  assert.equal(method.timeoutMs, 2_000);
  assert.equal(method.description, 'Reads one item');
});

test('a schema lacking ~standard.validate or ~standard.jsonSchema is refused', () => {
  const jsonSchema = { input: () => ({}), output: () => ({}) };
  const noValidate = { '~standard': { version: 1, vendor: 'x', jsonSchema } };
  const noJsonSchema = { '~standard': { version: 1, vendor: 'x', validate: () => ({ value: 1 }) } };
  refuses({ input: noValidate, output: anyOutput }, /input lacks `~standard.validate`/);
  refuses({ input: itemInput, output: noJsonSchema }, /output lacks `~standard.jsonSchema`/);
  refuses({ input: 'not a schema', output: anyOutput }, /input is not a schema object/);
});

test('the refusal of a schema without Standard JSON Schema names the libraries that qualify', () => {
  // zod 3's shape: Standard Schema (validate, vendor 'zod'), no jsonSchema.
  const zod3 = { '~standard': { version: 1, vendor: 'zod', validate: () => ({ value: 1 }) } };
  refuses(
    { input: zod3, output: anyOutput },
    /input lacks `~standard.jsonSchema` \(this zod version implements Standard Schema only; .*zod >= 4\.2, arktype >= 2\.1\.28, or valibot .*@valibot\/to-json-schema >= 1\.5\)/,
  );
  refuses(
    { input: 42, output: anyOutput },
    /input is not a schema object \(a schema must implement/,
  );
});

test('a schema whose JSON Schema projection throws is refused at definition', () => {
  const broken = {
    '~standard': {
      version: 1,
      vendor: 'x',
      validate: (value: unknown) => ({ value }),
      jsonSchema: {
        input: () => {
          throw new Error('cannot represent');
        },
        output: () => ({}),
      },
    },
  } as unknown as SvcSchema;
  refuses({ input: broken, output: anyOutput }, /input cannot be projected.*cannot represent/);
});

test('rest.method must be one of get, post, put, patch, delete, query', () => {
  for (const method of ['get', 'post', 'put', 'patch', 'delete', 'query'] as const) {
    assert.equal(
      abilityMethod({ input: itemInput, output: anyOutput, rest: { method, path: '/items' } })
        .rest?.method,
      method,
    );
  }
  for (const method of ['GET', 'head', 'options', 'trace', '', 1]) {
    refuses({ input: itemInput, output: anyOutput, rest: { method, path: '/x' } }, /rest\.method/);
  }
});

test('rest.path must start with / and use whole-segment variables that are input fields', () => {
  const cases: [string, RegExp][] = [
    ['items', /rest\.path must be a string starting with/],
    ['/items/{}', /empty variable/],
    ['/items/{missing}', /variable \{missing\} is not a top-level input field/],
    ['/items/{id}.json', /not a literal segment/],
    ['/items//x', /empty segments/],
    ['/items/', /empty segments/],
    ['/items/{id}/{id}', /repeats the variable/],
    ['/items?x=1', /not a literal segment/],
    ['/items/{id', /not a literal segment/],
    ['/it ems', /not a literal segment/],
  ];
  for (const [path, pattern] of cases) {
    refuses({ input: itemInput, output: anyOutput, rest: { method: 'get', path } }, pattern);
  }
});

/** A recursive input: zod writes it as `{ $ref: '#/$defs/Category', $defs: { Category } }`. */
const Category: z.ZodType = z.object({
  name: z.string(),
  get children() {
    return z.array(Category).optional();
  },
}).meta({ id: 'MethodTestCategory' });

test('REST r3 follows an input schema whose root is a local $ref to the object it names', () => {
  assert.equal(
    methodJsonSchemas(
      abilityMethod({ input: Category, output: anyOutput }),
    ).input.$ref,
    '#/$defs/MethodTestCategory',
  );
  const method = abilityMethod({
    input: Category,
    output: anyOutput,
    rest: { method: 'get', path: '/categories/{name}' },
  });
  assert.deepEqual(method.rest, { method: 'get', path: '/categories/{name}', status: 200 });
  refuses(
    { input: Category, output: anyOutput, rest: { method: 'get', path: '/categories/{slug}' } },
    /\{slug\} is not a top-level input field/,
  );
  // A field of a nested definition is not a top-level field.
  refuses(
    {
      input: Category,
      output: anyOutput,
      rest: { method: 'get', path: '/categories/{name}/{x}' },
    },
    /\{x\} is not a top-level input field/,
  );
});

test('REST r3 path variables are checked against the input JSON Schema of any library', () => {
  const method = abilityMethod({
    input: arkItem,
    output: anyOutput,
    rest: { method: 'post', path: '/notes/{id}', status: 201 },
  });
  assert.deepEqual(method.rest, { method: 'post', path: '/notes/{id}', status: 201 });
  refuses(
    { input: arkItem, output: anyOutput, rest: { method: 'post', path: '/notes/{noteId}' } },
    /\{noteId\} is not a top-level input field/,
  );
  // A nested field is not a top-level field.
  refuses(
    {
      input: z.object({ item: z.object({ id: z.string() }) }),
      output: anyOutput,
      rest: { method: 'get', path: '/items/{id}' },
    },
    /\{id\} is not a top-level input field/,
  );
});

test('REST r3 a path variable must name a field that can hold a string (path values are strings)', () => {
  const refusing: [string, z.ZodType][] = [
    ['integer', z.number().int()],
    ['number', z.number()],
    ['boolean', z.boolean()],
    ['object', z.object({ a: z.string() })],
    ['literal 1', z.literal(1)],
    ['integer or null', z.number().nullable()],
  ];
  for (const [what, field] of refusing) {
    assert.throws(
      () =>
        abilityMethod({
          input: z.object({ id: field }),
          output: anyOutput,
          rest: { method: 'get', path: '/items/{id}' },
        }),
      (error: unknown) =>
        error instanceof SvcConfigurationError &&
        /rest\.path.*variable \{id\} names a field that cannot hold a string/.test(error.message),
      what,
    );
  }
  const accepting: [string, z.ZodType][] = [
    ['string', z.string()],
    ['digits', z.string().regex(/^[0-9]+$/)],
    ['enum', z.enum(['a', 'b'])],
    ['string or null', z.string().nullable()],
    ['literal', z.literal('x')],
    ['uuid', z.uuid()],
  ];
  for (const [what, field] of accepting) {
    const method = abilityMethod({
      input: z.object({ id: field }),
      output: anyOutput,
      rest: { method: 'get', path: '/items/{id}' },
    });
    assert.equal(method.rest?.path, '/items/{id}', what);
  }
});

test('rest.status must be an integer from 200 to 299', () => {
  for (const status of [199, 300, 404, 200.5, '200']) {
    refuses(
      { input: itemInput, output: anyOutput, rest: { method: 'post', path: '/items', status } },
      /rest\.status/,
    );
  }
  assert.equal(
    abilityMethod({
      input: itemInput,
      output: anyOutput,
      rest: { method: 'post', path: '/items', status: 299 },
    }).rest?.status,
    299,
  );
});

test('REST r6 a streaming method cannot declare a REST projection', () => {
  refuses(
    { input: itemInput, output: anyOutput, stream: true, rest: { method: 'get', path: '/items' } },
    /rest cannot be declared on a streaming method/,
  );
});

test('a streaming method may project an MCP tool', () => {
  const method = abilityMethod({
    input: itemInput,
    output: anyOutput,
    stream: true,
    mcp: { name: 'items.watch', description: 'Watch items' },
  });
  assert.equal(method.stream, true);
  assert.equal(method.mcp?.name, 'items.watch');
});

test('mcp.name must match /^[A-Za-z0-9_.-]{1,128}$/ and mcp.description be a string', () => {
  for (const name of ['', 'has space', 'slash/name', 'x'.repeat(129), 'ünicode']) {
    refuses(
      { input: itemInput, output: anyOutput, mcp: { name, description: 'd' } },
      /mcp\.name/,
    );
  }
  refuses(
    { input: itemInput, output: anyOutput, mcp: { name: 'ok', description: 3 } },
    /mcp\.description/,
  );
  assert.equal(
    abilityMethod({
      input: itemInput,
      output: anyOutput,
      mcp: { name: 'A-z_0.9', description: '' },
    }).mcp?.name,
    'A-z_0.9',
  );
});

test('timeoutMs must be a non-negative integer; 0 opts out', () => {
  assert.equal(abilityMethod({ input: itemInput, output: anyOutput, timeoutMs: 0 }).timeoutMs, 0);
  // Not clamped to the 10-minute wire limit.
  assert.equal(
    abilityMethod({ input: itemInput, output: anyOutput, timeoutMs: 3_600_000 }).timeoutMs,
    3_600_000,
  );
  for (const timeoutMs of [-1, 1.5, Number.NaN, Infinity, '100', 1e12]) {
    refuses({ input: itemInput, output: anyOutput, timeoutMs }, /timeoutMs/);
  }
});

test('a streaming method cannot declare a ceiling other than 0', () => {
  refuses({ input: itemInput, output: anyOutput, stream: true, timeoutMs: 500 }, /streaming/);
  assert.equal(
    abilityMethod({ input: itemInput, output: anyOutput, stream: true, timeoutMs: 0 }).timeoutMs,
    0,
  );
});

test('flags, scopes and unknown fields are checked', () => {
  refuses({ input: itemInput, output: anyOutput, idempotent: false }, /idempotent must be `true`/);
  refuses({ input: itemInput, output: anyOutput, stream: 'yes' }, /stream must be `true`/);
  refuses({ input: itemInput, output: anyOutput, scopes: 'svc-a.read' }, /scopes must be an array/);
  refuses({ input: itemInput, output: anyOutput, scopes: ['has space'] }, /whitespace/);
  refuses({ input: itemInput, output: anyOutput, scopes: [''] }, /non-empty/);
  refuses(
    { input: itemInput, output: anyOutput, timeout: 5 },
    /unknown field `timeout`/,
  );
  refuses({ input: itemInput, output: anyOutput, description: 5 }, /description must be a string/);
});

test('the JSON Schemas are computed once, draft 2020-12, and handed out as copies', () => {
  const method = abilityMethod({ input: itemInput, output: arkItem });
  const first = methodJsonSchemas(method);
  assert.equal(first.input.$schema, 'https://json-schema.org/draft/2020-12/schema');
  assert.deepEqual(Object.keys(first.input.properties as object).sort(), ['id', 'name']);
  assert.deepEqual(Object.keys(first.output.properties as object).sort(), ['id', 'note']);
  (first.input as Record<string, unknown>).tampered = true;
  assert.equal('tampered' in methodJsonSchemas(method).input, false);
});
