/**
 * What the Workers of the service-binding test and the host driving them agree on: ids, the
 * issuer, the shapes the billing Worker answers with, and the streaming session both the billing
 * and the plane Worker run against orders.
 */
import { type AbilitySession, disposeAbilitySession } from '../../../src/caller/ability-session.ts';
import { isAbilityValidationError } from '../../../src/core/validation-issues.ts';

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
  /** The issues `isAbilityValidationError` read, in the caller Worker; absent for other errors. */
  issues?: unknown;
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

/** How many items the streaming tests read from orders' `movements` method. */
export const STREAMED_MOVEMENTS = 1_000;
/** The test-only route of the orders Worker reporting the WebSocket sessions it accepted. */
export const SOCKETS_PATH = '/__test/sockets';

/** One item of orders' `movements` stream, as the method's output schema declares it. */
export interface Movement {
  seq: number;
  sku: string;
}

/** The part of `orders.catalog` the streaming tests call. */
export interface OrdersApi {
  lookup(input: { sku: string }): { sku: string; stock: number; caller: string };
  movements(input: { sku: string; count: number }): ReadableStream<Movement>;
}

/** The body of the billing Worker's `POST /stream`: a WebSocket session over its ORDERS binding. */
export interface StreamRequest {
  /** How many movements to read. */
  count: number;
  /** The RPC route dialled (default `/rpc/orders.catalog`). */
  path?: string;
  /** `plane` (default) asks the plane's TokenIssuer; `unsigned` presents a token no one signed. */
  token?: 'plane' | 'unsigned';
}

/** What a streaming session did: the unary call's result and the items read, or the failure. */
export type StreamOutcome =
  | { ok: true; lookup: unknown; movements: number }
  | { ok: false; error: SeenError };

/** The sessions the orders Worker accepted over WebSocket, and how each one it saw end ended. */
export interface SocketRecord {
  opened: number;
  closed: { code: number; reason: string }[];
}

/** An error as the caller holds it: the fields it carries, nothing re-validated. */
export function seenError(error: unknown): SeenError {
  const record = (error !== null && typeof error === 'object' ? error : {}) as Record<
    string,
    unknown
  >;
  return {
    name: record.name,
    code: record.code,
    status: record.status,
    retryable: record.retryable,
    reason: record.reason,
    message: record.message ?? String(error),
    ...(isAbilityValidationError(error) ? { issues: error.issues } : {}),
  };
}

/**
 * Reads a movements stream to its end, checking each item is exactly the next one (an item the
 * service's output schema did not strip would carry its undeclared `note`); returns the count.
 */
export async function readMovements(stream: ReadableStream<Movement>, sku: string) {
  const reader = stream.getReader();
  for (let seq = 0;; seq++) {
    const { done, value } = await reader.read();
    if (done) return seq;
    const expected = JSON.stringify({ seq, sku });
    if (JSON.stringify(value) !== expected) {
      throw new Error(`movement ${seq} is ${JSON.stringify(value)}, expected ${expected}`);
    }
  }
}

/** Opens a session, makes a unary call and reads `count` movements; always disposes it. */
export async function lookupAndStream(
  openSession: () => AbilitySession<OrdersApi>,
  count: number,
): Promise<StreamOutcome> {
  let session: AbilitySession<OrdersApi> | undefined;
  try {
    session = openSession();
    const lookup = await session.lookup({ sku: 'tea-01' });
    const movements = await readMovements(
      await session.movements({ sku: 'tea-01', count }),
      'tea-01',
    );
    return { ok: true, lookup, movements };
  } catch (error) {
    return { ok: false, error: seenError(error) };
  } finally {
    if (session !== undefined) disposeAbilitySession(session);
  }
}
