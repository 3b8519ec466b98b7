/**
 * The error a token requester rejects with when the control plane refuses or cannot answer a
 * capability token request.
 *
 * @module
 */
import type { SvcErrorCode, SvcErrorInfo } from '../core/errors.ts';

/**
 * A capability token request failed: the plane refused it (a grant missing: 403, caller
 * authentication: 401), could not be reached (503, retryable), or answered something unusable.
 * Carries the taxonomy fields as own enumerable properties, as every svcplane error does, so
 * `svcErrorInfo(error)` reads it wherever it travelled; `instanceof` works in the process that
 * made the request. `requestId` is the plane's request id, when the plane answered with one.
 */
export class CapabilityTokenRequestError extends Error {
  /** Taxonomy classification. */
  declare code: SvcErrorCode;
  /** The classification status (401, 403, 503...). */
  declare status: number;
  /** Whether the failure is transient. */
  declare retryable: boolean;
  /** The plane's machine-readable reason, when it gave one. */
  declare reason?: string;
  /** The request id of the token request, when known. */
  declare requestId?: string;

  constructor(
    message: string,
    info: SvcErrorInfo,
    options: { requestId?: string; cause?: unknown } = {},
  ) {
    super(message, options.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = 'CapabilityTokenRequestError';
    this.code = info.code;
    this.status = info.status;
    this.retryable = info.retryable;
    if (info.reason !== undefined) this.reason = info.reason;
    if (options.requestId !== undefined) this.requestId = options.requestId;
  }
}
