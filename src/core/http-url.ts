/**
 * The one rule for a configured HTTP base URL (a service's, the control plane's): an absolute
 * `http:` or `https:` URL with no credentials in it.
 *
 * @module
 */

/**
 * Parses a configured base URL, or returns `undefined` when it is not an absolute URL (a string
 * or a `URL`). Callers then ask {@link httpBaseUrlProblem} whether it is an acceptable one.
 */
export function parseConfiguredUrl(value: unknown): URL | undefined {
  if (typeof value !== 'string' && !(value instanceof URL)) return undefined;
  try {
    return new URL(value);
  } catch {
    return undefined;
  }
}

/**
 * Why a parsed URL cannot be a base for HTTP requests, or `undefined` when it can.
 *
 * Only `http:` and `https:` are fetched the same way on every runtime. Credentials are refused
 * because the URL ends up in logs and error messages, and because `new Request` throws on them,
 * which would otherwise surface on every request instead of once at construction.
 */
export function httpBaseUrlProblem(url: URL): string | undefined {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return `must use http: or https: (got ${url.protocol})`;
  }
  if (url.username !== '' || url.password !== '') return 'must not carry credentials';
  return undefined;
}
