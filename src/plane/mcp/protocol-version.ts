/**
 * The `MCP-Protocol-Version` gate (MCP rule 1, Versioning rule 2) and the negotiation fix-up:
 * the SDK still accepts two 2024 revisions the contract does not, so an `initialize` naming any
 * revision outside the contract's three is rewritten to the latest before the SDK sees it.
 *
 * @module
 */

/** The revisions the endpoint accepts, newest first. */
export const MCP_PROTOCOL_VERSIONS: readonly string[] = Object.freeze([
  '2025-11-25',
  '2025-06-18',
  '2025-03-26',
]);

/** The revision a request without `MCP-Protocol-Version` is read as. */
export const DEFAULT_MCP_PROTOCOL_VERSION = '2025-03-26';

/** Whether a request's `MCP-Protocol-Version` header (absent = the default) is accepted. */
export function protocolVersionAccepted(header: string | null): boolean {
  return header === null || MCP_PROTOCOL_VERSIONS.includes(header);
}

/**
 * Rewrites the `protocolVersion` of an `initialize` request to the latest accepted revision
 * when it names any other (a 2024 revision, a future one, a non-string), in place.
 */
export function pinInitializeVersion(message: Record<string, unknown>): void {
  if (message.method !== 'initialize') return;
  const params = message.params;
  if (params === null || typeof params !== 'object' || Array.isArray(params)) return;
  const requested = (params as Record<string, unknown>).protocolVersion;
  if (typeof requested !== 'string' || !MCP_PROTOCOL_VERSIONS.includes(requested)) {
    (params as Record<string, unknown>).protocolVersion = MCP_PROTOCOL_VERSIONS[0];
  }
}
