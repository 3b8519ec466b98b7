/**
 * A method's MCP projections: a tool (`mcp`), a prompt (`mcpPrompt`) and a resource
 * (`mcpResource`). The same checks run when a service defines a method and when the plane reads
 * a received discovery document, so whatever a service can publish the plane accepts, and a
 * document no definition could have produced is refused.
 *
 * @module
 */
import { isPlainObject, refuseUnknownKeys } from '../core/config-values.ts';
import type { JsonSchema } from '../core/schema.ts';
import { MCP_TOOL_NAME_PATTERN } from './identifiers.ts';
import { topLevelStringInputFields } from './rest-path.ts';

/** A method's MCP tool projection. */
export interface McpToolProjection {
  /** Tool name, `/^[A-Za-z0-9_.-]{1,128}$/`, unique across the plane's catalog. */
  readonly name: string;
  /** Tool description shown to MCP clients. */
  readonly description: string;
  /** Human-readable title, when declared. */
  readonly title?: string;
}

/** A method's MCP prompt projection (non-streaming methods only). */
export interface McpPromptProjection {
  /** Prompt name, same alphabet as tool names, unique across the catalog. */
  readonly name: string;
  /** Human-readable title, when declared. */
  readonly title?: string;
  /** Description shown to MCP clients, when declared. */
  readonly description?: string;
}

/** A method's MCP resource projection (non-streaming methods only). */
export interface McpResourceProjection {
  /**
   * The resource URI, or a URI template whose `{var}`s are top-level string input fields
   * (then listed as a resource template). Unique across the catalog.
   */
  readonly uri: string;
  /** Resource name shown to MCP clients. */
  readonly name: string;
  /** Human-readable title, when declared. */
  readonly title?: string;
  /** Description shown to MCP clients, when declared. */
  readonly description?: string;
  /** Media type of the resource text, when declared. */
  readonly mimeType?: string;
}

/** Longest accepted resource URI (template), in characters. */
export const MAX_MCP_RESOURCE_URI_LENGTH = 2048;
/** Longest accepted title or description of a projection, in characters. */
const MAX_TEXT_LENGTH = 4096;

/** `scheme:` then visible ASCII without spaces, `{`/`}` only as whole `{name}` variables. */
const RESOURCE_URI_PATTERN = /^[A-Za-z][A-Za-z0-9+.-]*:(?:[!#-z|~]|\{[A-Za-z0-9_]+\})*$/;
const MIME_TYPE_PATTERN =
  /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*(?:\s*;.*)?$/;

/**
 * Names a field at fault; the caller turns it into its own typed error. The checkers below take
 * a `label` when checking a definition (unknown keys refused) and none when reading a received
 * discovery document (unknown keys dropped).
 */
export type ProjectionProblem = (field: string, problem: string) => never;

const TOOL_FIELDS: readonly string[] = ['name', 'description', 'title'];
const PROMPT_FIELDS: readonly string[] = ['name', 'title', 'description'];
const RESOURCE_FIELDS: readonly string[] = ['uri', 'name', 'title', 'description', 'mimeType'];

function optionalText(
  value: unknown,
  field: string,
  refuse: ProjectionProblem,
): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.length > MAX_TEXT_LENGTH) {
    refuse(field, `must be a string of at most ${MAX_TEXT_LENGTH} characters`);
  }
  return value;
}

function checkName(value: unknown, field: string, refuse: ProjectionProblem): string {
  if (typeof value !== 'string' || !MCP_TOOL_NAME_PATTERN.test(value)) {
    refuse(field, 'must be 1 to 128 ASCII letters, digits, `_`, `.` or `-`');
  }
  return value;
}

function withOptional<T extends object>(base: T, fields: Record<string, string | undefined>): T {
  const result: Record<string, unknown> = { ...(base as Record<string, unknown>) };
  for (const [key, value] of Object.entries(fields)) if (value !== undefined) result[key] = value;
  return Object.freeze(result) as T;
}

function objectOf(
  value: unknown,
  field: string,
  fields: readonly string[],
  refuse: ProjectionProblem,
  label: string | undefined,
): Record<string, unknown> {
  if (!isPlainObject(value)) refuse(field, `must be an object { ${fields.join(', ')} }`);
  // A definition with an unknown key is refused; a received document's extra keys are dropped
  // (a newer service may add some).
  if (label !== undefined) {
    refuseUnknownKeys(value, fields, `${label}: ${field}`, {
      noun: 'field',
      reason: 'invalid_method',
    });
  }
  return value;
}

/** Checks an `mcp` tool projection. */
export function checkMcpTool(
  value: unknown,
  refuse: ProjectionProblem,
  label?: string,
): McpToolProjection {
  const tool = objectOf(value, 'mcp', TOOL_FIELDS, refuse, label);
  const name = checkName(tool.name, 'mcp.name', refuse);
  if (typeof tool.description !== 'string' || tool.description.length > MAX_TEXT_LENGTH) {
    refuse('mcp.description', `must be a string of at most ${MAX_TEXT_LENGTH} characters`);
  }
  return withOptional({ name, description: tool.description as string }, {
    title: optionalText(tool.title, 'mcp.title', refuse),
  });
}

/** Checks an `mcpPrompt` projection. */
export function checkMcpPrompt(
  value: unknown,
  refuse: ProjectionProblem,
  label?: string,
): McpPromptProjection {
  const prompt = objectOf(value, 'mcpPrompt', PROMPT_FIELDS, refuse, label);
  return withOptional({ name: checkName(prompt.name, 'mcpPrompt.name', refuse) }, {
    title: optionalText(prompt.title, 'mcpPrompt.title', refuse),
    description: optionalText(prompt.description, 'mcpPrompt.description', refuse),
  });
}

/** The `{var}` names of a resource URI template, in order (empty for a plain URI). */
export function resourceUriVariables(uri: string): string[] {
  return [...uri.matchAll(/\{([A-Za-z0-9_]+)\}/g)].map((match) => match[1]);
}

/**
 * Checks an `mcpResource` projection: a URI (`scheme:...`) whose `{var}`s are distinct top-level
 * string fields of the input schema, a name, optional texts and media type.
 */
export function checkMcpResource(
  value: unknown,
  inputSchema: JsonSchema,
  refuse: ProjectionProblem,
  label?: string,
): McpResourceProjection {
  const resource = objectOf(value, 'mcpResource', RESOURCE_FIELDS, refuse, label);
  const uri = resource.uri;
  if (
    typeof uri !== 'string' || uri.length > MAX_MCP_RESOURCE_URI_LENGTH ||
    !RESOURCE_URI_PATTERN.test(uri)
  ) {
    return refuse(
      'mcpResource.uri',
      'must be an absolute URI (`scheme:...`, visible ASCII) whose only braces are `{name}` variables',
    );
  }
  const variables = resourceUriVariables(uri);
  const stringFields = topLevelStringInputFields(inputSchema);
  const seen = new Set<string>();
  for (const variable of variables) {
    if (seen.has(variable)) refuse('mcpResource.uri', `repeats the variable {${variable}}`);
    seen.add(variable);
    if (!stringFields.has(variable)) {
      refuse('mcpResource.uri', `variable {${variable}} is not a top-level string input field`);
    }
  }
  if (
    typeof resource.name !== 'string' || resource.name.length === 0 || resource.name.length > 256
  ) {
    refuse('mcpResource.name', 'must be a string of 1 to 256 characters');
  }
  const mimeType = optionalText(resource.mimeType, 'mcpResource.mimeType', refuse);
  if (mimeType !== undefined && !MIME_TYPE_PATTERN.test(mimeType)) {
    refuse('mcpResource.mimeType', 'must be a media type such as `text/plain`');
  }
  return withOptional({ uri, name: resource.name as string }, {
    title: optionalText(resource.title, 'mcpResource.title', refuse),
    description: optionalText(resource.description, 'mcpResource.description', refuse),
    mimeType,
  });
}

/** The keys that make two projections collide across one catalog. */
export function mcpProjectionKeys(method: {
  mcp?: { name: string };
  mcpPrompt?: { name: string };
  mcpResource?: { uri: string };
}): { key: string; what: string }[] {
  const keys: { key: string; what: string }[] = [];
  if (method.mcp) {
    keys.push({ key: `tool ${method.mcp.name}`, what: `MCP tool name ${method.mcp.name}` });
  }
  if (method.mcpPrompt) {
    keys.push({
      key: `prompt ${method.mcpPrompt.name}`,
      what: `MCP prompt name ${method.mcpPrompt.name}`,
    });
  }
  if (method.mcpResource) {
    keys.push({
      key: `resource ${method.mcpResource.uri}`,
      what: `MCP resource URI ${method.mcpResource.uri}`,
    });
  }
  return keys;
}
