/**
 * HTTP cache headers for the cacheable documents (service discovery, JWKS, OpenAPI) and the
 * no-store pair for responses that must never be cached (the token endpoint).
 *
 * The JWKS cache lifetimes add up to the signing-key rotation overlap window, so the option is
 * validated strictly at construction: a typo must refuse, not silently keep the defaults.
 *
 * @module
 */
import { isPlainObject, refuseUnknownKeys } from './config-values.ts';
import { SvcConfigurationError } from './errors.ts';

/** `max-age` of a cacheable document when `httpCache` is enabled without a value. */
export const DEFAULT_HTTP_CACHE_MAX_AGE_SECONDS = 60;

/** `stale-while-revalidate` when `httpCache` is enabled without a value. */
export const DEFAULT_STALE_WHILE_REVALIDATE_SECONDS = 300;

/** Largest delta-seconds value a cache is required to understand (RFC 9111 section 1.2.2). */
export const MAX_HTTP_CACHE_SECONDS = 2_147_483_648;

/** Longest user cache tag. */
export const MAX_CACHE_TAG_LENGTH = 128;

/** The `httpCache` option: `true` for the defaults, or explicit values. */
export type HttpCacheOption = boolean | {
  /** `max-age` in seconds. Default `DEFAULT_HTTP_CACHE_MAX_AGE_SECONDS` (60). */
  maxAgeSeconds?: number;
  /**
   * `stale-while-revalidate` in seconds; `0` omits it. Default
   * `DEFAULT_STALE_WHILE_REVALIDATE_SECONDS` (300).
   */
  staleWhileRevalidateSeconds?: number;
  /** Extra `Cache-Tag` values, emitted after the built-in ones. Default none. */
  tags?: readonly string[];
};

/** A validated `httpCache` option with defaults applied. */
export interface ResolvedHttpCache {
  /** `max-age` in seconds. */
  readonly maxAgeSeconds: number;
  /** `stale-while-revalidate` in seconds; `0` omits the directive. */
  readonly staleWhileRevalidateSeconds: number;
  /** User tags, emitted after the built-in ones. */
  readonly tags: readonly string[];
}

/** Headers of a response that must never be stored by any cache. */
export const NO_STORE_HEADERS: Readonly<{ 'Cache-Control': string; Pragma: string }> = Object
  .freeze({ 'Cache-Control': 'no-store', Pragma: 'no-cache' });

const KNOWN_FIELDS: readonly string[] = ['maxAgeSeconds', 'staleWhileRevalidateSeconds', 'tags'];

// A tag is one comma-separated item of `Cache-Tag`, and a header value holds bytes, not text:
// visible ASCII only, without the list separator, quotes or parameter delimiters.
const TAG_PATTERN = /^[\x21\x23-\x2b\x2d-\x3a\x3c-\x7e]+$/;

function refuse(label: string, problem: string): never {
  throw new SvcConfigurationError(`${label}: httpCache ${problem}`, {
    reason: 'invalid_http_cache',
  });
}

function seconds(value: unknown, fallback: number, label: string, field: string): number {
  if (value === undefined) return fallback;
  if (
    typeof value !== 'number' || !Number.isInteger(value) || value < 0 ||
    value > MAX_HTTP_CACHE_SECONDS
  ) {
    refuse(label, `.${field} must be a non-negative integer number of seconds`);
  }
  return value;
}

function tagProblem(tag: unknown): string | undefined {
  if (typeof tag !== 'string') return 'is not a string';
  if (tag.length === 0) return 'is empty';
  if (tag.length > MAX_CACHE_TAG_LENGTH) return `is longer than ${MAX_CACHE_TAG_LENGTH} characters`;
  if (!TAG_PATTERN.test(tag)) {
    return 'must be visible ASCII without a comma, quote or semicolon';
  }
  return undefined;
}

function tags(value: unknown, label: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) refuse(label, '.tags must be an array of strings');
  const unique: string[] = [];
  value.forEach((tag, index) => {
    const problem = tagProblem(tag);
    if (problem !== undefined) refuse(label, `.tags[${index}] ${problem}`);
    if (!unique.includes(tag)) unique.push(tag);
  });
  return unique;
}

/**
 * Validates an `httpCache` option at construction. `undefined` or `false` disables caching
 * (`undefined` result); `true` applies the defaults; an object may set `maxAgeSeconds` and
 * `staleWhileRevalidateSeconds` (non-negative integers) and `tags` (non-empty strings of at most
 * 128 characters without comma, whitespace or control characters). Unknown fields and any other
 * value throw `SvcConfigurationError` naming `label`.
 */
export function resolveHttpCache(option: unknown, label: string): ResolvedHttpCache | undefined {
  if (option === undefined || option === false) return undefined;
  if (option === true) {
    return Object.freeze({
      maxAgeSeconds: DEFAULT_HTTP_CACHE_MAX_AGE_SECONDS,
      staleWhileRevalidateSeconds: DEFAULT_STALE_WHILE_REVALIDATE_SECONDS,
      tags: Object.freeze([]),
    });
  }
  if (!isPlainObject(option)) {
    refuse(label, 'must be true, false or { maxAgeSeconds?, staleWhileRevalidateSeconds?, tags? }');
  }
  refuseUnknownKeys(option, KNOWN_FIELDS, label, { reason: 'invalid_http_cache' });
  return Object.freeze({
    maxAgeSeconds: seconds(
      option.maxAgeSeconds,
      DEFAULT_HTTP_CACHE_MAX_AGE_SECONDS,
      label,
      'maxAgeSeconds',
    ),
    staleWhileRevalidateSeconds: seconds(
      option.staleWhileRevalidateSeconds,
      DEFAULT_STALE_WHILE_REVALIDATE_SECONDS,
      label,
      'staleWhileRevalidateSeconds',
    ),
    tags: Object.freeze(tags(option.tags, label)),
  });
}

/**
 * The cache headers of a cacheable document: `Cache-Control: public, max-age=N` (plus
 * `stale-while-revalidate=M` unless it is 0) and `Cache-Tag` listing the built-in tags, then the
 * user tags, without duplicates. Returns `{}` when caching is not enabled.
 */
export function httpCacheHeaders(
  resolved: ResolvedHttpCache | undefined,
  builtInTags: readonly string[],
): Record<string, string> {
  if (resolved === undefined) return {};
  let cacheControl = `public, max-age=${resolved.maxAgeSeconds}`;
  if (resolved.staleWhileRevalidateSeconds > 0) {
    cacheControl += `, stale-while-revalidate=${resolved.staleWhileRevalidateSeconds}`;
  }
  const headers: Record<string, string> = { 'Cache-Control': cacheControl };
  const allTags = [...new Set([...builtInTags, ...resolved.tags])];
  if (allTags.length > 0) headers['Cache-Tag'] = allTags.join(',');
  return headers;
}
