/**
 * RFC 9457 problem details: the body of every HTTP error response of the plane and services
 * (`application/problem+json` with `type, title, status, detail` plus `code, retryable,
 * reason?, requestId?, issues?`).
 *
 * A problem body is what a stranger sees, so an error without the taxonomy shape never lends
 * its message, stack or any property to it.
 *
 * @module
 */
import {
  hasSvcErrorShape,
  isRetryableStatusByDefault,
  SvcConfigurationError,
  type SvcErrorCode,
  svcErrorInfo,
  type ValidationIssue,
} from './errors.ts';
import { MAX_VALIDATION_ISSUES, readValidationIssues } from './validation-issues.ts';

/** Media type of a problem details body. */
export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** Prefix of the `type` URI; the taxonomy code follows it. */
export const PROBLEM_TYPE_PREFIX = 'urn:svcplane:problem:';

/** Detail of a problem built from an error that does not carry the taxonomy. */
export const OPAQUE_PROBLEM_DETAIL = 'Internal error';

/** Longest `detail` taken from an error message. */
export const MAX_PROBLEM_DETAIL_LENGTH = 2048;

/** Most validation issues listed in one body (the bound every reading of issues keeps). */
export const MAX_PROBLEM_ISSUES = MAX_VALIDATION_ISSUES;

/** The JSON body of a problem response. */
export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: SvcErrorCode;
  retryable: boolean;
  reason?: string;
  requestId?: string;
  issues?: ValidationIssue[];
}

/** What {@link problemResponse} needs to build a body. */
export interface ProblemInit {
  /** HTTP status, 400 to 599; anything else becomes 500. */
  status: number;
  /** Taxonomy code. */
  code: SvcErrorCode;
  /** Human-readable explanation specific to this occurrence. */
  detail: string;
  /** Defaults by status (true for 408, 429, 502, 503, 504). */
  retryable?: boolean;
  /** Machine-readable discriminator of the failed check. */
  reason?: string;
  /** The request id, echoed so a caller can quote it. */
  requestId?: string;
  /** Validation issues (`{ message, path? }`). */
  issues?: ValidationIssue[];
  /** Overrides the fixed phrase for the status. */
  title?: string;
  /** Extra headers (a 401's `WWW-Authenticate`, cache headers); `Content-Type` is always ours. */
  headers?: HeadersInit;
}

const STATUS_TITLES: Readonly<Record<number, string>> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  406: 'Not Acceptable',
  408: 'Request Timeout',
  409: 'Conflict',
  410: 'Gone',
  411: 'Length Required',
  412: 'Precondition Failed',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Content',
  428: 'Precondition Required',
  429: 'Too Many Requests',
  431: 'Request Header Fields Too Large',
  500: 'Internal Server Error',
  501: 'Not Implemented',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

/** The fixed title of a status: its reason phrase, or a generic client/server error phrase. */
export function problemTitle(status: number): string {
  return STATUS_TITLES[status] ?? (status < 500 ? 'Client Error' : 'Server Error');
}

function problemStatus(status: unknown): number {
  return typeof status === 'number' && Number.isInteger(status) && status >= 400 && status <= 599
    ? status
    : 500;
}

function bounded(text: string): string {
  return text.length > MAX_PROBLEM_DETAIL_LENGTH
    ? `${text.slice(0, MAX_PROBLEM_DETAIL_LENGTH)}…`
    : text;
}

/** Builds the JSON body of a problem response (exported for surfaces that frame it themselves). */
export function problemBody(init: Omit<ProblemInit, 'headers'>): ProblemBody {
  const status = problemStatus(init.status);
  const body: ProblemBody = {
    type: `${PROBLEM_TYPE_PREFIX}${init.code}`,
    title: init.title ?? problemTitle(status),
    status,
    detail: init.detail,
    code: init.code,
    retryable: init.retryable ?? isRetryableStatusByDefault(status),
  };
  if (init.reason !== undefined) body.reason = init.reason;
  if (init.requestId !== undefined) body.requestId = init.requestId;
  const issues = readValidationIssues(init.issues);
  if (issues !== undefined) body.issues = issues;
  return body;
}

/** An RFC 9457 `application/problem+json` response. */
export function problemResponse(init: ProblemInit): Response {
  const body = problemBody(init);
  const headers = new Headers(init.headers);
  headers.set('Content-Type', PROBLEM_CONTENT_TYPE);
  return new Response(JSON.stringify(body), { status: body.status, headers });
}

function taxonomyMessage(error: unknown): string | undefined {
  try {
    const message = (error as { message?: unknown }).message;
    return typeof message === 'string' ? bounded(message) : undefined;
  } catch {
    return undefined;
  }
}

function ownIssues(error: unknown): unknown {
  try {
    return (error as { issues?: unknown }).issues;
  } catch {
    return undefined;
  }
}

/**
 * The problem response for a thrown value, classified with `svcErrorInfo`. A taxonomy error
 * (local or received) keeps its message as `detail`; any other value becomes an opaque 500 whose
 * body carries nothing of the original. Input validation failures (422) list their issues;
 * output failures (500) do not, because their issues may echo server-side data.
 */
export function problemFromError(
  error: unknown,
  requestId?: string,
  headers?: HeadersInit,
): Response {
  const info = svcErrorInfo(error);
  const shaped = hasSvcErrorShape(error);
  // A configuration error speaks to the operator (it can quote configuration, secrets included
  // when values are misplaced): the log has it, the caller gets the opaque detail.
  const detail =
    (shaped && !(error instanceof SvcConfigurationError) ? taxonomyMessage(error) : undefined) ??
      OPAQUE_PROBLEM_DETAIL;
  const init: ProblemInit = {
    status: info.status,
    code: info.code,
    detail,
    retryable: info.retryable,
  };
  if (shaped && info.reason !== undefined) init.reason = info.reason;
  if (requestId !== undefined) init.requestId = requestId;
  if (headers !== undefined) init.headers = headers;
  if (shaped && info.code === 'ability_validation' && info.status === 422) {
    const issues = readValidationIssues(ownIssues(error));
    if (issues !== undefined) init.issues = issues;
  }
  return problemResponse(init);
}
