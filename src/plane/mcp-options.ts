/**
 * The `mcp` option of `createControlPlane`, checked when the plane is created.
 *
 * @module
 */
import { isPlainObject, refuseUnknownKeys } from '../core/config-values.ts';
import { SvcConfigurationError } from '../core/errors.ts';

/** Bounds of a streaming tool's aggregated result and of its progress notifications. */
export interface McpStreamLimits {
  /** Most items aggregated into one `{ items }` result. Default 10 000. */
  maxItems?: number;
  /**
   * Most bytes of serialized items aggregated into one result, and separately most bytes of
   * progress notifications sent for one call. Default 1 MiB.
   */
  maxBytes?: number;
}

/** The `mcp` option: the MCP endpoint at `POST /mcp`. */
export interface McpOptions {
  /** Browser origins allowed besides the endpoint origin (exact origins, `scheme://host[:port]`). */
  allowedOrigins?: readonly string[];
  /** Bounds of streaming tools. */
  streamLimits?: McpStreamLimits;
  /** Largest request body in bytes; a larger one is answered 413. Default 1 MiB. */
  maxBodyBytes?: number;
}

/** The `mcp` option after validation, defaults applied. */
export interface ResolvedMcpOptions {
  allowedOrigins: ReadonlySet<string>;
  maxItems: number;
  maxBytes: number;
  maxBodyBytes: number;
}

/** Default `mcp.streamLimits.maxItems`. */
export const DEFAULT_MCP_STREAM_MAX_ITEMS = 10_000;
/** Default `mcp.streamLimits.maxBytes`: 1 MiB. */
export const DEFAULT_MCP_STREAM_MAX_BYTES = 1024 * 1024;
/** Default `mcp.maxBodyBytes`: 1 MiB. */
export const DEFAULT_MCP_MAX_BODY_BYTES = 1024 * 1024;

const LABEL = 'createControlPlane: `mcp';

/**
 * Returns `value` when it is an http(s) origin written exactly as a browser sends it in
 * `Origin` (lower-case, no default port, no path or trailing slash): the gate compares exactly.
 */
function checkedOrigin(value: unknown, label: string): string {
  let parsed: URL | undefined;
  try {
    parsed = typeof value === 'string' ? new URL(value) : undefined;
  } catch {
    parsed = undefined;
  }
  if (
    parsed === undefined || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') ||
    parsed.origin !== value
  ) {
    throw new SvcConfigurationError(
      `${label} must be an origin such as https://app.example.com (scheme, host and port only)`,
    );
  }
  return value;
}

function positiveInteger(value: unknown, field: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    throw new SvcConfigurationError(`${LABEL}.${field}\` must be a positive integer`);
  }
  return value;
}

/** Validates the `mcp` option (`undefined` means defaults). */
export function resolveMcpOptions(option: unknown): ResolvedMcpOptions {
  const value = option ?? {};
  if (!isPlainObject(value)) {
    throw new SvcConfigurationError(`${LABEL}\` must be an object`);
  }
  refuseUnknownKeys(value, ['allowedOrigins', 'streamLimits', 'maxBodyBytes'], `${LABEL}\``);
  const origins = value.allowedOrigins ?? [];
  if (!Array.isArray(origins)) {
    throw new SvcConfigurationError(`${LABEL}.allowedOrigins\` must be an array of origins`);
  }
  const limits = value.streamLimits ?? {};
  if (!isPlainObject(limits)) {
    throw new SvcConfigurationError(`${LABEL}.streamLimits\` must be an object`);
  }
  refuseUnknownKeys(limits, ['maxItems', 'maxBytes'], `${LABEL}.streamLimits\``);
  return {
    allowedOrigins: new Set(
      origins.map((origin, index) => checkedOrigin(origin, `${LABEL}.allowedOrigins[${index}]\``)),
    ),
    maxItems: positiveInteger(
      limits.maxItems,
      'streamLimits.maxItems',
      DEFAULT_MCP_STREAM_MAX_ITEMS,
    ),
    maxBytes: positiveInteger(
      limits.maxBytes,
      'streamLimits.maxBytes',
      DEFAULT_MCP_STREAM_MAX_BYTES,
    ),
    maxBodyBytes: positiveInteger(value.maxBodyBytes, 'maxBodyBytes', DEFAULT_MCP_MAX_BODY_BYTES),
  };
}
