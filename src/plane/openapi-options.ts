/**
 * The plane option `openapi`: what `GET /openapi.json` says beyond the catalog (the
 * authentication invocation middleware really performs, a title, a version), where the
 * generated document is kept, and the reference page over it. Validated at construction; a key
 * nobody reads is refused.
 *
 * @module
 */
import { describeConfigValue, isPlainObject, refuseUnknownKeys } from '../core/config-values.ts';
import { SvcConfigurationError } from '../core/errors.ts';
import {
  type ReferenceOption,
  type ResolvedReferenceOption,
  resolveReferenceOption,
} from './reference/reference-option.ts';
import {
  isRegistryCache,
  isValidRegistryCacheTtl,
  memoryRegistryCache,
  type RegistryCache,
} from './registry-cache.ts';

/** One OpenAPI Security Requirement: scheme name → scopes (empty for non-OAuth schemes). */
export type OpenApiSecurityRequirementOption = Readonly<Record<string, readonly string[]>>;

/** The `openapi` option of `createControlPlane`. */
export interface OpenApiOption {
  /**
   * The document-wide `security`: the authentication invocation middleware performs. Default
   * none, and nothing is invented in its place. Every scheme named must be in `securitySchemes`.
   */
  security?: readonly OpenApiSecurityRequirementOption[];
  /** `components.securitySchemes` (OpenAPI Security Scheme Objects), by name. */
  securitySchemes?: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
  /**
   * Where the generated document is kept between requests: a `RegistryCache` (shared by
   * replicas), or `false` to generate it for every request. Default a process-local cache.
   */
  cache?: RegistryCache | false;
  /** How long a generated document is kept. Default `DEFAULT_OPENAPI_CACHE_TTL_SECONDS` (60). */
  cacheTtlSeconds?: number;
  /** `info.title`. Default `<plane id> API`. */
  title?: string;
  /** `info.version`. Default: the services' versions, `<id>@<version>` sorted and joined. */
  version?: string;
  /**
   * An offline API reference page (Swagger UI) over the document, at `/reference` unless
   * `path` says otherwise: `{ assets: swaggerUiAssets() }` with `swaggerUiAssets` from
   * `svcplane/node` (Node, Deno, Bun), or Swagger UI's two files as text on Workers. Default none.
   */
  reference?: ReferenceOption;
}

/** The `openapi` option after validation; `undefined` stands for `openapi: false`. */
export interface ResolvedOpenApiOptions {
  security?: readonly OpenApiSecurityRequirementOption[];
  securitySchemes?: Readonly<Record<string, unknown>>;
  /** `undefined`: generate for every request. */
  cache: RegistryCache | undefined;
  cacheTtlSeconds: number;
  title: string;
  version?: string;
  /** `undefined`: no reference page. */
  reference?: ResolvedReferenceOption;
}

/** How long a generated OpenAPI document is cached when `cacheTtlSeconds` is not given. */
export const DEFAULT_OPENAPI_CACHE_TTL_SECONDS = 60;

const OPENAPI_OPTIONS: readonly string[] = [
  'security',
  'securitySchemes',
  'cache',
  'cacheTtlSeconds',
  'title',
  'version',
  'reference',
];

const SECURITY_SCHEME_TYPES: readonly string[] = [
  'apiKey',
  'http',
  'mutualTLS',
  'oauth2',
  'openIdConnect',
];

/** A component name OpenAPI accepts. */
const COMPONENT_NAME = /^[A-Za-z0-9._-]{1,128}$/;

const LABEL = 'createControlPlane: `openapi';

function refuse(field: string, problem: string): never {
  throw new SvcConfigurationError(`${LABEL}${field}\` ${problem}`, { reason: 'invalid_openapi' });
}

/** A JSON copy: what the document serialises is exactly what was checked. */
function jsonCopy<T>(value: T, field: string): T {
  try {
    return JSON.parse(JSON.stringify(value)) as T;
  } catch {
    return refuse(field, 'must be JSON data');
  }
}

function securitySchemes(value: unknown): Record<string, Record<string, unknown>> | undefined {
  if (value === undefined) return undefined;
  if (!isPlainObject(value)) refuse('.securitySchemes', 'must be an object of security schemes');
  for (const [name, scheme] of Object.entries(value)) {
    if (!COMPONENT_NAME.test(name)) {
      refuse('.securitySchemes', `name ${describeConfigValue(name)} must match [A-Za-z0-9._-]`);
    }
    if (!isPlainObject(scheme) || !SECURITY_SCHEME_TYPES.includes(scheme.type as string)) {
      refuse(
        `.securitySchemes.${name}`,
        `must be a security scheme whose type is one of ${SECURITY_SCHEME_TYPES.join(', ')}`,
      );
    }
  }
  return jsonCopy(value as Record<string, Record<string, unknown>>, '.securitySchemes');
}

function securityRequirement(
  value: unknown,
  index: number,
  schemes: Record<string, unknown> | undefined,
): Record<string, string[]> {
  const field = `.security[${index}]`;
  if (!isPlainObject(value)) refuse(field, 'must be a security requirement object');
  const requirement: Record<string, string[]> = {};
  for (const [name, scopes] of Object.entries(value)) {
    if (schemes === undefined || !Object.hasOwn(schemes, name)) {
      refuse(field, `names the scheme ${describeConfigValue(name)}, not in securitySchemes`);
    }
    if (!Array.isArray(scopes) || scopes.some((scope) => typeof scope !== 'string')) {
      refuse(`${field}.${name}`, 'must be an array of scope strings');
    }
    requirement[name] = [...scopes];
  }
  return requirement;
}

function security(
  value: unknown,
  schemes: Record<string, unknown> | undefined,
): Record<string, string[]>[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value)) refuse('.security', 'must be an array of security requirements');
  return value.map((requirement, index) => securityRequirement(requirement, index, schemes));
}

function cache(value: unknown): RegistryCache | undefined {
  if (value === undefined) return memoryRegistryCache();
  if (value === false) return undefined;
  if (!isRegistryCache(value)) {
    refuse('.cache', 'must be a registry cache (get, set, delete) or false');
  }
  return value;
}

function ttl(value: unknown): number {
  if (value === undefined) return DEFAULT_OPENAPI_CACHE_TTL_SECONDS;
  if (!isValidRegistryCacheTtl(value)) {
    refuse('.cacheTtlSeconds', 'must be a positive number of seconds (at most a year)');
  }
  return value;
}

function text(value: unknown, field: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.length === 0) refuse(field, 'must be a non-empty string');
  return value;
}

/**
 * Validates the `openapi` option: `false` leaves `/openapi.json` unmounted (`undefined`);
 * `undefined` or an object mounts it. Refuses unknown keys, a requirement naming a scheme
 * `securitySchemes` does not define, a scheme without a known `type`, and malformed values.
 */
export function resolveOpenApiOptions(
  option: unknown,
  planeId: string,
): ResolvedOpenApiOptions | undefined {
  if (option === false) return undefined;
  const given = option === undefined ? {} : option;
  if (!isPlainObject(given)) refuse('', 'must be false or an object');
  refuseUnknownKeys(given, OPENAPI_OPTIONS, `${LABEL}\``, { reason: 'invalid_openapi' });
  const schemes = securitySchemes(given.securitySchemes);
  const requirements = security(given.security, schemes);
  const version = text(given.version, '.version');
  const reference = resolveReferenceOption(given.reference);
  return Object.freeze({
    ...(requirements !== undefined ? { security: requirements } : {}),
    ...(schemes !== undefined ? { securitySchemes: schemes } : {}),
    cache: cache(given.cache),
    cacheTtlSeconds: ttl(given.cacheTtlSeconds),
    title: text(given.title, '.title') ?? `${planeId} API`,
    ...(version !== undefined ? { version } : {}),
    ...(reference !== undefined ? { reference } : {}),
  });
}
