/**
 * The `openapi.reference` option: an offline API reference page (Swagger UI) over the plane's
 * OpenAPI document. Swagger UI's two files come from the caller, because reading a package's
 * files is runtime-specific: `swaggerUiAssets()` from `svcplane/node` (also on Deno and Bun), or
 * the files imported as text on Workers. Validated at construction.
 *
 * @module
 */
import { describeConfigValue, isPlainObject, refuseUnknownKeys } from '../../core/config-values.ts';
import { SvcConfigurationError } from '../../core/errors.ts';

/** The contents of one Swagger UI file: text, or its UTF-8 bytes. */
export type ReferenceAssetBody = string | Uint8Array;

/** The two files of `swagger-ui-dist` the page loads. */
export interface ReferenceAssetFiles {
  /** `swagger-ui-dist/swagger-ui-bundle.js`. */
  'swagger-ui-bundle.js': ReferenceAssetBody;
  /** `swagger-ui-dist/swagger-ui.css`. */
  'swagger-ui.css': ReferenceAssetBody;
}

/**
 * Where the page's Swagger UI files come from: the files themselves, or a function reading them,
 * called when an asset is first requested (a failure is retried on the next request).
 */
export type ReferenceAssets = ReferenceAssetFiles | (() => Promise<ReferenceAssetFiles>);

/** The `reference` member of the plane's `openapi` option. */
export interface ReferenceOption {
  /** Swagger UI's files (`swaggerUiAssets()` from `svcplane/node`, or text imports). */
  assets: ReferenceAssets;
  /** Where the page is served; its files are served below it. Default `/reference`. */
  path?: string;
}

/** The `reference` option after validation. */
export interface ResolvedReferenceOption {
  path: string;
  assets: ReferenceAssets;
}

/** Where the page is served when `path` is not given. */
export const DEFAULT_REFERENCE_PATH = '/reference';

/** The names of the Swagger UI files the page loads. */
export const REFERENCE_ASSET_NAMES: readonly (keyof ReferenceAssetFiles)[] = [
  'swagger-ui-bundle.js',
  'swagger-ui.css',
];

/** Literal segments only, no trailing `/`: the page's own files are resolved relative to it. */
const REFERENCE_PATH = /^(?:\/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)+$/;

const LABEL = 'createControlPlane: `openapi.reference';

/** What to write instead of `reference: true`, or an asset source of the wrong shape. */
const HOW_TO_GIVE_ASSETS = "must name where Swagger UI's files come from: on Node, Deno and " +
  'Bun write `reference: { assets: swaggerUiAssets() }`, importing swaggerUiAssets from the ' +
  '`svcplane/node` entry (or `svcplane/deno`, `svcplane/bun`); on Workers import ' +
  '`swagger-ui-dist/swagger-ui-bundle.js` and `swagger-ui-dist/swagger-ui.css` as text modules ' +
  "and pass `reference: { assets: { 'swagger-ui-bundle.js': bundle, 'swagger-ui.css': css } }`";

function refuse(field: string, problem: string): never {
  throw new SvcConfigurationError(`${LABEL}${field}\` ${problem}`, { reason: 'invalid_openapi' });
}

function isAssetBody(value: unknown): value is ReferenceAssetBody {
  return (typeof value === 'string' && value.length > 0) ||
    (value instanceof Uint8Array && value.byteLength > 0);
}

/**
 * Refuses an asset record missing a file, holding an empty or non-text one, or naming another
 * file. Used at construction for a record, and on the value a getter resolves to.
 */
export function checkReferenceAssetFiles(value: unknown): ReferenceAssetFiles {
  if (!isPlainObject(value)) refuse('.assets', HOW_TO_GIVE_ASSETS);
  refuseUnknownKeys(value, REFERENCE_ASSET_NAMES, `${LABEL}.assets\``, {
    reason: 'invalid_openapi',
  });
  for (const name of REFERENCE_ASSET_NAMES) {
    if (!isAssetBody(value[name])) {
      refuse(
        `.assets['${name}']`,
        "must be the file's contents (a non-empty string or Uint8Array)",
      );
    }
  }
  return value as unknown as ReferenceAssetFiles;
}

function referencePath(value: unknown): string {
  if (value === undefined) return DEFAULT_REFERENCE_PATH;
  if (
    typeof value !== 'string' || !REFERENCE_PATH.test(value) ||
    value.split('/').some((segment) => segment === '.' || segment === '..')
  ) {
    refuse(
      '.path',
      `must be an absolute literal path without a trailing / such as ${DEFAULT_REFERENCE_PATH} ` +
        `(got ${describeConfigValue(value)})`,
    );
  }
  return value;
}

/**
 * Validates `openapi.reference`: `undefined` serves no page; an object `{ assets, path? }` with
 * an asset record or getter and a literal absolute path. `true` and a missing `assets` are
 * refused with the line to write instead.
 */
export function resolveReferenceOption(value: unknown): ResolvedReferenceOption | undefined {
  if (value === undefined) return undefined;
  if (!isPlainObject(value)) refuse('', HOW_TO_GIVE_ASSETS);
  refuseUnknownKeys(value, ['assets', 'path'], `${LABEL}\``, { reason: 'invalid_openapi' });
  const assets = value.assets;
  if (typeof assets !== 'function') checkReferenceAssetFiles(assets);
  return Object.freeze({
    path: referencePath(value.path),
    assets: assets as ReferenceAssets,
  });
}
