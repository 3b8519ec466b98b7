/**
 * How an outcome travels back inside MCP framing (Errors rule 1): a result carries a text block
 * (always) and `structuredContent` (object outputs); a failure is an `isError` result whose
 * text and `_meta` hold the same problem record the REST facade answers with (`code`,
 * `status`, `retryable`, `reason`, `issues` for invalid input), never a stack.
 *
 * @module
 */
import { problemFromError } from '../../core/problem.ts';

/** The key under `_meta` carrying the failure's problem record. */
export const MCP_ERROR_META_KEY = 'svcplane/error';

/** A `tools/call` result. */
export interface ToolResult {
  content: { type: 'text'; text: string }[];
  structuredContent?: Record<string, unknown>;
  isError?: true;
  _meta?: Record<string, unknown>;
  [key: string]: unknown;
}

/** The text an output is shown as: a string as is, anything else as JSON. */
export function outputText(output: unknown): string {
  if (typeof output === 'string') return output;
  return JSON.stringify(output) ?? 'null';
}

/** A successful result; `structured` sends an object output as `structuredContent` too. */
export function toolSuccess(output: unknown, structured: boolean): ToolResult {
  const result: ToolResult = { content: [{ type: 'text', text: outputText(output) }] };
  if (structured && output !== null && typeof output === 'object' && !Array.isArray(output)) {
    result.structuredContent = output as Record<string, unknown>;
  }
  return result;
}

/** The problem record of a failure, classified as every other door classifies it. */
export async function failureRecord(
  error: unknown,
  requestId: string,
): Promise<Record<string, unknown>> {
  return await problemFromError(error, requestId).json() as Record<string, unknown>;
}

/** An in-band failure result. */
export async function toolFailure(error: unknown, requestId: string): Promise<ToolResult> {
  const record = await failureRecord(error, requestId);
  return {
    content: [{ type: 'text', text: JSON.stringify({ error: record }) }],
    isError: true,
    _meta: { [MCP_ERROR_META_KEY]: record },
  };
}
