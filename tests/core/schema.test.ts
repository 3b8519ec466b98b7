import { test } from 'node:test';
import assert from 'node:assert/strict';
import { z } from 'zod';
import { type } from 'arktype';
import {
  jsonSchemaOf,
  schemaContractProblem,
  type SvcSchema,
  validateWithSchema,
} from '../../src/core/schema.ts';
import { AbilityValidationError, svcErrorInfo } from '../../src/core/errors.ts';

const DRAFT_2020_12 = 'https://json-schema.org/draft/2020-12/schema';

const zodNote = z.object({ title: z.string(), count: z.number().int() });
const arkNote = type({ title: 'string', count: 'number.integer' });
// workerd permits code generation only at startup, where arktype compiles its validators, so
// arktype schemas are declared at module scope.
const arkFound = type({ id: 'string', found: 'boolean' });
const arkDate = type({ at: 'Date' });
const arkBigint = type({ n: 'bigint' });
const arkSymbol = type({ s: 'symbol' });
const arkUndefinedField = type({ u: 'undefined' });
const arkMap = type({ m: ['instanceof', Map] });
const arkNarrowed = type({ even: type('number').narrow((n) => n % 2 === 0) });
const stringLength = (value: string) => value.length;
const arkTransformRoot = type('string').pipe(stringLength);
const arkTransformRootUnion = type('string').pipe(stringLength).or('number');
const arkTransformField = type({ n: type('string').pipe(stringLength) });
const arkTransformFieldUnion = type({ n: type('string').pipe(stringLength).or('number') });
const arkTransformItems = type({ s: 'string' }).pipe((value) => value.s).array();
const arkTransformDeclared = type('string').pipe(stringLength).to('number');
const arkParsedField = type({ n: 'string.numeric.parse' });

/** A schema whose validate is under test control; the JSON Schema side is well formed. */
function fakeSchema(validate: (value: unknown) => unknown): SvcSchema {
  return {
    '~standard': {
      version: 1,
      vendor: 'fake',
      validate,
      jsonSchema: { input: () => ({ type: 'object' }), output: () => ({ type: 'object' }) },
    },
  } as unknown as SvcSchema;
}

async function rejection(promise: Promise<unknown>): Promise<AbilityValidationError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof AbilityValidationError, `expected AbilityValidationError: ${error}`);
    return error;
  }
  assert.fail('expected a rejection');
}

test('zod and arktype schemas implement both contracts', () => {
  assert.equal(schemaContractProblem(zodNote), undefined);
  assert.equal(schemaContractProblem(arkNote), undefined);
});

test('zod and arktype schemas validate and return the parsed value', async () => {
  for (const schema of [zodNote, arkNote] as SvcSchema[]) {
    assert.deepEqual(
      await validateWithSchema(schema, { title: 'a', count: 2 }, 'input', 'notes.create'),
      {
        title: 'a',
        count: 2,
      },
    );
  }
  const trimmed = z.object({ title: z.string().trim() });
  assert.deepEqual(await validateWithSchema(trimmed, { title: '  a ' }, 'input', 'm'), {
    title: 'a',
  });
});

test('input failures are 422 with { message, path } issues', async () => {
  for (const schema of [zodNote, arkNote] as SvcSchema[]) {
    const error = await rejection(
      validateWithSchema(schema, { title: 1, count: 1.5 }, 'input', 'notes.create'),
    );
    assert.equal(error.status, 422);
    assert.equal(error.reason, 'invalid_input');
    assert.deepEqual(svcErrorInfo(error), {
      code: 'ability_validation',
      status: 422,
      retryable: false,
      reason: 'invalid_input',
    });
    assert.ok(error.message.includes('notes.create'));
    assert.equal(error.issues.length, 2);
    const paths = error.issues.map((issue) => issue.path).sort();
    assert.deepEqual(paths, [['count'], ['title']]);
    for (const issue of error.issues) {
      // Plain arrays only: an Array subclass from the library would not cross the RPC boundary.
      assert.equal(Object.getPrototypeOf(issue.path), Array.prototype);
      assert.deepEqual(Object.keys(issue.path!), ['0']);
      assert.equal(typeof issue.message, 'string');
      assert.ok(issue.message.length > 0);
      assert.deepEqual(Object.keys(issue).sort(), ['message', 'path']);
    }
  }
});

test('output failures are 500', async () => {
  for (const schema of [zodNote, arkNote] as SvcSchema[]) {
    const error = await rejection(
      validateWithSchema(schema, { title: 'a' }, 'output', 'notes.get'),
    );
    assert.equal(error.status, 500);
    assert.equal(error.reason, 'invalid_output');
    assert.equal(svcErrorInfo(error).status, 500);
    assert.deepEqual(error.issues.map((issue) => issue.path), [['count']]);
  }
});

test('nested issue paths keep string and number segments', async () => {
  const schema = z.object({ items: z.array(z.object({ id: z.string() })) });
  const error = await rejection(
    validateWithSchema(schema, { items: [{ id: 'a' }, { id: 2 }] }, 'input', 'm'),
  );
  assert.deepEqual(error.issues.map((issue) => issue.path), [['items', 1, 'id']]);
  const withKeys = fakeSchema(() => ({
    issues: [{ message: 'bad', path: [{ key: 'a' }, { key: 0 }] }],
  }));
  const keyed = await rejection(validateWithSchema(withKeys, {}, 'input', 'm'));
  assert.deepEqual(keyed.issues, [{ message: 'bad', path: ['a', 0] }]);
  const noPath = fakeSchema(() => ({ issues: [{ message: 'root problem' }] }));
  assert.deepEqual((await rejection(validateWithSchema(noPath, {}, 'input', 'm'))).issues, [
    { message: 'root problem' },
  ]);
});

test('issues carry only message and path, nothing else from the library', async () => {
  const noisy = fakeSchema(() => ({
    issues: [{ message: 'bad', path: ['a'], input: 'SECRET', code: 'x', expected: 'string' }],
  }));
  const error = await rejection(validateWithSchema(noisy, {}, 'output', 'm'));
  assert.deepEqual(error.issues, [{ message: 'bad', path: ['a'] }]);
});

test('input and output may come from different libraries', async () => {
  const input = z.object({ id: z.string() });
  const output = arkFound;
  const value = await validateWithSchema(input, { id: 'n1' }, 'input', 'notes.get');
  assert.deepEqual(
    await validateWithSchema(output, { ...value, found: true }, 'output', 'notes.get'),
    {
      id: 'n1',
      found: true,
    },
  );
});

test('a schema whose validate throws fails closed with schema_contract_broken', async () => {
  const throwing = fakeSchema(() => {
    throw new Error('SECRET-internal');
  });
  for (const side of ['input', 'output'] as const) {
    const error = await rejection(validateWithSchema(throwing, {}, side, 'm'));
    assert.equal(error.reason, 'schema_contract_broken');
    assert.equal(error.status, side === 'input' ? 422 : 500);
    assert.ok(!error.message.includes('SECRET'));
  }
  const rejecting = fakeSchema(() => Promise.reject(new Error('async failure')));
  assert.equal(
    (await rejection(validateWithSchema(rejecting, {}, 'input', 'm'))).reason,
    'schema_contract_broken',
  );
});

test('a schema result that throws while being read fails closed with schema_contract_broken', async () => {
  const secret = () => {
    throw new Error('SECRET-internal');
  };
  const results = [
    { issues: { [Symbol.iterator]: secret } },
    {
      issues: [{
        get message() {
          return secret();
        },
      }],
    },
    {
      issues: [{
        message: 'bad',
        get path() {
          return secret();
        },
      }],
    },
    {
      get issues() {
        return secret();
      },
    },
    {
      get then() {
        return secret();
      },
    },
    Promise.resolve({
      get value() {
        return secret();
      },
    }),
  ];
  for (const [index, result] of results.entries()) {
    for (const side of ['input', 'output'] as const) {
      const error = await rejection(validateWithSchema(fakeSchema(() => result), {}, side, 'm'));
      assert.equal(error.reason, 'schema_contract_broken', `result ${index} ${side}`);
      assert.equal(error.status, side === 'input' ? 422 : 500);
      assert.ok(!error.message.includes('SECRET'));
    }
  }
});

test('a schema returning neither a value nor issues fails closed', async () => {
  for (const result of [{}, null, undefined, 42, 'ok', { issues: undefined }, { issues: null }]) {
    const schema = fakeSchema(() => result);
    const error = await rejection(validateWithSchema(schema, {}, 'input', 'm'));
    assert.equal(error.reason, 'schema_contract_broken', `result ${JSON.stringify(result)}`);
  }
});

test('a schema returning malformed issues fails closed', async () => {
  const malformed: unknown[] = [
    [],
    'not issues',
    42,
    [null],
    [{ path: ['a'] }],
    [{ message: 7 }],
    [{ message: 'ok' }, 'bad'],
    { length: 1 },
  ];
  for (const issues of malformed) {
    const schema = fakeSchema(() => ({ issues }));
    const error = await rejection(validateWithSchema(schema, {}, 'output', 'm'));
    assert.equal(error.reason, 'schema_contract_broken', `issues ${JSON.stringify(issues)}`);
    assert.equal(error.status, 500);
  }
});

test('an async validate result is awaited', async () => {
  const asyncOk = fakeSchema(async (value) => ({ value: { wrapped: value } }));
  assert.deepEqual(await validateWithSchema(asyncOk, 1, 'input', 'm'), { wrapped: 1 });
  const asyncIssues = fakeSchema(async () => ({ issues: [{ message: 'no' }] }));
  assert.equal((await rejection(validateWithSchema(asyncIssues, 1, 'input', 'm'))).status, 422);
  const undefinedValue = fakeSchema(() => ({ value: undefined }));
  assert.equal(await validateWithSchema(undefinedValue, undefined, 'output', 'm'), undefined);
});

test('zod and arktype project JSON Schema draft 2020-12', () => {
  for (const schema of [zodNote, arkNote] as SvcSchema[]) {
    for (const side of ['input', 'output'] as const) {
      const projected = jsonSchemaOf(schema, side);
      assert.equal(projected.$schema, DRAFT_2020_12);
      assert.equal(projected.type, 'object');
      const properties = projected.properties as Record<string, { type: string }>;
      assert.equal(properties.title.type, 'string');
      assert.equal(properties.count.type, 'integer');
      assert.deepEqual([...(projected.required as string[])].sort(), ['count', 'title']);
    }
  }
});

test('jsonSchemaOf refuses a projection that is not an object', () => {
  const bad = {
    '~standard': {
      version: 1,
      vendor: 'fake',
      validate: (value: unknown) => ({ value }),
      jsonSchema: { input: () => [] as unknown, output: () => 'string' as unknown },
    },
  } as unknown as SvcSchema;
  assert.throws(() => jsonSchemaOf(bad, 'input'), TypeError);
  assert.throws(() => jsonSchemaOf(bad, 'output'), TypeError);
});

test('jsonSchemaOf refuses arktype types JSON cannot carry, never projecting them as {}', () => {
  // arktype's Standard JSON Schema hook answers `{}` ("anything") for these by default: a field
  // no JSON caller can fill would be published as one that takes any value.
  const cases: [string, SvcSchema, RegExp][] = [
    ['Date', arkDate, /a Date cannot be represented/],
    ['bigint', arkBigint, /bigint, symbol or undefined cannot be represented/],
    ['symbol', arkSymbol, /bigint, symbol or undefined cannot be represented/],
    ['undefined', arkUndefinedField, /cannot be represented/],
    ['class instance', arkMap, /an instance of a class cannot be represented/],
  ];
  for (const [what, schema, message] of cases) {
    for (const side of ['input', 'output'] as const) {
      assert.throws(
        () => jsonSchemaOf(schema, side),
        (error: unknown) => error instanceof TypeError && message.test(error.message),
        `${what} (${side})`,
      );
    }
  }
  // A narrowing predicate still projects its base type, as zod's refine does.
  assert.deepEqual(jsonSchemaOf(arkNarrowed as SvcSchema, 'input'), {
    $schema: DRAFT_2020_12,
    type: 'object',
    properties: { even: { type: 'number' } },
    required: ['even'],
  });
});

test('jsonSchemaOf refuses an arktype transform whose result has no declared type', () => {
  // arktype projects such a result as `{}` ("anything"), as if the output were unconstrained.
  const refused: [string, SvcSchema, RegExp][] = [
    ['root', arkTransformRoot, /transform \(morph\) has no declared type/],
    ['root union', arkTransformRootUnion, /\(morph\) has no declared/],
    ['field', arkTransformField, /\(morph\) at n has no declared/],
    ['field union', arkTransformFieldUnion, /\(morph\) at n has no declared/],
    ['array item', arkTransformItems, /\(morph\) at \[index\] has no declared/],
  ];
  for (const [where, schema, message] of refused) {
    assert.throws(
      () => jsonSchemaOf(schema, 'output'),
      (error: unknown) => error instanceof TypeError && message.test(error.message),
      where,
    );
    // The input side is what a caller sends, and stays describable.
    assert.equal(typeof jsonSchemaOf(schema, 'input'), 'object', where);
  }
  // A transform that declares its result (`.to`, or arktype's own parsers) projects that type.
  assert.deepEqual(jsonSchemaOf(arkTransformDeclared, 'output'), {
    $schema: DRAFT_2020_12,
    type: 'number',
  });
  const parsed = jsonSchemaOf(arkParsedField, 'output');
  assert.deepEqual((parsed.properties as Record<string, unknown>).n, { type: 'number' });
});

test('jsonSchemaOf refuses a projection that is not JSON data or has a non-numeric bound', () => {
  const projecting = (projection: unknown) =>
    ({
      '~standard': {
        version: 1,
        vendor: 'fake',
        validate: (value: unknown) => ({ value }),
        jsonSchema: { input: () => projection, output: () => projection },
      },
    }) as unknown as SvcSchema;
  const cyclic: Record<string, unknown> = { type: 'object' };
  cyclic.properties = { self: cyclic };
  const refused: [unknown, RegExp][] = [
    [{ type: 'number', maximum: Infinity }, /Infinity at \/maximum, which JSON cannot carry/],
    [{ type: 'object', properties: { n: { const: Number.NaN } } }, /NaN at \/properties\/n\/const/],
    [{ type: 'object', default: undefined }, /type undefined at \/default/],
    [{ type: 'string', format: new Date(0) }, /not plain data at \/format/],
    [cyclic, /a cycle at \/properties\/self/],
    // zod writes `null` for `.max(Infinity)`; JSON Schema needs a number there.
    [
      { anyOf: [{ type: 'string', maxLength: null }] },
      /maxLength: null at \/anyOf\/0, which must be a number/,
    ],
    [{ $defs: { X: { type: 'array', minItems: '1' } } }, /minItems: "1" at \/\$defs\/X/],
  ];
  for (const [projection, message] of refused) {
    assert.throws(
      () => jsonSchemaOf(projecting(projection), 'input'),
      (error: unknown) => error instanceof TypeError && message.test(error.message),
      message.source,
    );
  }
  // A property that happens to be named like a keyword is a subschema, not a bound.
  const named = { type: 'object', properties: { maximum: { type: 'string' } } };
  assert.deepEqual(jsonSchemaOf(projecting(named), 'input'), named);
  assert.throws(
    () => jsonSchemaOf(z.object({ n: z.number().max(Infinity) }), 'input'),
    /maximum: null at \/properties\/n/,
  );
});

test('jsonSchemaOf asks the library for draft 2020-12', () => {
  const targets: unknown[] = [];
  const recording = {
    '~standard': {
      version: 1,
      vendor: 'fake',
      validate: (value: unknown) => ({ value }),
      jsonSchema: {
        input: (options: { target: string }) => (targets.push(options.target), { type: 'string' }),
        output: (options: { target: string }) => (targets.push(options.target), { type: 'number' }),
      },
    },
  } as unknown as SvcSchema;
  assert.deepEqual(jsonSchemaOf(recording, 'input'), { type: 'string' });
  assert.deepEqual(jsonSchemaOf(recording, 'output'), { type: 'number' });
  assert.deepEqual(targets, ['draft-2020-12', 'draft-2020-12']);
});

test('schemaContractProblem names what a non-schema lacks', () => {
  assert.equal(schemaContractProblem(null), 'is not a schema object');
  assert.equal(schemaContractProblem('string'), 'is not a schema object');
  assert.equal(schemaContractProblem({}), 'lacks `~standard`');
  assert.equal(schemaContractProblem({ '~standard': {} }), 'lacks `~standard.validate`');
  assert.equal(
    schemaContractProblem({ '~standard': { validate: () => ({ value: 1 }) } }),
    'lacks `~standard.jsonSchema`',
  );
  assert.equal(
    schemaContractProblem({
      '~standard': { validate: () => ({ value: 1 }), jsonSchema: { input: () => ({}) } },
    }),
    'lacks `~standard.jsonSchema.input` / `.output`',
  );
  assert.equal(
    schemaContractProblem({
      '~standard': { jsonSchema: { input: () => ({}), output: () => ({}) } },
    }),
    'lacks `~standard.validate`',
  );
});
