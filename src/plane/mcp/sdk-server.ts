/**
 * The only module that loads `@modelcontextprotocol/sdk`, imported lazily by the endpoint on the
 * first MCP request, so a plane without MCP projections never loads the SDK. One low-level
 * `Server` and one stateless `WebStandardStreamableHTTPServerTransport` per request: a stateless
 * transport cannot be reused, and the pair holds nothing between requests.
 *
 * @module
 */
// The SDK's `./*` export maps `x.js` to types at `x.js.d.ts`, which do not exist: Deno (and so
// `deno publish`) reads each module's types from the extensionless subpath named here instead.
// @ts-types="@modelcontextprotocol/sdk/server"
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
// @ts-types="@modelcontextprotocol/sdk/server/webStandardStreamableHttp"
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
// @ts-types="@modelcontextprotocol/sdk/types"
import {
  CallToolRequestSchema,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { CfWorkerJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/cfworker';
import type { McpDispatch } from './mcp-dispatch.ts';
import type { ProgressSink } from './stream-aggregation.ts';
import { withoutStackCapture } from '../../core/stackless.ts';

/** How one request is served. */
export interface McpServeOptions {
  serverInfo: { name: string; version: string };
  /** Answer with one JSON body (no notification can be sent) instead of an SSE stream. */
  jsonResponse: boolean;
}

function progressSink(
  token: unknown,
  send: (
    notification: { method: 'notifications/progress'; params: Record<string, unknown> },
  ) => Promise<void>,
): ProgressSink | undefined {
  if (typeof token !== 'string' && typeof token !== 'number') return undefined;
  return { token, send: (params) => send({ method: 'notifications/progress', params }) };
}

// AJV compiles with `new Function`, which workerd forbids; this one runs everywhere. It holds no
// state between validations, so every request's server shares it.
let validator: CfWorkerJsonSchemaValidator | undefined;

type HandlerRegistration = (server: Server, dispatch: McpDispatch) => void;

/** How each method the endpoint answers is handed to the dispatcher. */
const HANDLERS: Readonly<Record<string, HandlerRegistration>> = {
  'tools/list': (server, dispatch) =>
    server.setRequestHandler(ListToolsRequestSchema, () => dispatch.listTools()),
  'tools/call': (server, dispatch) =>
    server.setRequestHandler(
      CallToolRequestSchema,
      (request, extra) =>
        dispatch.callTool(request.params, {
          signal: extra.signal,
          progress: progressSink(request.params._meta?.progressToken, extra.sendNotification),
        }),
    ),
  'prompts/list': (server, dispatch) =>
    server.setRequestHandler(ListPromptsRequestSchema, () => dispatch.listPrompts()),
  'prompts/get': (server, dispatch) =>
    server.setRequestHandler(GetPromptRequestSchema, (request, extra) =>
      // deno-lint-ignore no-explicit-any
      dispatch.getPrompt(request.params, { signal: extra.signal }) as any),
  'resources/list': (server, dispatch) =>
    server.setRequestHandler(ListResourcesRequestSchema, () => dispatch.listResources()),
  'resources/templates/list': (server, dispatch) =>
    server.setRequestHandler(
      ListResourceTemplatesRequestSchema,
      () => dispatch.listResourceTemplates(),
    ),
  'resources/read': (server, dispatch) =>
    server.setRequestHandler(
      ReadResourceRequestSchema,
      (request, extra) => dispatch.readResource(request.params, { signal: extra.signal }),
    ),
};

/**
 * The server of one request, with handlers for the methods its messages name: no other method
 * can reach it (it lives for this request only), and registering a handler costs a schema
 * inspection each. A method without one is answered "method not found", as the SDK answers any
 * method the endpoint does not serve.
 */
function createServer(
  dispatch: McpDispatch,
  info: McpServeOptions['serverInfo'],
  messages: readonly unknown[],
): Server {
  const server = new Server(info, {
    capabilities: { tools: {}, prompts: {}, resources: {}, logging: {} },
    jsonSchemaValidator: validator ??= new CfWorkerJsonSchemaValidator(),
  });
  const registered = new Set<string>();
  for (const message of messages) {
    const method = (message as { method?: unknown }).method;
    if (typeof method !== 'string' || registered.has(method) || !Object.hasOwn(HANDLERS, method)) {
      continue;
    }
    registered.add(method);
    HANDLERS[method](server, dispatch);
  }
  return server;
}

/** An SSE response with `no-store`, closing the pair once its body ended or was cancelled. */
function closingWhenDone(response: Response, close: () => void): Response {
  const headers = new Headers(response.headers);
  headers.set('Cache-Control', 'no-store');
  const body = response.body;
  if (body === null) {
    close();
    return new Response(null, { status: response.status, headers });
  }
  const reader = body.getReader();
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const next = await reader.read();
        if (next.done) {
          controller.close();
          close();
        } else {
          controller.enqueue(next.value);
        }
      } catch (error) {
        controller.error(error);
        close();
      }
    },
    // The client went away: closing the server aborts every running handler's signal, which
    // cancels the upstream call or stream.
    cancel(reason) {
      reader.cancel(reason).catch(() => {});
      close();
    },
  });
  return new Response(stream, { status: response.status, headers });
}

/**
 * Serves one MCP POST whose body was already read and checked. `signal` is the HTTP request's
 * (the client disconnected): it closes the pair like a cancelled response body does, and so
 * aborts the signal every running handler was given, even when it was aborted before the pair
 * existed.
 *
 * A JSON answer (`jsonResponse`) is complete when it resolves: the transport resolves it once
 * every request the body carries was answered, so no handler runs any more and the pair is left
 * to the collector as it is. Closing it would only abort controllers already gone and build a
 * "connection closed" error for outgoing requests this server never sends. An SSE answer keeps
 * the pair open until its body ends or is cancelled.
 */
export async function serveMcpRequest(
  request: Request,
  parsedBody: unknown,
  dispatch: McpDispatch,
  options: McpServeOptions,
): Promise<Response> {
  const messages = Array.isArray(parsedBody) ? parsedBody : [parsedBody];
  const pair = new RequestPair(
    request,
    createServer(dispatch, options.serverInfo, messages),
    new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: options.jsonResponse,
    }),
  );
  request.signal?.addEventListener('abort', pair, { once: true });
  await pair.server.connect(pair.transport);
  // A client gone before the pair was connected: the closed transport runs no handler.
  if (request.signal?.aborted) pair.close();
  let response: Response;
  try {
    // The transport checks whether each message is an initialize request by parsing it as one:
    // for every other message the failed parse builds an error it discards, whose stack costs
    // V8 several microseconds, twice per request. Every error its synchronous part builds is
    // such a signal (it reports refusals to an `onerror` this server does not set).
    response = await withoutStackCapture(() =>
      pair.transport.handleRequest(request, { parsedBody })
    );
  } catch (error) {
    pair.close();
    throw error;
  }
  if (!options.jsonResponse) return closingWhenDone(response, () => pair.close());
  request.signal?.removeEventListener('abort', pair);
  return response;
}

/** One request's server and transport; the request signal's `abort` listener closes them. */
class RequestPair {
  #closed = false;

  constructor(
    private readonly request: Request,
    readonly server: Server,
    readonly transport: WebStandardStreamableHTTPServerTransport,
  ) {}

  /** Closes the pair once: every running handler's signal is aborted. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.request.signal?.removeEventListener('abort', this);
    this.server.close().catch(() => {});
  }

  handleEvent(): void {
    this.close();
  }
}
