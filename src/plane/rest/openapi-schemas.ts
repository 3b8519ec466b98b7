/**
 * How a method's JSON Schemas (draft 2020-12, as its discovery document publishes them) are
 * embedded in the OpenAPI document: what leaves the schema, where its definitions go, and the
 * request body and query parameters derived from the input schema.
 *
 * Inside an OpenAPI document a `$ref` of `#/...` names a place in the *document*, not in the
 * embedded schema, so a schema's `$defs` (and any pointer into the schema itself) move to
 * `components.schemas` under names derived from the operation, and its references are rewritten
 * to follow them. `$schema` members are dropped: OpenAPI 3.2's default dialect is JSON Schema
 * 2020-12 already, and the keyword is only allowed at a schema resource's root.
 *
 * @module
 */
import type { JsonSchema } from '../../core/schema.ts';
import { queryFallbackFields, type QueryFallbackKind, rootObjectSchema } from './query-fallback.ts';

/** Where the schemas of one document's components are collected, by component name. */
export type SchemaComponents = Map<string, JsonSchema>;

const COMPONENT_NAME_CHARACTER = /[^A-Za-z0-9._-]/g;
const DEFINITION_REF = /^#\/(\$defs|definitions)\/([^/]+)(\/.*)?$/;

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** A component name OpenAPI accepts (`^[a-zA-Z0-9._-]+$`), not yet taken in `components`. */
function componentName(components: SchemaComponents, wanted: string): string {
  const base = wanted.replace(COMPONENT_NAME_CHARACTER, '_');
  let name = base;
  for (let suffix = 2; components.has(name); suffix++) name = `${base}_${suffix}`;
  return name;
}

function unescapePointer(segment: string): string {
  return segment.replaceAll('~1', '/').replaceAll('~0', '~');
}

/**
 * One schema being embedded: the components its definitions (and, when something points into
 * it, the schema itself) become, and the rewriting of its references.
 */
class EmbeddedSchema {
  private readonly definitionNames = new Map<string, string>();
  private rootName: string | undefined;

  constructor(
    private readonly components: SchemaComponents,
    private readonly source: JsonSchema,
    private readonly baseName: string,
  ) {}

  /** The schema with its definitions moved to components: what the document embeds. */
  embedded(): JsonSchema {
    const root = this.rewrite(withoutDefinitions(this.source)) as JsonSchema;
    this.hoistDefinitions();
    if (this.rootName === undefined) return root;
    this.components.set(this.rootName, root);
    return { $ref: `#/components/schemas/${this.rootName}` };
  }

  /** The component a local reference leads to, once everything is hoisted. */
  reference(ref: string): string {
    const definition = DEFINITION_REF.exec(ref);
    if (definition !== null && isObject(this.source[definition[1]])) {
      const key = unescapePointer(definition[2]);
      const definitions = this.source[definition[1]] as Record<string, unknown>;
      if (Object.hasOwn(definitions, key)) {
        return `#/components/schemas/${this.definitionName(key)}${definition[3] ?? ''}`;
      }
    }
    if (ref === '#' || ref.startsWith('#/')) {
      this.rootName ??= componentName(this.components, this.baseName);
      // Reserve the name now: definitions hoisted later must not take it.
      if (!this.components.has(this.rootName)) this.components.set(this.rootName, {});
      return `#/components/schemas/${this.rootName}${ref.slice(1)}`;
    }
    // An anchor or an external reference: kept as written, OpenAPI resolves it the same way.
    return ref;
  }

  private definitionName(key: string): string {
    let name = this.definitionNames.get(key);
    if (name === undefined) {
      name = componentName(this.components, `${this.baseName}.${key}`);
      this.definitionNames.set(key, name);
      this.components.set(name, {});
    }
    return name;
  }

  private hoistDefinitions(): void {
    for (const container of ['$defs', 'definitions'] as const) {
      const definitions = this.source[container];
      if (!isObject(definitions)) continue;
      for (const key of Object.keys(definitions).sort()) {
        const name = this.definitionName(key);
        this.components.set(name, this.rewrite(definitions[key]) as JsonSchema);
      }
    }
  }

  /** A copy with `$schema` dropped and every local `$ref` rewritten to its component. */
  rewrite(value: unknown): unknown {
    if (Array.isArray(value)) return value.map((item) => this.rewrite(item));
    if (!isObject(value)) return value;
    const copy: Record<string, unknown> = {};
    for (const [key, member] of Object.entries(value)) {
      if (key === '$schema') continue;
      copy[key] = key === '$ref' && typeof member === 'string'
        ? this.reference(member)
        : this.rewrite(member);
    }
    return copy;
  }
}

function withoutDefinitions(schema: JsonSchema): JsonSchema {
  const { $defs: _defs, definitions: _definitions, ...rest } = schema;
  return rest;
}

/** What one operation embeds of its method's input schema. */
export interface EmbeddedInput {
  /** The schema of each path variable, by name. */
  pathParameters: Map<string, JsonSchema>;
  /** The schema of each query fallback field that is not a path variable, in schema order. */
  queryParameters: Map<string, { kind: QueryFallbackKind; schema: JsonSchema }>;
  /** The request body schema: the input without its path fields. */
  body: JsonSchema;
  /** Whether the body must be sent: a required field remains that the query cannot carry. */
  bodyRequired: boolean;
}

/**
 * Embeds a method's input schema for an operation whose path has `pathVariables`: the body is
 * the input's object schema without the path fields (dropped from `properties` and
 * `required`), path and query parameters take their field's schema.
 */
export function embedInputSchema(
  components: SchemaComponents,
  inputSchema: JsonSchema,
  baseName: string,
  pathVariables: readonly string[],
): EmbeddedInput {
  const embedding = new EmbeddedSchema(components, inputSchema, baseName);
  const root = rootObjectSchema(inputSchema);
  const properties = isObject(root?.properties) ? root.properties : {};
  const fieldSchema = (field: string): JsonSchema =>
    Object.hasOwn(properties, field) && isObject(properties[field])
      ? embedding.rewrite(properties[field]) as JsonSchema
      : {};
  const pathParameters = new Map(pathVariables.map((name) => [name, fieldSchema(name)]));
  const queryParameters = new Map<string, { kind: QueryFallbackKind; schema: JsonSchema }>();
  for (const [field, kind] of queryFallbackFields(inputSchema)) {
    if (!pathParameters.has(field)) {
      queryParameters.set(field, { kind, schema: fieldSchema(field) });
    }
  }
  const required = Array.isArray(root?.required)
    ? (root.required as unknown[]).filter((field): field is string =>
      typeof field === 'string' && !pathParameters.has(field)
    )
    : [];
  let body: JsonSchema;
  if (root === undefined || pathVariables.length === 0) {
    body = embedding.embedded();
  } else {
    const kept: Record<string, unknown> = {};
    for (const [field, schema] of Object.entries(properties)) {
      if (!pathParameters.has(field)) kept[field] = schema;
    }
    const bodyRoot: JsonSchema = { ...withoutDefinitions(root), properties: kept };
    if (required.length > 0) bodyRoot.required = required;
    else delete bodyRoot.required;
    body = embedding.rewrite(bodyRoot) as JsonSchema;
    embedding.embedded();
  }
  const bodyRequired = required.some((field) => !queryParameters.has(field));
  return { pathParameters, queryParameters, body, bodyRequired };
}

/** Embeds a method's output schema (for the success response). */
export function embedOutputSchema(
  components: SchemaComponents,
  outputSchema: JsonSchema,
  baseName: string,
): JsonSchema {
  return new EmbeddedSchema(components, outputSchema, baseName).embedded();
}
