/**
 * `svcplane catalog <plane-url>`: what a control plane serves to the public, read from what it
 * publishes — its OpenAPI document (`/openapi.json`: services and REST routes) and its MCP
 * endpoint (`/mcp`: tools). A door the plane does not serve is reported as unavailable.
 *
 * @module
 */
import { SvcInternalError } from '../../core/errors.ts';
import { CliUsageError, parseArguments, positionals } from '../arguments.ts';
import { type CliOutput, table } from '../output.ts';

export const CATALOG_USAGE = 'svcplane catalog <plane-url> [--json]';

const OPENAPI_PATH = '/openapi.json';
const MCP_PATH = '/mcp';
const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace', 'query'];

interface RestRoute {
  method: string;
  path: string;
  operationId: string;
  service: string;
  summary: string;
}

type Door<T> = { available: true; items: T } | { available: false; why: string };

function planeBase(given: string): URL {
  try {
    const url = new URL(given);
    if (url.protocol === 'http:' || url.protocol === 'https:') return url;
  } catch {
    // Refused below.
  }
  throw new CliUsageError(`${JSON.stringify(given)} is not an absolute http(s) URL`);
}

async function reach(url: URL, init?: RequestInit): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (error) {
    throw new SvcInternalError(`${url.href} could not be reached: ${(error as Error).message}`, {
      reason: 'plane_unreachable',
      status: 503,
    });
  }
}

function routesOf(document: { paths?: Record<string, Record<string, unknown>> }): RestRoute[] {
  const routes: RestRoute[] = [];
  for (const [path, item] of Object.entries(document.paths ?? {})) {
    for (const method of HTTP_METHODS) {
      const operation = item[method] as
        | { operationId?: string; tags?: string[]; summary?: string }
        | undefined;
      if (operation === undefined) continue;
      routes.push({
        method: method.toUpperCase(),
        path,
        operationId: operation.operationId ?? '',
        service: operation.tags?.[0] ?? '',
        summary: operation.summary ?? '',
      });
    }
  }
  return routes;
}

async function restDoor(base: URL): Promise<Door<RestRoute[]>> {
  const url = new URL(OPENAPI_PATH, base);
  const response = await reach(url, { headers: { accept: 'application/json' } });
  if (!response.ok) {
    await response.body?.cancel();
    return { available: false, why: `${url.href} answered HTTP ${response.status}` };
  }
  const document = await response.json().catch(() => undefined);
  if (document === null || typeof document !== 'object') {
    return { available: false, why: `${url.href} is not a JSON document` };
  }
  return { available: true, items: routesOf(document) };
}

/** Reads a JSON-RPC answer sent as JSON or as one server-sent event. */
async function jsonRpcResult(response: Response): Promise<unknown> {
  const text = await response.text();
  const data = (response.headers.get('content-type') ?? '').includes('text/event-stream')
    ? text.split('\n').filter((line) => line.startsWith('data:')).map((line) => line.slice(5))
      .join('')
    : text;
  return (JSON.parse(data) as { result?: unknown }).result;
}

async function mcpDoor(base: URL): Promise<Door<{ name: string; description: string }[]>> {
  const url = new URL(MCP_PATH, base);
  const response = await reach(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-06-18',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
  });
  if (!response.ok) {
    await response.body?.cancel();
    return { available: false, why: `${url.href} answered HTTP ${response.status}` };
  }
  try {
    const result = await jsonRpcResult(response) as {
      tools?: { name?: string; description?: string }[];
    };
    const tools = (result?.tools ?? []).map((tool) => ({
      name: String(tool.name ?? ''),
      description: String(tool.description ?? ''),
    }));
    return { available: true, items: tools };
  } catch {
    return { available: false, why: `${url.href} answered no tools/list result` };
  }
}

/** Runs `catalog`. */
export async function catalog(args: readonly string[], output: CliOutput): Promise<number> {
  const parsed = parseArguments(args, {});
  const [planeUrl] = positionals(parsed, 1, 1, CATALOG_USAGE);
  const base = planeBase(planeUrl);
  const [rest, mcp] = await Promise.all([restDoor(base), mcpDoor(base)]);
  const services = rest.available
    ? [...new Set(rest.items.map((route) => route.service).filter((id) => id !== ''))].sort()
    : [];
  if (output.json) {
    output.data({ plane: base.origin, services, rest, mcp });
    return 0;
  }
  output.line(`plane ${base.origin}`);
  output.line(`  JWKS            ${new URL('/.well-known/svc/jwks.json', base).href}`);
  output.line(`  token endpoint  ${new URL('/.well-known/svc/capability-token', base).href}`);
  output.line('');
  if (rest.available) {
    output.line(`services (from ${OPENAPI_PATH}): ${services.join(', ') || '(none published)'}`);
    output.line('');
    output.line('REST routes:');
    const rows = rest.items.map((r) => [r.method, r.path, r.service, r.operationId, r.summary]);
    for (const line of table(['METHOD', 'PATH', 'SERVICE', 'OPERATION', 'SUMMARY'], rows)) {
      output.line(`  ${line}`);
    }
  } else {
    output.line(`services and REST routes: unavailable (${rest.why})`);
  }
  output.line('');
  if (mcp.available) {
    output.line('MCP tools:');
    const rows = mcp.items.map((tool) => [tool.name, tool.description]);
    for (const line of table(['TOOL', 'DESCRIPTION'], rows)) output.line(`  ${line}`);
  } else {
    output.line(`MCP tools: unavailable (${mcp.why})`);
  }
  return 0;
}
