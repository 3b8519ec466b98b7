/**
 * What every caller transport shares: the metadata a caller propagates with a session, how it
 * is written on each channel (headers for HTTP-batch and service bindings, query parameters for
 * WebSocket), and the plain-object shape a transport has.
 *
 * A token never travels here: it goes inside the RPC session, as the argument of
 * `authenticate`, so it never lands in a URL, a proxy log or a browser history.
 *
 * @module
 */
import { type AnyRpcTransport, RpcSession } from 'capnweb';
import { SVC_CONN_INFO_HEADER, SVC_CONN_INFO_QUERY_PARAM } from '../../core/conn-info.ts';
import {
  MAX_SVC_TIMEOUT_MS,
  SVC_TIMEOUT_HEADER,
  SVC_TIMEOUT_QUERY_PARAM,
} from '../../core/deadline.ts';
import {
  filterIdempotencyKey,
  SVC_IDEMPOTENCY_KEY_HEADER,
  SVC_IDEMPOTENCY_KEY_QUERY_PARAM,
} from '../../core/idempotency.ts';
import {
  acceptRequestId,
  SVC_REQUEST_ID_HEADER,
  SVC_REQUEST_ID_QUERY_PARAM,
} from '../../core/request-id.ts';

/** Request metadata a caller propagates with an outbound RPC session or batch. */
export interface OutboundRpcMetadata {
  /** Request id to correlate logs across hops. */
  requestId?: string;
  /** Budget left, in milliseconds (already measured on the caller's clock). */
  timeoutMs?: number;
  /** Idempotency key; an invalid key is dropped, never sent. */
  idempotencyKey?: string;
  /** Serialised connection info (`serializeConnInfo`), forwarded only by the plane. */
  connInfo?: string;
}

/** Where a session is headed, for transports that derive a route (in-process `fetch`, bindings). */
export interface RpcOpenTarget {
  /** The ability whose RPC route is opened. */
  abilityId: string;
}

/**
 * The remote main object of an ability's RPC route, as a Cap'n Web stub: `authenticate` returns
 * (a promise of) the ability stub, on which calls can be pipelined before it resolves.
 */
export interface RpcMainStub extends Disposable {
  // deno-lint-ignore no-explicit-any
  authenticate(token: string, proof?: string): any;
}

/** One opened Cap'n Web session: its remote main object and a way to end it. */
export interface OpenedRpcSession {
  /** The remote main object (`authenticate(token, proof?)`). */
  main: RpcMainStub;
  /** Ends the session and releases the connection. Idempotent. */
  close(): void;
  /**
   * Says the caller has nothing left to send or await on it: the connection ends once nothing
   * it returned is still in use (a stream being read keeps it open), and then `ended` runs. A
   * transport without it is closed at once. `close()` still ends it at once.
   */
  finish?(ended: () => void): void;
  /**
   * Whether calls made now still travel with this session. Per-call sessions stop accepting
   * calls once their batch went out; session transports accept calls until closed.
   */
  acceptsCalls(): boolean;
  /**
   * Registers `callback` for when the connection breaks (a dropped socket, an aborted session).
   * Session transports that can tell implement it; HTTP-batch sessions have nothing to break.
   */
  onBroken?(callback: (error: unknown) => void): void;
}

/**
 * A session transport's opened session over `transport`: it accepts calls until closed, and its
 * first `close()` runs `release` (ending the connection the transport's own way) and then
 * disposes of the main stub, which ends the session and rejects whatever is still pending.
 */
export function openSessionOver(
  transport: AnyRpcTransport,
  release: () => void = () => {},
): OpenedRpcSession {
  const session = new RpcSession(transport);
  const main = session.getRemoteMain() as unknown as RpcMainStub & {
    onRpcBroken(callback: (error: unknown) => void): void;
  };
  let closed = false;
  return {
    main,
    acceptsCalls() {
      return !closed;
    },
    onBroken(callback) {
      main.onRpcBroken(callback);
    },
    close() {
      if (closed) return;
      closed = true;
      release();
      main[Symbol.dispose]();
    },
  };
}

/**
 * The kinds of caller transport. `http-batch` and `cloudflare-binding-rpc` are per call: each
 * batch of calls opens its own session carrying the budget left at that moment (contract,
 * deadline semantics); the others carry one long-lived session.
 */
export type RpcTransportKind = 'http-batch' | 'websocket' | 'cloudflare-binding-rpc' | 'custom';

/** Whether a transport of `kind` opens one session per batch of calls. */
export function isPerCallTransport(kind: RpcTransportKind): boolean {
  return kind === 'http-batch' || kind === 'cloudflare-binding-rpc';
}

/** A plain object describing how to open a Cap'n Web session with request metadata. */
export interface RpcTransportFactory {
  /** Per call ({@link isPerCallTransport}) or one long-lived session. */
  readonly kind: RpcTransportKind;
  /** Opens a session (or, for HTTP-batch, one batch) carrying `meta`. */
  open(meta: OutboundRpcMetadata, target?: RpcOpenTarget): OpenedRpcSession;
}

// A header value must stay on one line of visible ASCII; connection info is JSON of that shape.
const SAFE_HEADER_TEXT = /^[\x20-\x7e]{1,1024}$/;

/**
 * A positive integer budget as sent on the wire, or `undefined` when there is none to send.
 * Clamped here, as the receiver would: past 1e21 `String` writes exponent notation, which no
 * receiver reads as a budget.
 */
function wireBudget(timeoutMs: number | undefined): string | undefined {
  if (timeoutMs === undefined || !Number.isFinite(timeoutMs) || timeoutMs <= 0) return undefined;
  return String(Math.min(MAX_SVC_TIMEOUT_MS, Math.max(1, Math.floor(timeoutMs))));
}

/** The metadata items that survive filtering, paired with their header and query names. */
function metadataEntries(
  meta: OutboundRpcMetadata,
): [header: string, query: string, value: string][] {
  const entries: [string, string, string][] = [];
  const requestId = acceptRequestId(meta.requestId);
  if (requestId !== undefined) {
    entries.push([SVC_REQUEST_ID_HEADER, SVC_REQUEST_ID_QUERY_PARAM, requestId]);
  }
  const budget = wireBudget(meta.timeoutMs);
  if (budget !== undefined) entries.push([SVC_TIMEOUT_HEADER, SVC_TIMEOUT_QUERY_PARAM, budget]);
  const idempotencyKey = filterIdempotencyKey(meta.idempotencyKey);
  if (idempotencyKey !== undefined) {
    entries.push([SVC_IDEMPOTENCY_KEY_HEADER, SVC_IDEMPOTENCY_KEY_QUERY_PARAM, idempotencyKey]);
  }
  if (typeof meta.connInfo === 'string' && SAFE_HEADER_TEXT.test(meta.connInfo)) {
    entries.push([SVC_CONN_INFO_HEADER, SVC_CONN_INFO_QUERY_PARAM, meta.connInfo]);
  }
  return entries;
}

/** Writes propagated metadata as the HTTP-batch / service-binding headers. */
export function applyMetadataHeaders(headers: Headers, meta: OutboundRpcMetadata): Headers {
  for (const [header, , value] of metadataEntries(meta)) headers.set(header, value);
  return headers;
}

/**
 * The headers of {@link applyMetadataHeaders} added to a copy of `base`, as a plain record:
 * a request built from a record skips building a `Headers` object first. With no metadata to
 * send, `base` itself (which a request only reads).
 */
export function withMetadataHeaders(
  base: Readonly<Record<string, string>>,
  meta: OutboundRpcMetadata,
): Readonly<Record<string, string>> {
  const entries = metadataEntries(meta);
  if (entries.length === 0) return base;
  const headers = { ...base };
  for (const [header, , value] of entries) headers[header] = value;
  return headers;
}

/** Returns `url` with propagated metadata written as the WebSocket query parameters. */
export function withMetadataQuery(url: URL, meta: OutboundRpcMetadata): URL {
  const final = new URL(url);
  for (const [, query, value] of metadataEntries(meta)) final.searchParams.set(query, value);
  return final;
}
