/**
 * The Origin gate of the MCP endpoint (MCP rule 2). A browser's `Origin` must equal the
 * endpoint origin or be listed in `mcp.allowedOrigins`. The endpoint origin is the plane's
 * `publicOrigin`; without one, only a request whose `Host` is a loopback name has an endpoint
 * origin (its own). Deriving it from any `Host` would let a DNS-rebinding page, whose forged
 * `Host` and `Origin` agree, pass as same-origin.
 *
 * @module
 */

const LOOPBACK_HOSTNAMES: ReadonlySet<string> = new Set(['localhost', '127.0.0.1', '[::1]']);

/** What the gate compares an `Origin` with. */
export interface OriginGate {
  /** The plane's `publicOrigin` entries. */
  publicOrigins: readonly string[];
  /** `mcp.allowedOrigins`. */
  allowedOrigins: ReadonlySet<string>;
}

/** The endpoint origin a request has by its own `Host`: only a loopback one counts. */
function loopbackOrigin(request: Request): string | undefined {
  let url: URL;
  try {
    url = new URL(request.url);
  } catch {
    return undefined;
  }
  const host = request.headers.get('host');
  // The URL is built from Host on every runtime's server; when both are present they must
  // agree, so a proxy that rewrote one cannot make the other look local.
  if (host !== null && host.toLowerCase() !== url.host) return undefined;
  return LOOPBACK_HOSTNAMES.has(url.hostname) ? url.origin : undefined;
}

/**
 * Whether the request may go on: no `Origin` (a non-browser client), or an `Origin` equal to
 * an endpoint origin or an allowed one. `Origin: null` and anything else is refused.
 */
export function originAllowed(request: Request, gate: OriginGate): boolean {
  const origin = request.headers.get('origin');
  if (origin === null) return true;
  if (gate.allowedOrigins.has(origin) || gate.publicOrigins.includes(origin)) return true;
  return loopbackOrigin(request) === origin;
}
