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

/**
 * What is wrong with a template's variables for an input schema, or `undefined` when nothing is:
 * each `{name}` must be a top-level input field (REST r3), and that field must be able to hold a
 * string. A path value is always a string (data, never coerced), so a `{page}` whose field is an
 * integer could never validate: the route would refuse every request with 422 while the OpenAPI
 * document promised an integer parameter. Refusing the definition says so where it is written.
 */
export function restVariableProblem(
  variables: readonly string[],
  inputJsonSchema: Record<string, unknown>,
): string | undefined {
  const properties = rootObjectSchema(inputJsonSchema)?.properties;
  const fields = properties !== null && typeof properties === 'object' && !Array.isArray(properties)
    ? properties as Record<string, unknown>
    : {};
  for (const name of variables) {
    if (!Object.hasOwn(fields, name)) return `variable {${name}} is not a top-level input field`;
    if (refusesEveryString(inputJsonSchema, fields[name])) {
      return `variable {${name}} names a field that cannot hold a string; path values are ` +
        'strings, so declare the field as a string (e.g. a digits pattern) and convert it in ' +
        'the handler';
    }
  }
  return undefined;
}

/**
 * Whether a field schema provably refuses every string: a `type` without `string`, a non-string
 * `const`, an `enum` with no string, or `anyOf`/`oneOf` whose branches all refuse. Anything this
 * cannot decide (`allOf`, `not`, a non-local `$ref`) is left to the service's validation.
 */
function refusesEveryString(root: Record<string, unknown>, schema: unknown, depth = 0): boolean {
  if (schema === false) return true;
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema) || depth > 8) {
    return false;
  }
  const field = schema as Record<string, unknown>;
  if (typeof field.$ref === 'string') {
    const target = localDefinition(root, field.$ref);
    if (target !== undefined && refusesEveryString(root, target, depth + 1)) return true;
  }
  const type = field.type;
  if (typeof type === 'string' && type !== 'string') return true;
  if (Array.isArray(type) && !type.includes('string')) return true;
  if (Object.hasOwn(field, 'const') && typeof field.const !== 'string') return true;
  if (Array.isArray(field.enum) && !field.enum.some((value) => typeof value === 'string')) {
    return true;
  }
  for (const key of ['anyOf', 'oneOf'] as const) {
    const branches = field[key];
    if (
      Array.isArray(branches) && branches.length > 0 &&
      branches.every((branch) => refusesEveryString(root, branch, depth + 1))
    ) {
      return true;
    }
  }
  return false;
}

/** How many local `$ref` hops lead from an input schema's root to its object schema at most. */
const MAX_ROOT_REF_HOPS = 8;

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
 * `$ref` as {@link restVariableProblem} does: the fields an MCP prompt argument or a resource
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
