/**
 * Reads the request metadata a caller propagates: over HTTP-batch in headers, over WebSocket in
 * query parameters (browsers cannot set headers on a WebSocket upgrade).
 *
 * @module
 */
import {
  type ConnInfo,
  parseConnInfo,
  SVC_CONN_INFO_HEADER,
  SVC_CONN_INFO_QUERY_PARAM,
} from '../core/conn-info.ts';
import {
  parseTimeoutBudget,
  SVC_TIMEOUT_HEADER,
  SVC_TIMEOUT_QUERY_PARAM,
} from '../core/deadline.ts';
import {
  filterIdempotencyKey,
  SVC_IDEMPOTENCY_KEY_HEADER,
  SVC_IDEMPOTENCY_KEY_QUERY_PARAM,
} from '../core/idempotency.ts';

/** The transport a request arrived on, as far as metadata channels are concerned. */
export type InboundChannel = 'header' | 'query';

/** What the caller propagated, already filtered; anything invalid is absent. */
export interface InboundRpcMetadata {
  budgetMs?: number;
  idempotencyKey?: string;
  /** Sanitised, but only usable when the service has ingress and the token is brokered. */
  connInfo?: ConnInfo;
}

/** Reads and filters propagated metadata from one channel of a request. */
export function readInboundMetadata(request: Request, channel: InboundChannel): InboundRpcMetadata {
  const read = channel === 'header'
    ? (header: string, _query: string) => request.headers.get(header)
    : (_header: string, query: string) => new URL(request.url).searchParams.get(query);
  const metadata: InboundRpcMetadata = {};
  const budgetMs = parseTimeoutBudget(read(SVC_TIMEOUT_HEADER, SVC_TIMEOUT_QUERY_PARAM));
  if (budgetMs !== undefined) metadata.budgetMs = budgetMs;
  const idempotencyKey = filterIdempotencyKey(
    read(SVC_IDEMPOTENCY_KEY_HEADER, SVC_IDEMPOTENCY_KEY_QUERY_PARAM),
  );
  if (idempotencyKey !== undefined) metadata.idempotencyKey = idempotencyKey;
  const connInfo = parseConnInfo(read(SVC_CONN_INFO_HEADER, SVC_CONN_INFO_QUERY_PARAM));
  if (connInfo !== undefined) metadata.connInfo = connInfo;
  return metadata;
}
