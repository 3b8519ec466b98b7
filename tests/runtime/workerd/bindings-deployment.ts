/**
 * What the Workers of the service-binding test and the host driving them agree on: ids, the
 * issuer, and the shapes the billing Worker answers with.
 */

/** The control plane's id and the `iss` of its tokens; the orders Worker trusts this issuer. */
export const BINDINGS_PLANE_ID = 'bindings-plane';
/** The issuer of every token the plane Worker mints. */
export const BINDINGS_ISSUER = 'https://plane.bindings.test';
/** The caller Worker's service id, the one the plane's `TokenIssuer` mints for. */
export const BILLING_SERVICE_ID = 'billing';
/** The test-only route of the orders Worker counting the discovery requests it answered. */
export const DISCOVERY_HITS_PATH = '/__test/discovery-hits';

/** The body of the billing Worker's `POST /call`: one call through an ability session. */
export interface CallRequest {
  /** Which plane entrypoint the session's requester uses (default `tokens`). */
  issuer?: 'tokens' | 'throwing';
  targetServiceId: string;
  abilityId: string;
  scopes: string[];
  method: string;
  input: unknown;
}

/** What a caller saw of an error: its own fields as received, and `svcErrorInfo` of it. */
export interface SeenError {
  name: unknown;
  code: unknown;
  status: unknown;
  retryable: unknown;
  reason: unknown;
  message: unknown;
}

/** The billing Worker's answer to `POST /call`. */
export type CallOutcome =
  | { ok: true; result: unknown; tokens: string[] }
  | { ok: false; error: SeenError };

/** The billing Worker's answer to `POST /issue`: the entrypoint's answer, or what it threw. */
export type IssueOutcome = { answer: unknown } | { thrown: SeenError };

/** A catalog log event of the plane Worker, as the billing Worker relays it. */
export interface CatalogEvent {
  event: string;
  target?: unknown;
  reason?: unknown;
  detail?: unknown;
}
