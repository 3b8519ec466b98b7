/**
 * REST projection paths: `/items/{id}`-style templates whose variables must be top-level input
 * fields (REST r3). The same parser serves method definitions and received discovery documents,
 * so a route the service declares is exactly the route the plane mounts.
 *
 * @module
 */

/** The HTTP methods a REST projection may use (`query` is HTTP QUERY: body parameters, safe). */
export const REST_METHODS = ['get', 'post', 'put', 'patch', 'delete', 'query'] as const;

/** One of {@link REST_METHODS}. */
export type RestMethod = (typeof REST_METHODS)[number];

/**
 * A variable name: ASCII letters, digits, `_` and `-`. Restricting the charset keeps the same
 * template meaningful to every router and to OpenAPI path parameters.
 */
const VARIABLE_NAME = /^[A-Za-z0-9_-]{1,128}$/;

/** A literal segment: no whitespace, braces, query or fragment, and no router metacharacters. */
const LITERAL_SEGMENT = /^[^\s{}?#*:]+$/;

/** The parsed template: its variable names, in order. */
export interface RestPathTemplate {
  /** Variable names in the order they appear. */
  variables: string[];
}

/**
 * Parses a REST path template, or returns a message saying what is wrong with it.
 *
 * Rules: starts with `/`; segments are non-empty (no `//`, no trailing `/` except the root);
 * a variable is a whole segment `{name}` (`{}` and partial segments such as `{id}.json` are
 * refused, because an empty request segment must never match a variable); each variable appears
 * once; literal segments carry no whitespace, `?`, `#`, `*` or `:`.
 */
export function parseRestPath(path: unknown): RestPathTemplate | string {
  if (typeof path !== 'string' || !path.startsWith('/')) {
    return 'must be a string starting with `/`';
  }
  if (path === '/') return { variables: [] };
  const variables: string[] = [];
  for (const segment of path.slice(1).split('/')) {
    if (segment.length === 0) return 'must not contain empty segments (`//` or a trailing `/`)';
    if (segment.startsWith('{') && segment.endsWith('}')) {
      const name = segment.slice(1, -1);
      if (name.length === 0) return 'must not contain an empty variable `{}`';
      if (!VARIABLE_NAME.test(name)) {
        return `variable {${name}} must be ASCII letters, digits, \`_\` or \`-\``;
      }
      if (variables.includes(name)) return `repeats the variable {${name}}`;
      variables.push(name);
      continue;
    }
    if (!LITERAL_SEGMENT.test(segment)) {
      return `segment "${segment}" is not a literal segment or a whole \`{name}\` variable`;
    }
  }
  return { variables };
}

/** The first variable that is not a top-level input field, or `undefined` when all are. */
export function variableMissingFromInput(
  variables: readonly string[],
  inputFields: ReadonlySet<string>,
): string | undefined {
  return variables.find((name) => !inputFields.has(name));
}

/** How many local `$ref` hops lead from an input schema's root to its object schema at most. */
const MAX_ROOT_REF_HOPS = 8;

/**
 * The top-level field names of an input JSON Schema (`properties`), or an empty set when the
 * schema declares none. A root that is a local reference (`{ $ref: '#/$defs/X', $defs }`, as
 * libraries write a recursive or named schema) is followed to the object it names. Only own
 * keys count, so `constructor` never appears by accident.
 */
export function topLevelInputFields(inputJsonSchema: Record<string, unknown>): Set<string> {
  const properties = rootObjectSchema(inputJsonSchema)?.properties;
  if (properties === null || typeof properties !== 'object' || Array.isArray(properties)) {
    return new Set();
  }
  return new Set(Object.keys(properties));
}

/** The schema a root `$ref` chain ends at, or `undefined` when it leaves the document. */
function rootObjectSchema(schema: Record<string, unknown>): Record<string, unknown> | undefined {
  let current = schema;
  for (let hop = 0; typeof current.$ref === 'string'; hop++) {
    if (hop === MAX_ROOT_REF_HOPS) return undefined;
    const target = localDefinition(schema, current.$ref);
    if (target === undefined) return undefined;
    current = target;
  }
  return current;
}

/** The `#/$defs/<name>` (or `#/definitions/<name>`) entry `ref` names in `root`, if any. */
function localDefinition(
  root: Record<string, unknown>,
  ref: string,
): Record<string, unknown> | undefined {
  const match = /^#\/(\$defs|definitions)\/([^/~]+)$/.exec(ref);
  if (match === null) return undefined;
  const definitions = root[match[1]];
  if (definitions === null || typeof definitions !== 'object' || Array.isArray(definitions)) {
    return undefined;
  }
  if (!Object.hasOwn(definitions, match[2])) return undefined;
  const target = (definitions as Record<string, unknown>)[match[2]];
  return target !== null && typeof target === 'object' && !Array.isArray(target)
    ? target as Record<string, unknown>
    : undefined;
}

/**
 * A key identifying a route regardless of variable names: `get /items/{}` for `/items/{id}`,
 * so `/items/{id}` and `/items/{itemId}` under the same method count as the same route.
 */
export function restRouteKey(method: string, path: string): string {
  return `${method} ${path.replace(/\{[^/{}]*\}/g, '{}')}`;
}

/**
 * The top-level field names whose schema is a plain string (`type: 'string'`), following a root
 * `$ref` as {@link topLevelInputFields} does: the fields an MCP prompt argument or a resource
 * URI variable can carry.
 */
export function topLevelStringInputFields(inputJsonSchema: Record<string, unknown>): Set<string> {
  const properties = rootObjectSchema(inputJsonSchema)?.properties;
  const names = new Set<string>();
  if (properties === null || typeof properties !== 'object' || Array.isArray(properties)) {
    return names;
  }
  for (const [name, schema] of Object.entries(properties as Record<string, unknown>)) {
    if (
      schema !== null && typeof schema === 'object' &&
      (schema as { type?: unknown }).type === 'string'
    ) {
      names.add(name);
    }
  }
  return names;
}

/** The names listed in the root object schema's `required`, following a root `$ref`. */
export function requiredInputFields(inputJsonSchema: Record<string, unknown>): Set<string> {
  const required = rootObjectSchema(inputJsonSchema)?.required;
  return new Set(Array.isArray(required) ? required.filter((n) => typeof n === 'string') : []);
}
