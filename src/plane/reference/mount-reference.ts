/**
 * The API reference page: `GET <path>` (HTML), `<path>/init.js` (starts Swagger UI on the
 * plane's OpenAPI document) and Swagger UI's two files below it, every answer under a strict
 * Content-Security-Policy and `nosniff`. Only GET and HEAD; any other path below the page is
 * the plane's 404.
 *
 * The page and its script name the plane's own paths, so they are revalidated on every load;
 * Swagger UI's files are cached for an hour and revalidated by their `ETag` (their SHA-256).
 *
 * @module
 */
import type { Context, Hono } from 'hono';
import { SvcConfigurationError } from '../../core/errors.ts';
import { problemResponse } from '../../core/problem.ts';
import { contextRequestId } from '../../service/problem-json-app.ts';
import {
  checkReferenceAssetFiles,
  REFERENCE_ASSET_NAMES,
  type ReferenceAssetBody,
  type ReferenceAssetFiles,
  type ResolvedReferenceOption,
} from './reference-option.ts';
import {
  REFERENCE_INIT_SCRIPT,
  referenceContentSecurityPolicy,
  referenceInitScript,
  referencePageHtml,
} from './reference-page.ts';

/** What {@link mountReference} needs from the plane. */
export interface ReferenceMountDependencies {
  /** The validated `openapi.reference` option. */
  reference: ResolvedReferenceOption;
  /** Where the plane serves its OpenAPI document. */
  openApiPath: string;
  /** The document's title, shown as the page's. */
  title: string;
  /** The plane's public origins: "Try it out" may call them. */
  publicOrigins: readonly string[];
  /** The plane's other routes: the page's paths may not shadow one. */
  reservedPaths: readonly string[];
}

/** One file as served: its bytes, media type and caching. */
interface ServedFile {
  body: Uint8Array<ArrayBuffer>;
  contentType: string;
  cacheControl: string;
  etag?: string;
}

const ALLOWED_METHODS = 'GET, HEAD';

/** The page and its start script name the plane's paths: always revalidated. */
const PAGE_CACHE_CONTROL = 'no-cache';
/** Swagger UI's files change only with the plane's deployment: an hour, then by `ETag`. */
const ASSET_CACHE_CONTROL = 'public, max-age=3600';

const ASSET_CONTENT_TYPES: Readonly<Record<keyof ReferenceAssetFiles, string>> = {
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui.css': 'text/css; charset=utf-8',
};

/** Every path the page serves for a page at `path`: the page, its script, Swagger UI's files. */
export function referenceRoutePaths(path: string): string[] {
  return [
    path,
    ...[REFERENCE_INIT_SCRIPT, ...REFERENCE_ASSET_NAMES].map((name) => `${path}/${name}`),
  ];
}

/** The file's bytes, copied: a caller's later change to its array cannot reach the page. */
function bytesOf(body: ReferenceAssetBody): Uint8Array<ArrayBuffer> {
  return typeof body === 'string' ? new TextEncoder().encode(body) : new Uint8Array(body);
}

async function entityTag(body: Uint8Array<ArrayBuffer>): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', body));
  const hex = Array.from(digest.subarray(0, 16), (byte) => byte.toString(16).padStart(2, '0'));
  return `"${hex.join('')}"`;
}

/** The served form of Swagger UI's files, read once; a failed read is tried again next time. */
function assetLoader(
  source: ResolvedReferenceOption['assets'],
): () => Promise<Map<string, ServedFile>> {
  let loaded: Promise<Map<string, ServedFile>> | undefined;
  const load = async () => {
    const files = checkReferenceAssetFiles(typeof source === 'function' ? await source() : source);
    const served = new Map<string, ServedFile>();
    for (const name of REFERENCE_ASSET_NAMES) {
      const body = bytesOf(files[name]);
      served.set(name, {
        body,
        contentType: ASSET_CONTENT_TYPES[name],
        cacheControl: ASSET_CACHE_CONTROL,
        etag: await entityTag(body),
      });
    }
    return served;
  };
  return () => {
    loaded ??= load().catch((error) => {
      loaded = undefined;
      throw error;
    });
    return loaded;
  };
}

/** `If-None-Match` names this entity tag (or any). */
function notModified(request: Request, etag: string | undefined): boolean {
  const condition = request.headers.get('If-None-Match');
  if (etag === undefined || condition === null) return false;
  return condition.split(',').some((tag) => {
    const trimmed = tag.trim();
    return trimmed === '*' || trimmed === etag || trimmed === `W/${etag}`;
  });
}

function checkPaths(paths: readonly string[], reserved: readonly string[]): void {
  const taken = paths.find((path) => reserved.includes(path));
  if (taken !== undefined) {
    throw new SvcConfigurationError(
      `createControlPlane: \`openapi.reference.path\` would serve ${taken}, a route of the plane itself`,
      { reason: 'invalid_openapi' },
    );
  }
}

/**
 * Mounts the reference page and its files on the plane's app (before the REST facade, whose
 * reserved paths must include {@link referenceRoutePaths}). Throws `SvcConfigurationError` when
 * one of its paths is a route of the plane.
 */
export function mountReference(app: Hono, deps: ReferenceMountDependencies): void {
  const { path } = deps.reference;
  checkPaths(referenceRoutePaths(path), deps.reservedPaths);
  const securityHeaders = {
    'Content-Security-Policy': referenceContentSecurityPolicy(deps.publicOrigins),
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
  };
  const encoder = new TextEncoder();
  const ownFile = (text: string, contentType: string): ServedFile => ({
    body: encoder.encode(text),
    contentType,
    cacheControl: PAGE_CACHE_CONTROL,
  });
  const page = ownFile(referencePageHtml(path, deps.title), 'text/html; charset=utf-8');
  const init = ownFile(
    referenceInitScript(path, deps.openApiPath),
    'text/javascript; charset=utf-8',
  );
  const assets = assetLoader(deps.reference.assets);

  const serve = (c: Context, file: ServedFile): Response => {
    const headers: Record<string, string> = {
      'Content-Type': file.contentType,
      'Cache-Control': file.cacheControl,
      ...securityHeaders,
      ...(file.etag !== undefined ? { ETag: file.etag } : {}),
    };
    if (notModified(c.req.raw, file.etag)) return new Response(null, { status: 304, headers });
    return new Response(c.req.method === 'HEAD' ? null : file.body, { headers });
  };

  const route = (routePath: string, file: (c: Context) => ServedFile | Promise<ServedFile>) =>
    app.all(routePath, async (c) => {
      if (c.req.method !== 'GET' && c.req.method !== 'HEAD') {
        c.req.raw.body?.cancel().catch(() => {});
        return problemResponse({
          status: 405,
          code: 'internal',
          detail: `${c.req.method} is not served at this path`,
          reason: 'method_not_allowed',
          retryable: false,
          requestId: contextRequestId(c),
          headers: { Allow: ALLOWED_METHODS },
        });
      }
      return serve(c, await file(c));
    });

  route(path, () => page);
  route(`${path}/${REFERENCE_INIT_SCRIPT}`, () => init);
  for (const name of REFERENCE_ASSET_NAMES) {
    route(`${path}/${name}`, async () => (await assets()).get(name)!);
  }
}
