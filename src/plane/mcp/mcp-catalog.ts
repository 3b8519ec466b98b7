/**
 * What the MCP endpoint offers, projected from the catalog's published methods: tools, prompts,
 * resources and resource templates. The same for every caller (the catalog never varies by
 * caller). A tool name, prompt name or resource URI claimed by two services is refused: the
 * endpoint fails closed rather than pick one.
 *
 * @module
 */
import type { JsonSchema } from '../../core/schema.ts';
import { SvcInternalError } from '../../core/errors.ts';
import { resourceUriVariables } from '../../service/mcp-projection.ts';
import { requiredInputFields, topLevelStringInputFields } from '../../service/rest-path.ts';
import type { InvocationTarget, PublishedMethod } from '../invocation.ts';

/** One tool as `tools/list` shows it. */
export interface ToolListing {
  name: string;
  title?: string;
  description: string;
  inputSchema: JsonSchema;
  outputSchema?: JsonSchema;
  annotations: { idempotentHint?: true; readOnlyHint?: true };
}

/** A projected method: what to invoke, and how the door names it. */
export interface McpProjected {
  target: InvocationTarget;
  published: PublishedMethod;
}

/** A tool: its listing and whether its result is structured. */
export interface McpTool extends McpProjected {
  listing: ToolListing;
  stream: boolean;
  /** The output (or the `{ items }` of a stream) is an object: sent as `structuredContent`. */
  structured: boolean;
}

/** A prompt: its listing (arguments = top-level string input fields). */
export interface McpPrompt extends McpProjected {
  listing: {
    name: string;
    title?: string;
    description?: string;
    arguments: { name: string; required?: boolean }[];
  };
}

/** A resource or resource template. */
export interface McpResource extends McpProjected {
  /** The URI or URI template as declared. */
  uri: string;
  mimeType?: string;
  variables: string[];
  /** Matches a concrete URI, capturing each variable in order (templates only). */
  pattern?: RegExp;
  listing: Record<string, string>;
}

/** Everything the endpoint offers. */
export interface McpCatalog {
  tools: Map<string, McpTool>;
  toolList: ToolListing[];
  prompts: Map<string, McpPrompt>;
  resources: Map<string, McpResource>;
  templates: McpResource[];
  /** Whether any projection exists (else the endpoint is not mounted for this catalog). */
  empty: boolean;
}

function isObjectSchema(schema: JsonSchema): boolean {
  return schema.type === 'object';
}

/**
 * A stream's result schema: `{ items: [item...] }`. The item schema's `$schema` and `$defs`
 * move to the root, where its `#/$defs/...` references resolve.
 */
function itemsSchema(item: JsonSchema): JsonSchema {
  const { $schema, $defs, ...rest } = item;
  return {
    ...($schema !== undefined ? { $schema } : {}),
    type: 'object',
    properties: { items: { type: 'array', items: rest } },
    required: ['items'],
    ...($defs !== undefined ? { $defs } : {}),
  };
}

function toolOf(entry: PublishedMethod, target: InvocationTarget): McpTool | undefined {
  const { method } = entry;
  if (method.mcp === undefined) return undefined;
  const stream = method.stream === true;
  const outputSchema = stream ? itemsSchema(method.outputSchema) : method.outputSchema;
  const structured = stream || isObjectSchema(method.outputSchema);
  const readOnly = method.rest?.method === 'get' || method.rest?.method === 'query';
  const listing: ToolListing = {
    name: method.mcp.name,
    ...(method.mcp.title !== undefined ? { title: method.mcp.title } : {}),
    description: method.mcp.description,
    inputSchema: method.inputSchema,
    ...(structured ? { outputSchema } : {}),
    annotations: {
      ...(method.idempotent ? { idempotentHint: true as const } : {}),
      ...(readOnly ? { readOnlyHint: true as const } : {}),
    },
  };
  return { target, published: entry, listing, stream, structured };
}

function promptOf(entry: PublishedMethod, target: InvocationTarget): McpPrompt | undefined {
  const prompt = entry.method.mcpPrompt;
  if (prompt === undefined || entry.method.stream) return undefined;
  const required = requiredInputFields(entry.method.inputSchema);
  const args = [...topLevelStringInputFields(entry.method.inputSchema)].map((name) => ({
    name,
    ...(required.has(name) ? { required: true } : {}),
  }));
  return {
    target,
    published: entry,
    listing: {
      name: prompt.name,
      ...(prompt.title !== undefined ? { title: prompt.title } : {}),
      ...(prompt.description !== undefined ? { description: prompt.description } : {}),
      arguments: args,
    },
  };
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}

function resourceOf(entry: PublishedMethod, target: InvocationTarget): McpResource | undefined {
  const resource = entry.method.mcpResource;
  if (resource === undefined || entry.method.stream) return undefined;
  const variables = resourceUriVariables(resource.uri);
  const optional: Record<string, string> = {};
  for (const key of ['title', 'description', 'mimeType'] as const) {
    if (resource[key] !== undefined) optional[key] = resource[key]!;
  }
  const templated = variables.length > 0;
  return {
    target,
    published: entry,
    uri: resource.uri,
    ...(resource.mimeType !== undefined ? { mimeType: resource.mimeType } : {}),
    variables,
    ...(templated
      ? {
        pattern: new RegExp(
          `^${resource.uri.split(/\{[A-Za-z0-9_]+\}/).map(escapeRegExp).join('([^/?#]+)')}$`,
        ),
      }
      : {}),
    listing: {
      ...(templated ? { uriTemplate: resource.uri } : { uri: resource.uri }),
      name: resource.name,
      ...optional,
    },
  };
}

function claim<T>(map: Map<string, T>, key: string, value: T, what: string): void {
  if (map.has(key)) {
    throw new SvcInternalError(`MCP ${what} ${key} is published by two methods`, {
      reason: 'mcp_duplicate_projection',
    });
  }
  map.set(key, value);
}

/** Projects the published methods; throws `SvcInternalError` on a duplicate name or URI. */
export function buildMcpCatalog(published: readonly PublishedMethod[]): McpCatalog {
  const tools = new Map<string, McpTool>();
  const prompts = new Map<string, McpPrompt>();
  const resources = new Map<string, McpResource>();
  const templates: McpResource[] = [];
  for (const entry of published) {
    const target = {
      serviceId: entry.serviceId,
      abilityId: entry.ability.id,
      method: entry.methodName,
    };
    const tool = toolOf(entry, target);
    if (tool !== undefined) claim(tools, tool.listing.name, tool, 'tool');
    const prompt = promptOf(entry, target);
    if (prompt !== undefined) claim(prompts, prompt.listing.name, prompt, 'prompt');
    const resource = resourceOf(entry, target);
    if (resource !== undefined) {
      claim(resources, resource.uri, resource, 'resource');
      if (resource.pattern !== undefined) templates.push(resource);
    }
  }
  return {
    tools,
    toolList: [...tools.values()].map((tool) => tool.listing),
    prompts,
    resources,
    templates,
    empty: tools.size === 0 && prompts.size === 0 && resources.size === 0,
  };
}

/** The resource a `resources/read` URI names, with the input its variables spell. */
export function resolveResource(
  catalog: McpCatalog,
  uri: string,
): { resource: McpResource; input: Record<string, string> } | undefined {
  const direct = catalog.resources.get(uri);
  if (direct !== undefined && direct.pattern === undefined) return { resource: direct, input: {} };
  for (const resource of catalog.templates) {
    const match = resource.pattern!.exec(uri);
    if (match === null) continue;
    const input: Record<string, string> = {};
    try {
      resource.variables.forEach((name, index) => {
        input[name] = decodeURIComponent(match[index + 1]);
      });
    } catch {
      continue;
    }
    return { resource, input };
  }
  return undefined;
}
