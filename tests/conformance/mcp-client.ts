// A small MCP client for the fixture plane's `/mcp` endpoint (the fixture's bearer credentials
// name the caller): builds Streamable HTTP requests and reads JSON and SSE answers alike.
import { PLANE_URL } from './fixture.ts';

/** The plane's MCP endpoint URL in the fixture. */
export const MCP_URL = `${PLANE_URL}/mcp`;

/** Options of {@link mcpRequest}. */
export interface McpRequestOptions {
  token?: string;
  headers?: Record<string, string>;
  method?: string;
}

/** An MCP POST (JSON-RPC body) to the plane, with the headers a Streamable HTTP client sends. */
export function mcpRequest(body: unknown, options: McpRequestOptions = {}): Request {
  const headers: Record<string, string> = {
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    'MCP-Protocol-Version': '2025-11-25',
    ...(options.token !== undefined ? { Authorization: `Bearer ${options.token}` } : {}),
    ...options.headers,
  };
  for (const [name, value] of Object.entries(headers)) if (value === '') delete headers[name];
  const method = options.method ?? 'POST';
  return new Request(MCP_URL, {
    method,
    headers,
    ...(method === 'POST' || method === 'PUT'
      ? { body: typeof body === 'string' ? body : JSON.stringify(body) }
      : {}),
  });
}

let nextId = 1;

/** A JSON-RPC request object. */
export function rpc(method: string, params: Record<string, unknown> = {}): Record<string, unknown> {
  return { jsonrpc: '2.0', id: nextId++, method, params };
}

/** An MCP answer read whole: status, headers, raw text and the JSON-RPC messages it held. */
export interface McpAnswer {
  status: number;
  headers: Headers;
  text: string;
  // deno-lint-ignore no-explicit-any
  messages: any[];
  // deno-lint-ignore no-explicit-any
  result: any;
  // deno-lint-ignore no-explicit-any
  error: any;
}

/** Reads an answer: one JSON body, or the `data:` lines of an SSE stream. */
export async function readMcp(response: Response): Promise<McpAnswer> {
  const text = await response.text();
  const messages: unknown[] = [];
  if ((response.headers.get('Content-Type') ?? '').includes('text/event-stream')) {
    for (const line of text.split('\n')) {
      if (line.startsWith('data:') && line.slice(5).trim() !== '') {
        messages.push(JSON.parse(line.slice(5)));
      }
    }
  } else {
    try {
      const parsed = JSON.parse(text);
      messages.push(...(Array.isArray(parsed) ? parsed : [parsed]));
    } catch {
      // Not JSON: messages stay empty.
    }
  }
  // deno-lint-ignore no-explicit-any
  const final = messages.find((message: any) => 'result' in message || 'error' in message) as any;
  return {
    status: response.status,
    headers: response.headers,
    text,
    messages,
    result: final?.result,
    error: final?.error,
  };
}
