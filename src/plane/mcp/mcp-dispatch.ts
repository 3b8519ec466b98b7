/**
 * The MCP methods the endpoint answers, without the SDK: tools, prompts and resources of the
 * projected catalog, each call going through the plane's one invocation path. Unknown names are
 * JSON-RPC errors and contact no service; every failure once a call was made stays in-band.
 *
 * @module
 */
import { svcErrorInfo } from '../../core/errors.ts';
import type { SvcEventLog } from '../../core/logging.ts';
import type { Invocation, InvocationContext } from '../invocation.ts';
import { type McpCatalog, type McpProjected, resolveResource } from './mcp-catalog.ts';
import {
  aggregateStream,
  type AggregationLimits,
  type ProgressSink,
} from './stream-aggregation.ts';
import {
  failureRecord,
  outputText,
  toolFailure,
  type ToolResult,
  toolSuccess,
} from './tool-result.ts';

/** JSON-RPC "invalid params": an unknown tool, prompt or resource. */
export const JSONRPC_INVALID_PARAMS = -32602;
/** JSON-RPC "internal error". */
export const JSONRPC_INTERNAL_ERROR = -32603;
/** MCP's "resource not found". */
export const MCP_RESOURCE_NOT_FOUND = -32002;

/** An error answered as a JSON-RPC error object (`code` is read by the SDK). */
export class McpProtocolError extends Error {
  constructor(readonly code: number, message: string, readonly data?: unknown) {
    super(message);
    this.name = 'McpProtocolError';
  }
}

/** What one dispatch needs from the request. */
export interface DispatchScope {
  catalog: McpCatalog;
  invocation: Invocation;
  /**
   * The request's invocation context; each call's `signal` is the one the SDK gave its handler,
   * which the request's own signal aborts (see `serveMcpRequest`).
   */
  context: InvocationContext;
  log: SvcEventLog;
  /** `false` when `log` discards every event: then none is built. */
  logging: boolean;
  /** The request context events are logged with. */
  logContext: unknown;
  limits: AggregationLimits;
  /** Names the projected method on `svcInvocation` (MCP enriches it during dispatch). */
  enrich(projected: McpProjected, extra: { tool?: string }): void;
}

/** Per-call extras the SDK gives a handler. */
export interface CallExtra {
  signal: AbortSignal;
  progress?: ProgressSink;
}

type Kind = 'tool' | 'prompt' | 'resource';

function shown(name: unknown): string {
  return JSON.stringify(String(name).slice(0, 128));
}

/**
 * The dispatcher of one request. A class, not a set of closures: one is built per request, and
 * its methods are shared by all of them.
 */
export class McpDispatch {
  constructor(private readonly scope: DispatchScope) {}

  private event(
    kind: Kind,
    projected: McpProjected,
    name: string,
    startedAt: number,
    error?: unknown,
  ): void {
    const scope = this.scope;
    if (!scope.logging) return;
    const base = {
      requestId: scope.context.requestId,
      [kind === 'resource' ? 'uri' : kind]: name,
      serviceId: projected.target.serviceId,
      abilityId: projected.target.abilityId,
      method: projected.target.method,
      durationMs: Date.now() - startedAt,
    };
    if (error === undefined) {
      scope.log({ event: `svc.mcp.${kind}.completed`, level: 'info', ...base }, scope.logContext);
      return;
    }
    const info = svcErrorInfo(error);
    scope.log({
      event: `svc.mcp.${kind}.failed`,
      level: info.status >= 500 ? 'error' : 'warn',
      ...base,
      code: info.code,
      status: info.status,
      retryable: info.retryable,
      ...(info.reason !== undefined ? { reason: info.reason } : {}),
    }, scope.logContext);
  }

  private unknown(kind: Kind, name: unknown): never {
    this.scope.log({
      event: `svc.mcp.${kind}.failed`,
      level: 'warn',
      requestId: this.scope.context.requestId,
      reason: `unknown_${kind}`,
    }, this.scope.logContext);
    throw new McpProtocolError(
      kind === 'resource' ? MCP_RESOURCE_NOT_FOUND : JSONRPC_INVALID_PARAMS,
      `Unknown ${kind}: ${shown(name)}`,
    );
  }

  private contextFor(signal: AbortSignal): InvocationContext {
    return { ...this.scope.context, signal };
  }

  /** Calls a unary projection; rethrows with the `kind` event logged. */
  private async callUnary(
    kind: Kind,
    projected: McpProjected,
    name: string,
    input: unknown,
    signal: AbortSignal,
  ): Promise<unknown> {
    this.scope.enrich(projected, kind === 'tool' ? { tool: name } : {});
    const startedAt = Date.now();
    try {
      const output = await this.scope.invocation.call(
        projected.target,
        input,
        this.contextFor(signal),
      );
      this.event(kind, projected, name, startedAt);
      return output;
    } catch (error) {
      this.event(kind, projected, name, startedAt, error);
      throw error;
    }
  }

  /**
   * Prompts and resources have no `isError` result: their failures are JSON-RPC errors whose
   * `data` is the same problem record a tool failure carries.
   */
  private async failingAsProtocolError<T>(run: Promise<T>): Promise<T> {
    try {
      return await run;
    } catch (error) {
      const record = await failureRecord(error, this.scope.context.requestId);
      const code = record.status === 422 ? JSONRPC_INVALID_PARAMS : JSONRPC_INTERNAL_ERROR;
      throw new McpProtocolError(code, String(record.detail), record);
    }
  }

  /** `tools/list`. */
  listTools(): { tools: unknown[] } {
    return { tools: this.scope.catalog.toolList };
  }

  /** `tools/call`: every failure once the tool is known is an in-band `isError` result. */
  async callTool(
    params: { name: string; arguments?: Record<string, unknown> },
    extra: CallExtra,
  ): Promise<ToolResult> {
    const scope = this.scope;
    const tool = scope.catalog.tools.get(params.name) ?? this.unknown('tool', params.name);
    const input = params.arguments ?? {};
    if (!tool.stream) {
      try {
        const output = await this.callUnary('tool', tool, params.name, input, extra.signal);
        return toolSuccess(output, tool.structured);
      } catch (error) {
        return await toolFailure(error, scope.context.requestId);
      }
    }
    scope.enrich(tool, { tool: params.name });
    const startedAt = Date.now();
    const context = this.contextFor(extra.signal);
    try {
      const stream = await scope.invocation.stream(tool.target, input, context);
      const items = await aggregateStream(stream, scope.limits, extra.progress, context.signal);
      this.event('tool', tool, params.name, startedAt);
      return toolSuccess({ items }, true);
    } catch (error) {
      this.event('tool', tool, params.name, startedAt, error);
      return await toolFailure(error, scope.context.requestId);
    }
  }

  /** `prompts/list`. */
  listPrompts(): { prompts: unknown[] } {
    return { prompts: [...this.scope.catalog.prompts.values()].map((p) => p.listing) };
  }

  /** `prompts/get`. */
  async getPrompt(
    params: { name: string; arguments?: Record<string, string> },
    extra: CallExtra,
  ): Promise<Record<string, unknown>> {
    const prompt = this.scope.catalog.prompts.get(params.name) ??
      this.unknown('prompt', params.name);
    const output = await this.failingAsProtocolError(
      this.callUnary('prompt', prompt, params.name, params.arguments ?? {}, extra.signal),
    );
    if (
      output !== null && typeof output === 'object' &&
      Array.isArray((output as { messages?: unknown }).messages)
    ) {
      return output as Record<string, unknown>;
    }
    return {
      ...(prompt.listing.description !== undefined
        ? { description: prompt.listing.description }
        : {}),
      messages: [{ role: 'user', content: { type: 'text', text: outputText(output) } }],
    };
  }

  /** `resources/list`: the resources whose URI is not a template. */
  listResources(): { resources: unknown[] } {
    return {
      resources: [...this.scope.catalog.resources.values()].filter((r) => r.pattern === undefined)
        .map((r) => r.listing),
    };
  }

  /** `resources/templates/list`. */
  listResourceTemplates(): { resourceTemplates: unknown[] } {
    return { resourceTemplates: this.scope.catalog.templates.map((r) => r.listing) };
  }

  /** `resources/read`. */
  async readResource(
    params: { uri: string },
    extra: CallExtra,
  ): Promise<{ contents: Record<string, unknown>[] }> {
    const found = resolveResource(this.scope.catalog, params.uri) ??
      this.unknown('resource', params.uri);
    const output = await this.failingAsProtocolError(
      this.callUnary('resource', found.resource, found.resource.uri, found.input, extra.signal),
    );
    return {
      contents: [{
        uri: params.uri,
        ...(found.resource.mimeType !== undefined ? { mimeType: found.resource.mimeType } : {}),
        text: outputText(output),
      }],
    };
  }
}
