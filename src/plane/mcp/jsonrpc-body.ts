/**
 * Reading an MCP request body: bounded (413 past `maxBodyBytes`, declared or not), parsed
 * (JSON-RPC parse error), shape-checked (JSON-RPC invalid request) and depth-checked, all
 * before the invocation middleware or the SDK runs. Error bodies are JSON-RPC error objects
 * without stacks.
 *
 * @module
 */
import { BODY_ABANDONED_HEADERS, readBoundedText } from '../../core/bounded-body.ts';

/** JSON-RPC 2.0 error codes used before dispatch. */
export const JSONRPC_PARSE_ERROR = -32700;
/** The value is not a JSON-RPC request, notification or response. */
export const JSONRPC_INVALID_REQUEST = -32600;

/** Deepest nesting of arrays and objects accepted in a message. */
export const MAX_MCP_MESSAGE_DEPTH = 64;
/** Most messages accepted in one batch (2025-03-26 allows batches). */
export const MAX_MCP_BATCH_LENGTH = 64;
/** How long a client may take to send its body. */
const BODY_READ_TIMEOUT_MS = 30_000;

/** The messages of an accepted body. */
export type McpMessage = Record<string, unknown>;

/** A refused body: the status and JSON-RPC error to answer with. */
export interface BodyRefusal {
  status: number;
  code: number;
  message: string;
  /** Headers the refusal adds (a body given up on closes its connection). */
  headers?: Readonly<Record<string, string>>;
}

/** A JSON-RPC error response (`id: null`: the request could not be read). */
export function jsonRpcErrorResponse(refusal: BodyRefusal, headers: HeadersInit): Response {
  return new Response(
    JSON.stringify({
      jsonrpc: '2.0',
      id: null,
      error: { code: refusal.code, message: refusal.message },
    }),
    {
      status: refusal.status,
      headers: {
        ...Object.fromEntries(new Headers(headers)),
        ...refusal.headers,
        'Content-Type': 'application/json',
      },
    },
  );
}

function deeperThan(value: unknown, limit: number): boolean {
  if (value === null || typeof value !== 'object') return false;
  const pending: [object, number][] = [[value, 0]];
  while (pending.length > 0) {
    const [current, depth] = pending.pop()!;
    if (depth >= limit) return true;
    for (const child of Object.values(current)) {
      if (child !== null && typeof child === 'object') pending.push([child, depth + 1]);
    }
  }
  return false;
}

const ID_TYPES = new Set(['string', 'number']);

function isMessage(value: unknown): value is McpMessage {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const message = value as McpMessage;
  if (message.jsonrpc !== '2.0') return false;
  const hasId = 'id' in message;
  if (hasId && !ID_TYPES.has(typeof message.id)) return false;
  if (typeof message.method === 'string') {
    const params = message.params;
    return params === undefined || (params !== null && typeof params === 'object');
  }
  // A response (the client answering a server request) carries an id and a result or error.
  return hasId && ('result' in message || 'error' in message);
}

/** Reads, parses and checks the body: the messages, or the refusal to answer with. */
export async function readMcpMessages(
  request: Request,
  maxBodyBytes: number,
): Promise<{ messages: McpMessage[]; batch: boolean } | BodyRefusal> {
  let text: string | undefined;
  try {
    text = await readBoundedText(request, maxBodyBytes, { timeoutMs: BODY_READ_TIMEOUT_MS });
  } catch {
    return {
      status: 400,
      code: JSONRPC_PARSE_ERROR,
      message: 'Parse error: the body could not be read',
      headers: BODY_ABANDONED_HEADERS,
    };
  }
  if (text === undefined) {
    return {
      status: 413,
      code: JSONRPC_INVALID_REQUEST,
      message: `Request body larger than ${maxBodyBytes} bytes`,
    };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { status: 400, code: JSONRPC_PARSE_ERROR, message: 'Parse error: invalid JSON' };
  }
  if (deeperThan(value, MAX_MCP_MESSAGE_DEPTH + 1)) {
    return {
      status: 400,
      code: JSONRPC_INVALID_REQUEST,
      message: `Invalid request: nested deeper than ${MAX_MCP_MESSAGE_DEPTH} levels`,
    };
  }
  const batch = Array.isArray(value);
  const messages = batch ? value as unknown[] : [value];
  if (
    messages.length === 0 || messages.length > MAX_MCP_BATCH_LENGTH || !messages.every(isMessage)
  ) {
    return {
      status: 400,
      code: JSONRPC_INVALID_REQUEST,
      message: 'Invalid request: not a JSON-RPC 2.0 message',
    };
  }
  return { messages: messages as McpMessage[], batch };
}
