/**
 * The OpenAPI 3.2 document of the REST facade, generated from the published REST projections of
 * the catalog's discovery documents. A pure function of its input: the same documents and
 * options give the same bytes, whichever caller asks and in whatever order services answered.
 *
 * Per route: one operation (`operationId` `<abilityId>.<method>`, tagged with its ability, whose
 * tag names its service's as `parent`), its path variables as required path parameters, its top-level string and
 * string-array input fields as optional query parameters, a JSON request body without the path
 * fields for `post`/`put`/`patch`/`query` (`query` is the 3.2 path-item field; `get` and
 * `delete` read no body), the success response with `rest.status` (204/205 carry no content)
 * and every error the facade answers there as `application/problem+json` of one shared
 * `Problem` schema. Security comes only from the `openapi` option; nothing is invented.
 *
 * @module
 */
import type { SvcErrorCode } from '../../core/errors.ts';
import type { JsonSchema } from '../../core/schema.ts';
import type { ServiceDiscoveryDocument } from '../../service/discovery.ts';
import type { RestMethod } from '../../service/rest-path.ts';
import { embedInputSchema, embedOutputSchema, type SchemaComponents } from './openapi-schemas.ts';
import {
  type PublishedRestRoute,
  publishedRestRoutes,
  type RefusedRestRoute,
} from './published-routes.ts';

/** The OpenAPI version the document declares. */
export const OPENAPI_VERSION = '3.2.0';

/** One security requirement: scheme name → required scopes (OpenAPI Security Requirement). */
export type OpenApiSecurityRequirement = Readonly<Record<string, readonly string[]>>;

/** What the document says beyond the catalog. */
export interface OpenApiDocumentOptions {
  /** `info.title`. */
  title: string;
  /** `info.version`; default: the services' versions, `<id>@<version>` sorted and joined. */
  version?: string;
  /** The plane's public origins, listed as `servers` (none: no `servers`). */
  servers?: readonly string[];
  /** The document-wide `security`: what invocation middleware really checks. */
  security?: readonly OpenApiSecurityRequirement[];
  /** `components.securitySchemes`, the schemes `security` names. */
  securitySchemes?: Readonly<Record<string, unknown>>;
  /** Paths the plane serves itself: a REST route there is left out. */
  planePaths?: readonly string[];
}

/** An OpenAPI 3.2 document as plain JSON data. */
export type OpenApiDocument = Record<string, unknown>;

/** The generated document and the routes left out of it (and of the facade). */
export interface GeneratedOpenApi {
  document: OpenApiDocument;
  refused: RefusedRestRoute[];
}

const PROBLEM_MEDIA_TYPE = 'application/problem+json';
const JSON_MEDIA_TYPE = 'application/json';
const TAXONOMY_CODES: readonly SvcErrorCode[] = [
  'capability_auth',
  'ability_validation',
  'timeout',
  'handler',
  'internal',
];
const BODY_METHODS: ReadonlySet<RestMethod> = new Set(['post', 'put', 'patch', 'query']);
/** Success statuses whose response has no content (RFC 9110 15.3.5, 15.3.6). */
const NO_CONTENT_STATUSES: ReadonlySet<number> = new Set([204, 205]);

const PROBLEM_REF = { $ref: '#/components/schemas/Problem' };

/** The shared problem schema: exactly the members the plane's problem bodies carry. */
function problemSchema(): JsonSchema {
  return {
    type: 'object',
    description: 'An RFC 9457 problem: the error taxonomy of svcplane.',
    properties: {
      type: { type: 'string', description: '`urn:svcplane:problem:<code>`' },
      title: { type: 'string' },
      status: { type: 'integer', minimum: 400, maximum: 599 },
      detail: { type: 'string' },
      code: { type: 'string', enum: [...TAXONOMY_CODES] },
      retryable: {
        type: 'boolean',
        description: 'Transient failure; a retry is safe only for an idempotent method.',
      },
      reason: { type: 'string', description: 'Machine-readable discriminator of the failure.' },
      requestId: { type: 'string' },
      issues: {
        type: 'array',
        items: {
          type: 'object',
          properties: {
            message: { type: 'string' },
            path: { type: 'array', items: { type: ['string', 'integer'] } },
          },
          required: ['message'],
          additionalProperties: false,
        },
      },
    },
    required: ['type', 'title', 'status', 'detail', 'code', 'retryable'],
    additionalProperties: false,
  };
}

function problemResponse(description: string, schema: JsonSchema = PROBLEM_REF) {
  return { description, content: { [PROBLEM_MEDIA_TYPE]: { schema } } };
}

/** The error responses, by component name; `Unauthorized` only with security. */
function errorResponses(withSecurity: boolean): Record<string, unknown> {
  const responses: Record<string, unknown> = {
    BadRequest: problemResponse('The request could not be read (malformed JSON body).'),
    Forbidden: problemResponse(
      'Refused: missing scope or grant, or an access class the caller does not have.',
    ),
    NotFound: problemResponse('No such route or ability.'),
    ContentTooLarge: problemResponse('The request body exceeds the size limit.'),
    UnsupportedMediaType: problemResponse('The request body is not JSON.'),
    InvalidInput: problemResponse(
      "The input failed the method's schema; `issues` says where.",
      { allOf: [PROBLEM_REF, { required: ['issues'] }] },
    ),
    InternalError: problemResponse('Internal error (details are logged, never returned).'),
    GatewayTimeout: problemResponse('The deadline elapsed.'),
    HandlerError: problemResponse(
      "A failure the ability's handler chose (its status, `code` `handler`).",
    ),
  };
  if (withSecurity) {
    responses.Unauthorized = {
      ...problemResponse('No valid credential.'),
      headers: {
        'WWW-Authenticate': {
          description: 'The challenge of the authentication the plane performs.',
          schema: { type: 'string' },
        },
      },
    };
  }
  return sortedRecord(responses);
}

function responseRef(name: string) {
  return { $ref: `#/components/responses/${name}` };
}

function successResponse(
  route: PublishedRestRoute,
  components: SchemaComponents,
  baseName: string,
): Record<string, unknown> {
  const status = route.rest.status;
  const description = status === 201 ? 'Created' : status === 202 ? 'Accepted' : 'Success';
  if (NO_CONTENT_STATUSES.has(status)) return { description };
  const schema = embedOutputSchema(components, route.method.outputSchema, `${baseName}.output`);
  return { description, content: { [JSON_MEDIA_TYPE]: { schema } } };
}

function responsesOf(
  route: PublishedRestRoute,
  components: SchemaComponents,
  baseName: string,
  withSecurity: boolean,
): Record<string, unknown> {
  const readsBody = BODY_METHODS.has(route.rest.method);
  const responses: Record<string, unknown> = {
    [String(route.rest.status)]: successResponse(route, components, baseName),
    '400': responseRef('BadRequest'),
  };
  if (withSecurity) responses['401'] = responseRef('Unauthorized');
  responses['403'] = responseRef('Forbidden');
  responses['404'] = responseRef('NotFound');
  if (readsBody) {
    responses['413'] = responseRef('ContentTooLarge');
    responses['415'] = responseRef('UnsupportedMediaType');
  }
  responses['422'] = responseRef('InvalidInput');
  responses['500'] = responseRef('InternalError');
  responses['504'] = responseRef('GatewayTimeout');
  responses.default = responseRef('HandlerError');
  return responses;
}

function operationOf(
  route: PublishedRestRoute,
  components: SchemaComponents,
  withSecurity: boolean,
): Record<string, unknown> {
  const operationId = `${route.ability.id}.${route.methodName}`;
  const input = embedInputSchema(
    components,
    route.method.inputSchema,
    `${operationId}.input`,
    route.variables,
  );
  const parameters: Record<string, unknown>[] = [];
  for (const [name, schema] of input.pathParameters) {
    parameters.push({ name, in: 'path', required: true, schema });
  }
  for (const [name, { kind, schema }] of input.queryParameters) {
    parameters.push({
      name,
      in: 'query',
      required: false,
      ...(kind === 'string-array' ? { style: 'form', explode: true } : {}),
      schema,
    });
  }
  const operation: Record<string, unknown> = {
    operationId,
    // The ability's tag only: its service is the tag's `parent` (3.2). Listing both put every
    // operation twice in tools that group by tag, such as the reference page.
    tags: [route.ability.id],
  };
  if (route.method.description !== undefined) operation.summary = route.method.description;
  if (route.ability.description !== undefined) operation.description = route.ability.description;
  if (parameters.length > 0) operation.parameters = parameters;
  if (BODY_METHODS.has(route.rest.method)) {
    operation.requestBody = {
      required: input.bodyRequired,
      content: { [JSON_MEDIA_TYPE]: { schema: input.body } },
    };
  }
  operation.responses = responsesOf(route, components, operationId, withSecurity);
  return operation;
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function sortedRecord<T>(record: Record<string, T>): Record<string, T> {
  const sorted: Record<string, T> = {};
  for (const key of Object.keys(record).sort(compareText)) sorted[key] = record[key];
  return sorted;
}

/** A service tag, then an ability tag (child of its service) for every ability with a route. */
function tagsOf(routes: readonly PublishedRestRoute[]): Record<string, unknown>[] {
  const tags = new Map<string, Record<string, unknown>>();
  for (const route of routes) {
    const { service, ability } = route;
    if (!tags.has(service.id)) {
      tags.set(service.id, { name: service.id, summary: service.title, kind: 'nav' });
    }
    if (!tags.has(ability.id)) {
      tags.set(ability.id, {
        name: ability.id,
        ...(ability.title !== undefined ? { summary: ability.title } : {}),
        ...(ability.description !== undefined ? { description: ability.description } : {}),
        parent: service.id,
        kind: 'nav',
      });
    }
  }
  return [...tags.keys()].sort(compareText).map((name) => tags.get(name)!);
}

function defaultVersion(documents: readonly ServiceDiscoveryDocument[]): string {
  const versions = documents.map((document) => `${document.id}@${document.version}`);
  return versions.length === 0 ? '0' : versions.sort(compareText).join(' ');
}

/**
 * Generates the OpenAPI 3.2 document of the published REST routes of `documents` (accepted
 * discovery documents, in any order). Routes the facade cannot serve (a plane path, a route two
 * services declare) are left out and returned in `refused`.
 */
export function generateOpenApiDocument(
  documents: readonly ServiceDiscoveryDocument[],
  options: OpenApiDocumentOptions,
): GeneratedOpenApi {
  const ordered = [...documents].sort((a, b) => compareText(a.id, b.id));
  const { routes, refused } = publishedRestRoutes(ordered, options.planePaths ?? []);
  const withSecurity = options.security !== undefined && options.security.length > 0;
  const components: SchemaComponents = new Map();
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const pathItem = paths[route.rest.path] ??= {};
    pathItem[route.rest.method] = operationOf(route, components, withSecurity);
  }
  components.set('Problem', problemSchema());
  const schemas: Record<string, JsonSchema> = {};
  for (const name of [...components.keys()].sort(compareText)) {
    schemas[name] = components.get(name)!;
  }
  const document: OpenApiDocument = {
    openapi: OPENAPI_VERSION,
    info: { title: options.title, version: options.version ?? defaultVersion(ordered) },
  };
  if (options.servers !== undefined && options.servers.length > 0) {
    document.servers = options.servers.map((url) => ({ url }));
  }
  if (options.security !== undefined) {
    document.security = options.security.map((requirement) => sortedRecord({ ...requirement }));
  }
  document.tags = tagsOf(routes);
  document.paths = paths;
  document.components = {
    schemas,
    responses: errorResponses(withSecurity),
    ...(options.securitySchemes !== undefined
      ? { securitySchemes: sortedRecord({ ...options.securitySchemes }) }
      : {}),
  };
  return { document, refused };
}
