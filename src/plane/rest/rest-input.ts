/**
 * The input of one REST call (REST r1, r2): query fallbacks, then the JSON body, then the path
 * variables, the later winning. The service validates the combined value; what is refused here
 * is only what cannot be read as an input object at all.
 *
 * | condition | answer |
 * |---|---|
 * | body past `maxBodyBytes` (declared or counted) | 413 `body_too_large` |
 * | a body whose `Content-Type` is not JSON | 415 `unsupported_media_type` |
 * | a body that is not JSON, not UTF-8, not an object, or nested past {@link MAX_REST_BODY_DEPTH} | 400 `invalid_json_body` |
 * | a body that breaks off mid-stream | 400 `body_unreadable` |
 *
 * @module
 */
import { readBoundedBytes } from '../../core/bounded-body.ts';
import type { SvcErrorCode } from '../../core/errors.ts';
import type { RestMatch } from './rest-routes.ts';

/** Default limit of a REST request body: 1 MiB. */
export const DEFAULT_REST_MAX_BODY_BYTES = 1024 * 1024;

/**
 * Deepest nesting of arrays and objects a REST body may have. Far beyond any sensible input,
 * well inside what the RPC layer accepts (Cap'n Web refuses a value nested past 256 levels).
 */
export const MAX_REST_BODY_DEPTH = 128;

/** A refusal of the request itself, before anything is authorized or invoked. */
export class RestRequestRefusal extends Error {
  constructor(
    readonly status: 400 | 413 | 415,
    readonly reason: string,
    message: string,
    readonly code: SvcErrorCode = 'internal',
  ) {
    super(message);
    this.name = 'RestRequestRefusal';
  }
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** `application/json` or any `+json` media type, parameters ignored. */
function isJsonMediaType(contentType: string | null): boolean {
  if (contentType === null) return false;
  if (contentType === 'application/json') return true;
  const essence = contentType.split(';', 1)[0].trim().toLowerCase();
  return essence === 'application/json' || /^application\/[a-z0-9.!#$&^_-]+\+json$/.test(essence);
}

/** Whether a parsed value nests deeper than `limit` (checked without recursion). */
function nestedDeeperThan(value: unknown, limit: number): boolean {
  const pending: [unknown, number][] = [[value, 1]];
  while (pending.length > 0) {
    const [current, depth] = pending.pop()!;
    if (current === null || typeof current !== 'object') continue;
    if (depth > limit) return true;
    for (const child of Object.values(current)) {
      if (child !== null && typeof child === 'object') pending.push([child, depth + 1]);
    }
  }
  return false;
}

function invalidBody(message: string): RestRequestRefusal {
  return new RestRequestRefusal(400, 'invalid_json_body', message);
}

/**
 * Reads the JSON object a request body carries: `undefined` when there is no body (none sent,
 * or zero bytes). Refusals are thrown as {@link RestRequestRefusal}.
 */
export async function readJsonBody(
  request: Request,
  maxBodyBytes: number,
): Promise<Record<string, unknown> | undefined> {
  if (request.body === null) return undefined;
  // Checked before reading: a body nobody may send is refused unread.
  const declared = request.headers.get('content-length');
  const contentType = request.headers.get('content-type');
  if (declared !== '0' && contentType !== null && !isJsonMediaType(contentType)) {
    request.body.cancel().catch(() => {});
    throw new RestRequestRefusal(
      415,
      'unsupported_media_type',
      'The body must be application/json',
    );
  }
  let bytes: Uint8Array | undefined;
  try {
    bytes = await readBoundedBytes(request, maxBodyBytes);
  } catch {
    throw new RestRequestRefusal(400, 'body_unreadable', 'The body could not be read to its end');
  }
  if (bytes === undefined) {
    throw new RestRequestRefusal(413, 'body_too_large', `The body exceeds ${maxBodyBytes} bytes`);
  }
  if (bytes.byteLength === 0) return undefined;
  if (contentType === null) {
    throw new RestRequestRefusal(
      415,
      'unsupported_media_type',
      'A body must be sent as application/json',
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(strictUtf8.decode(bytes));
  } catch {
    throw invalidBody('The body is not valid JSON');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw invalidBody('The body must be a JSON object');
  }
  // Nesting past the limit takes more opening brackets than a shorter body holds.
  if (bytes.byteLength > MAX_REST_BODY_DEPTH && nestedDeeperThan(value, MAX_REST_BODY_DEPTH)) {
    throw invalidBody(`The body nests deeper than ${MAX_REST_BODY_DEPTH} levels`);
  }
  return value as Record<string, unknown>;
}

/** Sets an own data property, whatever its name (`__proto__` included), never a setter. */
function setField(target: Record<string, unknown>, name: string, value: unknown): void {
  Object.defineProperty(target, name, {
    value,
    enumerable: true,
    writable: true,
    configurable: true,
  });
}

/**
 * Assembles the input: query fallbacks (top-level string fields take the first value,
 * string-array fields every value; nothing else is read from the query), then the body's
 * members, then the path variables. `search` is the raw query (`?...`, or empty).
 */
export function assembleInput(
  match: RestMatch,
  search: string,
  body: Record<string, unknown> | undefined,
): Record<string, unknown> {
  const params = Object.entries(match.params);
  const fallbacks = search.length > 1 ? match.route.queryFallbacks : undefined;
  // The body is an object this request parsed, held by no one else: with nothing to merge
  // into it, it is the input as it is.
  if (
    body !== undefined && params.length === 0 && (fallbacks === undefined || fallbacks.size === 0)
  ) {
    return body;
  }
  const input: Record<string, unknown> = {};
  if (fallbacks !== undefined && fallbacks.size > 0) {
    const query = new URLSearchParams(search);
    for (const [name, fallback] of fallbacks) {
      const values = query.getAll(name);
      if (values.length === 0) continue;
      setField(input, name, fallback === 'string' ? values[0] : values);
    }
  }
  if (body !== undefined) {
    for (const name of Object.keys(body)) setField(input, name, body[name]);
  }
  for (const [name, value] of params) setField(input, name, value);
  return input;
}
