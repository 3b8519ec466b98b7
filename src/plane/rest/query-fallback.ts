/**
 * Query fallbacks (REST r2): which top-level input fields a query parameter may fill. Only a
 * field typed `string` (one value) or an array of strings (every value) qualifies; query values
 * are text and nothing is converted. The facade reads the query and the OpenAPI document lists
 * the parameters from this one decision.
 *
 * @module
 */
import type { JsonSchema } from '../../core/schema.ts';

/** How a top-level input field can be given in the query string. */
export type QueryFallbackKind = 'string' | 'string-array';

const DEFINITION_REF = /^#\/(\$defs|definitions)\/([^/]+)(\/.*)?$/;
const MAX_ROOT_REF_HOPS = 8;

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function unescapePointer(segment: string): string {
  return segment.replaceAll('~1', '/').replaceAll('~0', '~');
}

/** The definition `ref` names in the schema's own `$defs` / `definitions`, if any. */
function localDefinition(root: JsonSchema, ref: string): JsonSchema | undefined {
  const match = DEFINITION_REF.exec(ref);
  if (match === null || match[3] !== undefined) return undefined;
  const definitions = root[match[1]];
  const key = unescapePointer(match[2]);
  if (!isObject(definitions) || !Object.hasOwn(definitions, key)) return undefined;
  const target = definitions[key];
  return isObject(target) ? target : undefined;
}

/** The object schema a root `$ref` chain into the schema's own definitions ends at, if any. */
export function rootObjectSchema(schema: JsonSchema): JsonSchema | undefined {
  let current: JsonSchema | undefined = schema;
  for (let hop = 0; typeof current?.$ref === 'string'; hop++) {
    if (hop === MAX_ROOT_REF_HOPS) return undefined;
    current = localDefinition(schema, current.$ref);
  }
  return current;
}

/** A property schema, following one local definition reference. */
function propertySchema(root: JsonSchema, value: unknown): JsonSchema | undefined {
  if (!isObject(value)) return undefined;
  return typeof value.$ref === 'string' ? localDefinition(root, value.$ref) : value;
}

/**
 * How a top-level field of an input schema can come from the query string: `string` for a field
 * typed `string`, `string-array` for an array of strings, `undefined` for anything else (a
 * number, an object, a union). Query values are text; nothing else is converted.
 */
export function queryFallbackKind(
  inputSchema: JsonSchema,
  field: string,
): QueryFallbackKind | undefined {
  const properties = rootObjectSchema(inputSchema)?.properties;
  if (!isObject(properties) || !Object.hasOwn(properties, field)) return undefined;
  const schema = propertySchema(inputSchema, properties[field]);
  if (schema?.type === 'string') return 'string';
  if (schema?.type !== 'array') return undefined;
  return propertySchema(inputSchema, schema.items)?.type === 'string' ? 'string-array' : undefined;
}

/** The top-level input fields that may be given in the query string, in schema order. */
export function queryFallbackFields(inputSchema: JsonSchema): Map<string, QueryFallbackKind> {
  const fields = new Map<string, QueryFallbackKind>();
  const properties = rootObjectSchema(inputSchema)?.properties;
  if (!isObject(properties)) return fields;
  for (const field of Object.keys(properties)) {
    const kind = queryFallbackKind(inputSchema, field);
    if (kind !== undefined) fields.set(field, kind);
  }
  return fields;
}
