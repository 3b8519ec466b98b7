/**
 * Method definitions: one input schema, one output schema (per item for streams), scopes and the
 * optional REST / MCP projections. Every rule that can be checked without running the method is
 * checked here, when the service is defined, so a broken definition never reaches a caller.
 *
 * @module
 */
import { isPlainObject, refuseUnknownKeys } from '../core/config-values.ts';
import { validateMethodTimeoutMs } from '../core/deadline.ts';
import { SvcConfigurationError } from '../core/errors.ts';
import {
  type JsonSchema,
  jsonSchemaOf,
  schemaContractAdvice,
  schemaContractProblem,
  type SvcSchema,
} from '../core/schema.ts';
import { scopeNameProblem } from './identifiers.ts';
import {
  checkMcpPrompt,
  checkMcpResource,
  checkMcpTool,
  type McpPromptProjection,
  type McpResourceProjection,
  type McpToolProjection,
} from './mcp-projection.ts';
import { parseRestPath, REST_METHODS, type RestMethod, restVariableProblem } from './rest-path.ts';

/** A method's REST projection as declared. */
export interface RestProjectionOptions {
  /** HTTP method; `query` is HTTP QUERY (parameters in the body, safe and idempotent). */
  method: RestMethod;
  /** Path template; each `{name}` must be a top-level input field. */
  path: string;
  /** Successful 2xx status (default 200). */
  status?: number;
}

/** A method's REST projection after validation (status filled in). */
export interface RestProjection {
  /** HTTP method; `query` is HTTP QUERY (parameters in the body, safe and idempotent). */
  readonly method: RestMethod;
  /** Path template; each `{name}` is a top-level input field. */
  readonly path: string;
  /** Successful 2xx status; 200 unless the definition named another. */
  readonly status: number;
}

/** A method's MCP tool projection. */
export type McpProjection = McpToolProjection;
export type { McpPromptProjection, McpResourceProjection };

/** What {@link abilityMethod} accepts. `S` is `true` for a streaming method. */
export interface MethodOptions<
  I extends SvcSchema,
  O extends SvcSchema,
  S extends true | undefined = undefined,
> {
  /** Schema of the single input object. */
  input: I;
  /** Schema of the result, or of each item for a streaming method. */
  output: O;
  /** Scopes the caller's token must carry, on top of the ability's scopes. Default none. */
  scopes?: readonly string[];
  /** REST projection (not for streaming methods, REST r6). */
  rest?: RestProjectionOptions;
  /** MCP tool projection (streaming methods too: their items are returned as `{ items }`). */
  mcp?: { name: string; description: string; title?: string };
  /** MCP prompt projection (not for streaming methods, REST r6). */
  mcpPrompt?: { name: string; title?: string; description?: string };
  /**
   * MCP resource projection (not for streaming methods, REST r6); `uri` may be a template whose
   * `{var}`s are top-level string input fields.
   */
  mcpResource?: {
    uri: string;
    name: string;
    title?: string;
    description?: string;
    mimeType?: string;
  };
  /** Repeating the call with the same input cannot double its effect. */
  idempotent?: true;
  /** The method yields many items. */
  stream?: S;
  /**
   * Per-method ceiling in milliseconds; `0` opts out. Default: the service's `timeout.methodMs`
   * (itself `DEFAULT_ABILITY_TIMEOUT_MS`, 10 s, unless set). Not allowed (other than `0`) on
   * streams.
   */
  timeoutMs?: number;
  /** Human-readable description, published in the discovery document. */
  description?: string;
}

/** A validated, frozen method definition. `S` is `true` for a streaming method. */
export interface MethodDefinition<
  I extends SvcSchema = SvcSchema,
  O extends SvcSchema = SvcSchema,
  S extends boolean = boolean,
> {
  /** Schema of the single input object. */
  readonly input: I;
  /** Schema of the result, or of each item for a streaming method. */
  readonly output: O;
  /** Method-level scopes (ability-level scopes are kept on the ability). */
  readonly scopes: readonly string[];
  /** REST projection, when declared (never on a streaming method). */
  readonly rest?: RestProjection;
  /** MCP tool projection, when declared. */
  readonly mcp?: McpProjection;
  /** MCP prompt projection, when declared (never on a streaming method). */
  readonly mcpPrompt?: McpPromptProjection;
  /** MCP resource projection, when declared (never on a streaming method). */
  readonly mcpResource?: McpResourceProjection;
  /** `true` only when the definition was marked idempotent. */
  readonly idempotent: boolean;
  /** `true` for a streaming method. */
  readonly stream: S;
  /** The declared ceiling (`0` = none); absent when the service-wide ceiling applies. */
  readonly timeoutMs?: number;
  /** Human-readable description, when declared. */
  readonly description?: string;
}

/** Both JSON Schema projections of a method, computed once when it is defined. */
export interface MethodJsonSchemas {
  /** JSON Schema (draft 2020-12) of the input object. */
  input: JsonSchema;
  /** JSON Schema (draft 2020-12) of the output (of one item for a streaming method). */
  output: JsonSchema;
}

const ALLOWED_KEYS: readonly string[] = [
  'input',
  'output',
  'scopes',
  'rest',
  'mcp',
  'mcpPrompt',
  'mcpResource',
  'idempotent',
  'stream',
  'timeoutMs',
  'description',
];
const REST_FIELDS: readonly string[] = ['method', 'path', 'status'];
const FIELD_REFUSAL = { noun: 'field', reason: 'invalid_method' } as const;

const jsonSchemasByMethod = new WeakMap<MethodDefinition, MethodJsonSchemas>();

function refuse(label: string, field: string, problem: string): never {
  throw new SvcConfigurationError(`${label}: ${field} ${problem}`, { reason: 'invalid_method' });
}

function checkSchema(schema: unknown, label: string, field: 'input' | 'output'): SvcSchema {
  const problem = schemaContractProblem(schema);
  if (problem !== undefined) refuse(label, field, `${problem} (${schemaContractAdvice(schema)})`);
  return schema as SvcSchema;
}

function projectJsonSchema(schema: SvcSchema, label: string, side: 'input' | 'output'): JsonSchema {
  try {
    return jsonSchemaOf(schema, side);
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    return refuse(label, side, `cannot be projected to JSON Schema draft 2020-12: ${detail}`);
  }
}

/** Validates a list of scope names and returns a frozen, de-duplicated copy. */
export function checkScopeList(value: unknown, label: string, field: string): readonly string[] {
  if (value === undefined) return Object.freeze([]);
  if (!Array.isArray(value)) refuse(label, field, 'must be an array of scope names');
  for (const scope of value) {
    const problem = scopeNameProblem(scope);
    if (problem !== undefined) refuse(label, field, `entry ${JSON.stringify(scope)} ${problem}`);
  }
  return Object.freeze([...new Set(value as string[])]);
}

function checkOptionalText(value: unknown, label: string, field: string): string | undefined {
  if (value !== undefined && typeof value !== 'string') refuse(label, field, 'must be a string');
  return value as string | undefined;
}

function checkTrueFlag(value: unknown, label: string, field: string): boolean {
  if (value !== undefined && value !== true) refuse(label, field, 'must be `true` when present');
  return value === true;
}

function checkRest(value: unknown, label: string, inputJsonSchema: JsonSchema): RestProjection {
  if (!isPlainObject(value)) {
    return refuse(label, 'rest', 'must be an object { method, path, status? }');
  }
  refuseUnknownKeys(value, REST_FIELDS, `${label}: rest`, FIELD_REFUSAL);
  if (!(REST_METHODS as readonly unknown[]).includes(value.method)) {
    refuse(label, 'rest.method', `must be one of ${REST_METHODS.join(', ')}`);
  }
  const template = parseRestPath(value.path);
  if (typeof template === 'string') refuse(label, 'rest.path', template);
  const problem = restVariableProblem(template.variables, inputJsonSchema);
  if (problem !== undefined) refuse(label, 'rest.path', problem);
  const status = value.status ?? 200;
  if (typeof status !== 'number' || !Number.isInteger(status) || status < 200 || status > 299) {
    refuse(label, 'rest.status', 'must be an integer from 200 to 299');
  }
  return Object.freeze({ method: value.method as RestMethod, path: value.path as string, status });
}

function checkStreamTimeout(timeoutMs: number | undefined, label: string): void {
  if (timeoutMs !== undefined && timeoutMs !== 0) {
    refuse(
      label,
      'timeoutMs',
      'must be absent or 0 on a streaming method (a stream has no ceiling)',
    );
  }
}

/**
 * Checks a method definition and returns its frozen, normalised form. `label` prefixes every
 * error message, so a caller that knows the ability and method name can say so.
 */
export function checkMethodDefinition(definition: unknown, label: string): MethodDefinition {
  if (isRegisteredMethod(definition)) return definition;
  if (!isPlainObject(definition)) refuse(label, 'definition', 'must be an object');
  refuseUnknownKeys(definition, ALLOWED_KEYS, label, FIELD_REFUSAL);
  const input = checkSchema(definition.input, label, 'input');
  const output = checkSchema(definition.output, label, 'output');
  const jsonSchemas: MethodJsonSchemas = {
    input: projectJsonSchema(input, label, 'input'),
    output: projectJsonSchema(output, label, 'output'),
  };
  const stream = checkTrueFlag(definition.stream, label, 'stream');
  const idempotent = checkTrueFlag(definition.idempotent, label, 'idempotent');
  const timeoutMs = validateMethodTimeoutMs(definition.timeoutMs, label);
  if (stream) checkStreamTimeout(timeoutMs, label);
  if (stream && definition.rest !== undefined) {
    refuse(label, 'rest', 'cannot be declared on a streaming method (REST r6)');
  }
  const rest = definition.rest === undefined
    ? undefined
    : checkRest(definition.rest, label, jsonSchemas.input);
  const refuseField = (field: string, problem: string): never => refuse(label, field, problem);
  for (const field of ['mcpPrompt', 'mcpResource'] as const) {
    if (stream && definition[field] !== undefined) {
      refuse(label, field, 'cannot be declared on a streaming method (REST r6)');
    }
  }
  const mcp = definition.mcp === undefined
    ? undefined
    : checkMcpTool(definition.mcp, refuseField, label);
  const mcpPrompt = definition.mcpPrompt === undefined
    ? undefined
    : checkMcpPrompt(definition.mcpPrompt, refuseField, label);
  const mcpResource = definition.mcpResource === undefined
    ? undefined
    : checkMcpResource(definition.mcpResource, jsonSchemas.input, refuseField, label);
  const description = checkOptionalText(definition.description, label, 'description');
  const checked: MethodDefinition = Object.freeze({
    input,
    output,
    scopes: checkScopeList(definition.scopes, label, 'scopes'),
    ...(rest !== undefined ? { rest } : {}),
    ...(mcp !== undefined ? { mcp } : {}),
    ...(mcpPrompt !== undefined ? { mcpPrompt } : {}),
    ...(mcpResource !== undefined ? { mcpResource } : {}),
    idempotent,
    stream,
    ...(timeoutMs !== undefined ? { timeoutMs } : {}),
    ...(description !== undefined ? { description } : {}),
  });
  jsonSchemasByMethod.set(checked, jsonSchemas);
  return checked;
}

const outputPropertyNames = new WeakMap<MethodDefinition, ReadonlySet<string>>();

/**
 * Every property name the method's output JSON Schema declares (under any `properties`, at any
 * depth). Other keys of an output (a record's, say) are the handler's data, which an invalid
 * output's issue paths must not carry to the caller.
 */
export function declaredOutputPropertyNames(method: MethodDefinition): ReadonlySet<string> {
  let names = outputPropertyNames.get(method);
  if (names === undefined) {
    names = propertyNamesIn(methodJsonSchemas(method).output);
    outputPropertyNames.set(method, names);
  }
  return names;
}

function propertyNamesIn(schema: unknown): Set<string> {
  const names = new Set<string>();
  const pending: unknown[] = [schema];
  while (pending.length > 0) {
    const value = pending.pop();
    if (value === null || typeof value !== 'object') continue;
    if (Array.isArray(value)) {
      for (const entry of value) pending.push(entry);
      continue;
    }
    const record = value as Record<string, unknown>;
    const properties = record.properties;
    if (properties !== null && typeof properties === 'object' && !Array.isArray(properties)) {
      for (const name of Object.keys(properties)) names.add(name);
    }
    for (const key of Object.keys(record)) pending.push(record[key]);
  }
  return names;
}

/** Whether a value is a method definition produced by {@link abilityMethod}. */
export function isRegisteredMethod(value: unknown): value is MethodDefinition {
  return value !== null && typeof value === 'object' &&
    jsonSchemasByMethod.has(value as MethodDefinition);
}

/**
 * The JSON Schemas of a checked method (a fresh copy each time, so a caller that edits the
 * result cannot change what later discovery documents say).
 */
export function methodJsonSchemas(method: MethodDefinition): MethodJsonSchemas {
  const schemas = jsonSchemasByMethod.get(method);
  if (schemas === undefined) {
    throw new SvcConfigurationError('method definition was not created by abilityMethod', {
      reason: 'invalid_method',
    });
  }
  return structuredClone(schemas);
}

/**
 * Defines one ability method. Refuses (with `SvcConfigurationError`) a schema lacking
 * `~standard.validate` or `~standard.jsonSchema`, a REST projection with an unknown method, a
 * path not starting with `/`, an empty `{}` or a `{name}` that is not a top-level input field, a
 * status outside 200..299, REST or an MCP prompt / resource on a streaming method, a malformed MCP
 * projection (tool or prompt name, resource URI whose `{var}` is not a top-level string input
 * field), and an invalid
 * `timeoutMs`. The literal types of the schemas and of the `stream` flag are kept for inference.
 */
export function abilityMethod<
  I extends SvcSchema,
  O extends SvcSchema,
  S extends true | undefined = undefined,
>(definition: MethodOptions<I, O, S>): MethodDefinition<I, O, S extends true ? true : false> {
  return checkMethodDefinition(definition, 'abilityMethod') as MethodDefinition<
    I,
    O,
    S extends true ? true : false
  >;
}
