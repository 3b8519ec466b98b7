/**
 * The plane's public origin(s) (`publicOrigin`): MCP's endpoint origin and the OpenAPI
 * `servers` entry. An origin is exactly `scheme://host[:port]` as a browser serialises it.
 *
 * @module
 */
import { SvcConfigurationError } from '../core/errors.ts';

/**
 * Returns `value` when it is an http(s) origin written exactly as a browser sends it in
 * `Origin` (lower-case, no default port, no path or trailing slash); throws otherwise.
 */
export function checkedOrigin(value: unknown, label: string): string {
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
      `${label} must be an origin such as https://plane.example.com (scheme, host and port only)`,
    );
  }
  return value;
}

/** Validates the `publicOrigin` option: one origin or a list of them (default none). */
export function resolvePublicOrigins(option: unknown): readonly string[] {
  if (option === undefined) return Object.freeze([]);
  const list = Array.isArray(option) ? option : [option];
  return Object.freeze(
    list.map((origin, index) =>
      checkedOrigin(
        origin,
        Array.isArray(option)
          ? `createControlPlane: \`publicOrigin[${index}]\``
          : 'createControlPlane: `publicOrigin`',
      )
    ),
  );
}
