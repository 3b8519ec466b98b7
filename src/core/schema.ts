/**
 * Standard Schema validation and Standard JSON Schema projection.
 *
 * A method's schemas may come from any library that implements both contracts; each schema is
 * used on its own, so an input from one library and an output from another work together.
 *
 * @module
 */
import type { StandardJSONSchemaV1, StandardSchemaV1 } from '@standard-schema/spec';
import { AbilityValidationError, type ValidationIssue } from './errors.ts';
import { issuePathSegment } from './validation-issues.ts';

/** A schema implementing both Standard Schema and Standard JSON Schema. */
export interface SvcSchema<Input = unknown, Output = Input> {
  /**
   * The schema library's properties: `validate` (Standard Schema) and `jsonSchema` (Standard
   * JSON Schema).
   */
  readonly '~standard':
    & StandardSchemaV1.Props<Input, Output>
    & StandardJSONSchemaV1.Props<Input, Output>;
}

/** The value type a schema accepts. */
export type SchemaInput<S> = S extends SvcSchema<infer I, any> ? I : never;
/** The value type a schema produces after validation. */
export type SchemaOutput<S> = S extends SvcSchema<any, infer O> ? O : never;

/** A JSON Schema (draft 2020-12) object. */
export type JsonSchema = Record<string, unknown>;

/**
 * The schema libraries that implement both contracts, with the first versions that do; named in
 * the refusal of a schema that does not, so its author knows what to install.
 */
export const QUALIFYING_SCHEMA_LIBRARIES =
  'zod >= 4.2, arktype >= 2.1.28, or valibot >= 1 wrapped in toStandardJsonSchema() from ' +
  '@valibot/to-json-schema >= 1.5';

/**
 * What to do about a schema that lacks a contract: which libraries qualify, and, for a library
 * that names itself as `vendor` (zod 3 implements Standard Schema but not Standard JSON
 * Schema), that its version is the problem.
 */
export function schemaContractAdvice(schema: unknown): string {
  const vendor = (schema as { '~standard'?: { vendor?: unknown } } | null | undefined)?.[
    '~standard'
  ]?.vendor;
  const named = typeof vendor === 'string' && vendor.length > 0 && vendor.length <= 40
    ? `this ${vendor} version implements Standard Schema only; `
    : '';
  return `${named}a schema must implement Standard Schema and Standard JSON Schema: ` +
    QUALIFYING_SCHEMA_LIBRARIES;
}

/**
 * Why a value does not implement the schema contracts, or `undefined` when it does.
 * Used at definition time so a broken schema refuses the definition instead of failing later.
 */
export function schemaContractProblem(schema: unknown): string | undefined {
  if (schema === null || (typeof schema !== 'object' && typeof schema !== 'function')) {
    return 'is not a schema object';
  }
  const props = (schema as Record<string, unknown>)['~standard'];
  if (props === null || typeof props !== 'object') return 'lacks `~standard`';
  const standard = props as Record<string, unknown>;
  if (typeof standard.validate !== 'function') return 'lacks `~standard.validate`';
  const jsonSchema = standard.jsonSchema as Record<string, unknown> | undefined;
  if (jsonSchema === null || typeof jsonSchema !== 'object') return 'lacks `~standard.jsonSchema`';
  if (typeof jsonSchema.input !== 'function' || typeof jsonSchema.output !== 'function') {
    return 'lacks `~standard.jsonSchema.input` / `.output`';
  }
  return undefined;
}

/** Turns library issues into `{ message, path? }` records and nothing else. */
function toIssues(raw: unknown): ValidationIssue[] | undefined {
  if (
    raw === null || typeof raw !== 'object' || typeof (raw as any)[Symbol.iterator] !== 'function'
  ) {
    return undefined;
  }
  const issues: ValidationIssue[] = [];
  for (const item of raw as Iterable<unknown>) {
    if (item === null || typeof item !== 'object') return undefined;
    const message = (item as { message?: unknown }).message;
    if (typeof message !== 'string') return undefined;
    const issue: ValidationIssue = { message };
    const rawPath = (item as { path?: unknown }).path;
    if (Array.isArray(rawPath)) {
      // Array.from, not map: a library's Array subclass (arktype's ReadonlyPath) would survive
      // `map` through Symbol.species, carry its own properties and fail RPC serialisation.
      const path = Array.from(rawPath, issuePathSegment);
      if (path.every((p) => p !== undefined)) issue.path = path as (string | number)[];
    }
    issues.push(issue);
  }
  return issues;
}

/** Which side of a method a value is validated for; decides the status of a failure. */
export type ValidationSide = 'input' | 'output';

function brokenContract(side: ValidationSide, label: string, what: string): AbilityValidationError {
  return new AbilityValidationError(`${label}: the ${side} schema ${what}`, {
    status: side === 'input' ? 422 : 500,
    reason: 'schema_contract_broken',
  });
}

/**
 * Reads a settled Standard Schema result: the value, or the refusal it stands for. A result
 * whose reading throws (a getter, an iterator) breaks the contract like a throwing validator:
 * the schema's own error never reaches the caller.
 */
function readValidationResult<T>(result: unknown, side: ValidationSide, label: string): T {
  try {
    return readResultFields(result, side, label);
  } catch (error) {
    if (error instanceof AbilityValidationError) throw error;
    throw brokenContract(side, label, 'failed while its result was read');
  }
}

function readResultFields<T>(result: unknown, side: ValidationSide, label: string): T {
  if (result !== null && typeof result === 'object') {
    const issuesField = (result as { issues?: unknown }).issues;
    if (issuesField) {
      const issues = toIssues(issuesField);
      if (issues === undefined || issues.length === 0) {
        throw brokenContract(side, label, 'returned malformed issues');
      }
      throw new AbilityValidationError(`${label}: invalid ${side}`, {
        status: side === 'input' ? 422 : 500,
        issues,
      });
    }
    if ('value' in result) return (result as { value: T }).value;
  }
  throw brokenContract(side, label, 'returned neither a value nor issues');
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return value !== null && typeof value === 'object' &&
    typeof (value as { then?: unknown }).then === 'function';
}

/**
 * Validates a value like {@link validateWithSchema}, but synchronously when the schema answers
 * synchronously (most do): the value itself, or a thrown `AbilityValidationError`. Only a schema
 * that answers with a promise yields a promise. This keeps the per-call path free of promise
 * hops for the common case.
 */
export function validateWithSchemaNow<S extends SvcSchema>(
  schema: S,
  value: unknown,
  side: ValidationSide,
  label: string,
): SchemaOutput<S> | Promise<SchemaOutput<S>> {
  let result: unknown;
  try {
    result = schema['~standard'].validate(value);
  } catch {
    throw brokenContract(side, label, 'failed while validating');
  }
  let thenable: boolean;
  try {
    thenable = isThenable(result);
  } catch {
    throw brokenContract(side, label, 'failed while its result was read');
  }
  if (!thenable) return readValidationResult(result, side, label);
  return Promise.resolve(result).then(
    (settled) => readValidationResult(settled, side, label),
    () => {
      throw brokenContract(side, label, 'failed while validating');
    },
  );
}

/**
 * Validates a value and returns the schema's output value, or throws `AbilityValidationError`:
 * 422 for input, 500 for output. A schema that throws, or returns neither a value nor issues,
 * fails closed with an `AbilityValidationError` as well.
 */
export async function validateWithSchema<S extends SvcSchema>(
  schema: S,
  value: unknown,
  side: ValidationSide,
  label: string,
): Promise<SchemaOutput<S>> {
  return await validateWithSchemaNow(schema, value, side, label);
}

/**
 * What JSON Schema cannot say about a value JSON cannot carry (a `Date`, a `bigint`, `undefined`,
 * a symbol, a class instance) or about a transform's result. arktype's Standard JSON Schema hook
 * answers `{}` ("anything") there unless told otherwise, which would publish a field no JSON
 * caller can ever fill as one that takes any value; these handlers make it refuse instead, as
 * zod does on its own. A narrowing predicate still degrades to its base type (as zod's refine
 * does): the published schema is then looser than validation, never wrong about the type.
 */
function unrepresentable(what: string): () => never {
  return () => {
    throw new TypeError(`${what} cannot be represented in JSON Schema`);
  };
}

const LIBRARY_OPTIONS: Record<string, Record<string, unknown>> = {
  arktype: {
    fallback: {
      date: unrepresentable('a Date'),
      domain: unrepresentable('a bigint, symbol or undefined'),
      morph: unrepresentable('the result of a transform (morph)'),
      proto: unrepresentable('an instance of a class'),
      symbolKey: unrepresentable('a symbol key'),
      unit: unrepresentable('a literal that is not JSON'),
    },
  },
};

/**
 * The JSON Schema (draft 2020-12) of a schema's input or output side.
 * Throws when the library cannot convert the schema, or converts it to something that is not
 * JSON data, so a definition cannot publish a lie.
 */
export function jsonSchemaOf(schema: SvcSchema, side: ValidationSide): JsonSchema {
  const standard = schema['~standard'];
  const libraryOptions = LIBRARY_OPTIONS[standard.vendor];
  const options = {
    target: 'draft-2020-12' as const,
    ...(libraryOptions !== undefined ? { libraryOptions } : {}),
  };
  if (side === 'output' && standard.vendor === 'arktype') {
    const path = undeclaredArktypeTransformOutput(schema);
    if (path !== undefined) {
      throw new TypeError(
        `the result of a transform (morph)${path === '' ? '' : ` at ${path}`} has no declared ` +
          'type, so JSON Schema cannot describe it; declare one with .to(...)',
      );
    }
  }
  const projected = side === 'input'
    ? standard.jsonSchema.input(options)
    : standard.jsonSchema.output(options);
  if (projected === null || typeof projected !== 'object' || Array.isArray(projected)) {
    throw new TypeError(`the ${side} schema projected a non-object JSON Schema`);
  }
  const problem = nonJsonProblem(projected, '', new Set());
  if (problem !== undefined) {
    throw new TypeError(`the ${side} schema projected ${problem}, which JSON cannot carry`);
  }
  const keyword = numericKeywordProblem(projected, '');
  if (keyword !== undefined) {
    throw new TypeError(`the ${side} schema projected ${keyword}, which must be a number`);
  }
  return projected;
}

/** The parts of an arktype node this check reads (arktype's internal node API). */
interface ArktypeNode {
  kind?: string;
  branches?: readonly ArktypeNode[];
  flatMorphs?: readonly { path: readonly unknown[]; node: ArktypeNode }[];
  lastMorphIfNode?: unknown;
  inner?: { declaredOut?: unknown };
  expression?: string;
}

/**
 * Where an arktype schema transforms a value with a function and declares nothing about the
 * result (`.pipe(fn)` without `.to(...)`): `''` for the root, a dotted path below it, or
 * `undefined` when every transform declares its result. arktype's output projection answers
 * `{}` ("anything") there without consulting its morph fallback, so the check reads the
 * schema's nodes. A schema without the node API passes, as before this check.
 */
function undeclaredArktypeTransformOutput(schema: SvcSchema): string | undefined {
  const root = (schema as { internal?: ArktypeNode }).internal;
  // arktype nodes are callable: a node is a function with properties.
  if (root === null || (typeof root !== 'object' && typeof root !== 'function')) return undefined;
  const roots = root.kind === 'union' && Array.isArray(root.branches) ? root.branches : [root];
  if (roots.some((node) => node.kind === 'morph' && !declaresTransformOutput(node))) return '';
  for (const { path, node } of root.flatMorphs ?? []) {
    const morphs = node.kind === 'union' && Array.isArray(node.branches) ? node.branches : [node];
    if (morphs.some((morph) => morph.kind === 'morph' && !declaresTransformOutput(morph))) {
      return path.map((key) => typeof key === 'string' ? key : '[index]').join('.');
    }
  }
  return undefined;
}

/** Whether a morph node ends in a validated type (`.to(...)`) or a declared output. */
function declaresTransformOutput(morph: ArktypeNode): boolean {
  return morph.lastMorphIfNode !== undefined || morph.inner?.declaredOut !== undefined;
}

// The JSON Schema 2020-12 keywords whose value must be a number, and where subschemas sit: a
// library can write `null` for a bound it cannot express (zod does for `.max(Infinity)`).
const NUMERIC_KEYWORDS = [
  'maximum',
  'minimum',
  'exclusiveMaximum',
  'exclusiveMinimum',
  'multipleOf',
  'maxLength',
  'minLength',
  'maxItems',
  'minItems',
  'maxProperties',
  'minProperties',
  'maxContains',
  'minContains',
] as const;
const SUBSCHEMA_MAPS = [
  'properties',
  'patternProperties',
  '$defs',
  'definitions',
  'dependentSchemas',
];
const SUBSCHEMA_LISTS = ['allOf', 'anyOf', 'oneOf', 'prefixItems'];
const SUBSCHEMA_SLOTS = [
  'items',
  'additionalItems',
  'additionalProperties',
  'unevaluatedItems',
  'unevaluatedProperties',
  'contains',
  'propertyNames',
  'not',
  'if',
  'then',
  'else',
];

/** The first numeric keyword, anywhere in the schema, whose value is not a number. */
function numericKeywordProblem(schema: unknown, path: string): string | undefined {
  if (schema === null || typeof schema !== 'object') return undefined;
  if (Array.isArray(schema)) return firstProblem(schema, path);
  const record = schema as Record<string, unknown>;
  for (const keyword of NUMERIC_KEYWORDS) {
    if (Object.hasOwn(record, keyword) && typeof record[keyword] !== 'number') {
      return `${keyword}: ${JSON.stringify(record[keyword])} at ${path || '/'}`;
    }
  }
  for (const name of SUBSCHEMA_MAPS) {
    const map = record[name];
    if (map === null || typeof map !== 'object' || Array.isArray(map)) continue;
    for (const [key, subschema] of Object.entries(map)) {
      const problem = numericKeywordProblem(subschema, `${path}/${name}/${key}`);
      if (problem !== undefined) return problem;
    }
  }
  for (const name of [...SUBSCHEMA_LISTS, ...SUBSCHEMA_SLOTS]) {
    if (!Object.hasOwn(record, name)) continue;
    const problem = numericKeywordProblem(record[name], `${path}/${name}`);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

function firstProblem(subschemas: unknown[], path: string): string | undefined {
  for (const [index, subschema] of subschemas.entries()) {
    const problem = numericKeywordProblem(subschema, `${path}/${index}`);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

/**
 * Where a projected schema holds something other than JSON data (`Infinity` or `NaN`, which
 * serialise as `null`; `undefined`, a function, a `Date` or another class instance; a cycle),
 * or `undefined` when it is all JSON. Served as JSON, such a document would differ from the one
 * the service reports, and would not be a valid JSON Schema.
 */
function nonJsonProblem(value: unknown, path: string, seen: Set<object>): string | undefined {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return undefined;
  if (typeof value === 'number') {
    return Number.isFinite(value) ? undefined : `${String(value)} at ${path || '/'}`;
  }
  if (typeof value !== 'object') return `a value of type ${typeof value} at ${path || '/'}`;
  if (seen.has(value)) return `a cycle at ${path || '/'}`;
  const prototype = Object.getPrototypeOf(value);
  const isArray = Array.isArray(value);
  if (!isArray && prototype !== Object.prototype && prototype !== null) {
    return `an object that is not plain data at ${path || '/'}`;
  }
  seen.add(value);
  for (const [key, member] of Object.entries(value)) {
    const problem = nonJsonProblem(member, `${path}/${key}`, seen);
    if (problem !== undefined) return problem;
  }
  seen.delete(value);
  return undefined;
}
