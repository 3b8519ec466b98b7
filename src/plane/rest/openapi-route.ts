/**
 * `GET /openapi.json`: the OpenAPI 3.2 document of the REST facade, generated from the catalog
 * read for the `openapi` purpose (its own discovery cache) and kept as its exact bytes under
 * `openapi.cache` for `openapi.cacheTtlSeconds`, so every caller and every replica sharing the
 * cache gets the same bytes. No invocation middleware runs here: the document describes the
 * catalog, which is the same for every caller.
 *
 * Targets whose discovery fails are left out of the document, and a document missing one is
 * not cached (a failure is never cached); a catalog that cannot be built at all fails closed
 * with the catalog's 500 problem.
 *
 * @module
 */
import type { Hono } from 'hono';
import { httpCacheHeaders, type ResolvedHttpCache } from '../../core/http-cache.ts';
import { describeErrorForLog, type SvcEventLog } from '../../core/logging.ts';
import { withLazyDeadline } from '../../core/settle-within.ts';
import type { Catalog } from '../catalog.ts';
import type { ResolvedOpenApiOptions } from '../openapi-options.ts';
import { contextRequestId } from '../../service/problem-json-app.ts';
import { generateOpenApiDocument } from './openapi.ts';

/** Where the plane serves its OpenAPI document. */
export const OPENAPI_PATH = '/openapi.json';

/** The registry cache key of the generated document. */
export const OPENAPI_CACHE_KEY = 'svc:openapi:v1';

/** The built-in `Cache-Tag` of the document. */
export const OPENAPI_CACHE_TAG = 'svc:openapi';

/** Bound on one read of a shared document cache: a hung cache costs a generation, not the request. */
const CACHE_READ_TIMEOUT_MS = 5000;

/** What {@link mountOpenApi} needs from the plane. */
export interface OpenApiMountDependencies {
  /** The plane's catalog, read with the `openapi` purpose. */
  catalog: Catalog;
  /** The validated `openapi` option. */
  options: ResolvedOpenApiOptions;
  /** The plane's public origins (`servers`). */
  publicOrigins: readonly string[];
  /** Paths the plane serves itself: REST routes there are left out. */
  planePaths: readonly string[];
  /** The plane's `httpCache` option. */
  httpCache?: ResolvedHttpCache;
  /** The plane's event log. */
  log: SvcEventLog;
}

function isDocumentText(value: unknown): value is string {
  return typeof value === 'string' && value.startsWith('{');
}

/**
 * Mounts `GET /openapi.json` on the plane's app (register it before the REST facade's routes).
 * The response is `application/json` with the `httpCache` headers and the `svc:openapi` tag.
 */
export function mountOpenApi(app: Hono, deps: OpenApiMountDependencies): void {
  const { catalog, options, log } = deps;
  const cacheHeaders = httpCacheHeaders(deps.httpCache, [OPENAPI_CACHE_TAG]);

  const cacheFailed = (operation: string, error: unknown, context: unknown, requestId: string) =>
    log({
      event: 'svc.openapi.cache_failed',
      level: 'warn',
      requestId,
      operation,
      error: describeErrorForLog(error),
    }, context);

  const readCached = async (context: unknown, requestId: string): Promise<string | undefined> => {
    const cache = options.cache;
    if (cache === undefined) return undefined;
    try {
      const value = await withLazyDeadline(
        () => cache.get(OPENAPI_CACHE_KEY),
        CACHE_READ_TIMEOUT_MS,
        () => new Error(`OpenAPI cache read did not settle within ${CACHE_READ_TIMEOUT_MS} ms`),
      );
      return isDocumentText(value) ? value : undefined;
    } catch (error) {
      cacheFailed('get', error, context, requestId);
      return undefined;
    }
  };

  const generate = async (context: unknown, requestId: string): Promise<string> => {
    const { targets, failures } = await catalog.all(context, 'openapi', { requestId });
    const { document } = generateOpenApiDocument(
      targets.map((target) => target.document),
      {
        title: options.title,
        ...(options.version !== undefined ? { version: options.version } : {}),
        servers: deps.publicOrigins,
        ...(options.security !== undefined ? { security: options.security } : {}),
        ...(options.securitySchemes !== undefined
          ? { securitySchemes: options.securitySchemes }
          : {}),
        planePaths: deps.planePaths,
      },
    );
    const text = JSON.stringify(document);
    const cache = options.cache;
    if (cache !== undefined && failures.length === 0) {
      // Not awaited: a slow shared cache must not hold up the document it is caching.
      Promise.resolve()
        .then(() => cache.set(OPENAPI_CACHE_KEY, text, options.cacheTtlSeconds))
        .catch((error) => cacheFailed('set', error, context, requestId));
    }
    return text;
  };

  app.get(OPENAPI_PATH, async (c) => {
    const requestId = contextRequestId(c) ?? '';
    const text = await readCached(c, requestId) ?? await generate(c, requestId);
    return new Response(text, {
      headers: { 'Content-Type': 'application/json', ...cacheHeaders },
    });
  });
}
