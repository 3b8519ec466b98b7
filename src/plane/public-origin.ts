/**
 * The plane option `publicOrigin`: the origin(s) the plane is reached at from outside. It names
 * the OpenAPI document's `servers` and MCP's endpoint origin, so it must be an origin and
 * nothing more: `scheme://host[:port]`, no path, query, fragment or credentials.
 *
 * @module
 */
import { describeConfigValue } from '../core/config-values.ts';
import { SvcConfigurationError } from '../core/errors.ts';

/** The `publicOrigin` option: one origin or several. */
export type PublicOriginOption = string | readonly string[];

const LABEL = 'createControlPlane: `publicOrigin`';

function refuse(problem: string): never {
  throw new SvcConfigurationError(`${LABEL}${problem}`, { reason: 'invalid_public_origin' });
}

/** One origin, as `URL.origin` writes it (lower-case scheme and host, default port dropped). */
function origin(value: unknown, where: string): string {
  if (typeof value !== 'string' || value.length === 0) {
    refuse(`${where} must be an origin string, got ${describeConfigValue(value)}`);
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return refuse(`${where} ${describeConfigValue(value)} is not a URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    refuse(`${where} ${describeConfigValue(value)} must use http or https`);
  }
  // `new URL` forgives a `?` or `#` with nothing after them: refused too, so nothing written
  // in the option is silently dropped (a trailing `/` and a default port are only spelling).
  if (
    url.username !== '' || url.password !== '' || url.pathname !== '/' || url.search !== '' ||
    url.hash !== '' || /[?#]/.test(value)
  ) {
    refuse(`${where} ${describeConfigValue(value)} must be scheme://host[:port] and nothing more`);
  }
  return url.origin;
}

/**
 * Validates `publicOrigin` and resolves it to a list of distinct origins (empty when absent).
 * Refuses (`SvcConfigurationError`, reason `invalid_public_origin`) anything but an http(s)
 * origin or a non-empty list of them.
 */
export function resolvePublicOrigins(option: unknown): readonly string[] {
  if (option === undefined) return Object.freeze([]);
  const list = typeof option === 'string' ? [option] : option;
  if (!Array.isArray(list) || list.length === 0) {
    refuse(' must be an origin or a non-empty array of origins');
  }
  const origins: string[] = [];
  list.forEach((value, index) => {
    const resolved = origin(value, typeof option === 'string' ? '' : `[${index}]`);
    if (!origins.includes(resolved)) origins.push(resolved);
  });
  return Object.freeze(origins);
}
