/**
 * Checks a real REST response against the OpenAPI document the plane publishes: the document
 * must describe what the facade answers. Given the method, the path (a template of the document
 * or the concrete request path), the status, the content type and the parsed body, it finds the
 * operation and the response the document declares for that status (or `default`, which covers
 * errors only) and validates the body with `@cfworker/json-schema` (draft 2020-12; runs on every
 * runtime). A path the document does not know must be a problem 404, and a known path under an
 * undeclared method a problem 405 whose `Allow` lists the declared methods. Anything else throws
 * an `AssertionError` naming what escaped the document.
 */
import { AssertionError } from 'node:assert';
import { Validator } from '@cfworker/json-schema';

/** An OpenAPI document as JSON (only the members the check reads are typed). */
export interface OpenApiDocumentLike {
  paths?: Record<string, Record<string, unknown>>;
  components?: Record<string, Record<string, unknown>>;
  [member: string]: unknown;
}

/** One response as the test received it. */
export interface RestResponseUnderCheck {
  /** The HTTP method of the request (any case; `QUERY` included). */
  method: string;
  /** The path template of the document (`/items/{id}`) or the concrete path (`/items/a%2Fb?x`). */
  path: string;
  /** The HTTP status answered. */
  status: number;
  /** The response headers; `contentType` defaults to their `Content-Type`. */
  headers?: Headers;
  /** The response media type; overrides `headers`. */
  contentType?: string | null;
  /** The parsed JSON body; `undefined` (or `''`) for an empty body. */
  body?: unknown;
}

const OPERATION_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const PROBLEM_MEDIA_TYPE = 'application/problem+json';
const DOCUMENT_URI = 'urn:svcplane:openapi-under-check';

function fail(response: RestResponseUnderCheck, problem: string): never {
  throw new AssertionError({
    message: `${response.method.toUpperCase()} ${response.path} → ${response.status}: ${problem}`,
  });
}

/** The operations of a path item by lower-case method, the 3.2 `query` field included. */
function operationsOf(pathItem: Record<string, unknown>): Map<string, Record<string, unknown>> {
  const operations = new Map<string, Record<string, unknown>>();
  for (const method of [...OPERATION_METHODS, 'query']) {
    const operation = pathItem[method];
    if (operation !== null && typeof operation === 'object') {
      operations.set(method, operation as Record<string, unknown>);
    }
  }
  const additional = pathItem.additionalOperations;
  if (additional !== null && typeof additional === 'object') {
    for (const [method, operation] of Object.entries(additional)) {
      operations.set(method.toLowerCase(), operation as Record<string, unknown>);
    }
  }
  return operations;
}

/** How many template segments are variables: fewer means more specific. */
function variableCount(template: string): number {
  return template.split('/').filter((segment) => /^\{[^/{}]+\}$/.test(segment)).length;
}

/** Whether a concrete path matches a template: a variable takes one non-empty segment. */
function templateMatches(template: string, path: string): boolean {
  const expected = template.split('/');
  const actual = path.split('/');
  if (expected.length !== actual.length) return false;
  return expected.every((segment, index) =>
    /^\{[^/{}]+\}$/.test(segment) ? actual[index].length > 0 : segment === actual[index]
  );
}

/** The templates of the document that serve `path` (itself, when it is a template). */
function matchingTemplates(document: OpenApiDocumentLike, path: string): string[] {
  const paths = document.paths ?? {};
  const bare = path.split('?')[0].split('#')[0];
  // A template names itself; a concrete path may be served by a literal and a templated entry.
  if (/\{[^/{}]+\}/.test(bare) && Object.hasOwn(paths, bare)) return [bare];
  return Object.keys(paths)
    .filter((template) => templateMatches(template, bare))
    .sort((a, b) => variableCount(a) - variableCount(b));
}

/** Follows a `$ref` to `#/components/...` (responses, headers). */
function resolveRef(document: OpenApiDocumentLike, value: unknown): Record<string, unknown> {
  let current = value as Record<string, unknown>;
  for (let hops = 0; typeof current?.$ref === 'string'; hops++) {
    const match = /^#\/components\/([^/]+)\/([^/]+)$/.exec(current.$ref as string);
    if (match === null || hops > 8) {
      throw new AssertionError({ message: `unresolvable $ref ${String(current.$ref)}` });
    }
    current = document.components?.[match[1]]?.[match[2]] as Record<string, unknown>;
  }
  return current;
}

function escapePointer(segment: string): string {
  return segment.replaceAll('~', '~0').replaceAll('/', '~1');
}

// One compiled validator per document and schema location.
const prepared = new WeakMap<OpenApiDocumentLike, Map<string, Validator>>();

/** The value at a JSON pointer of the document (`/paths/~1items/get/...`). */
function valueAt(document: OpenApiDocumentLike, pointer: string): unknown {
  let current: unknown = document;
  for (const raw of pointer.split('/').slice(1)) {
    const key = raw.replaceAll('~1', '/').replaceAll('~0', '~');
    if (current === null || typeof current !== 'object' || !Object.hasOwn(current, key)) {
      throw new AssertionError({ message: `the document has nothing at ${pointer}` });
    }
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}

/** A copy whose document-local `$ref`s name the document resource the validator holds. */
function anchoredToDocument(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(anchoredToDocument);
  if (value === null || typeof value !== 'object') return value;
  const copy: Record<string, unknown> = {};
  for (const [key, member] of Object.entries(value)) {
    copy[key] = key === '$ref' && typeof member === 'string' && member.startsWith('#/')
      ? `${DOCUMENT_URI}${member}`
      : anchoredToDocument(member);
  }
  return copy;
}

// The schema is compiled on its own rather than reached by a pointer into the document: the
// validator indexes only what looks like a schema, and an OpenAPI `default` response sits
// under a key JSON Schema reserves.
function validatorAt(document: OpenApiDocumentLike, pointer: string): Validator {
  let byPointer = prepared.get(document);
  if (byPointer === undefined) {
    byPointer = new Map();
    prepared.set(document, byPointer);
  }
  let validator = byPointer.get(pointer);
  if (validator === undefined) {
    const schema = anchoredToDocument(valueAt(document, pointer));
    validator = new Validator(schema as never, '2020-12', false);
    // A copy through JSON: the validator annotates what it is given, and a schema object shared
    // by two places must become two objects or it is indexed under the first place only.
    validator.addSchema(JSON.parse(JSON.stringify(document)), DOCUMENT_URI);
    byPointer.set(pointer, validator);
  }
  return validator;
}

function validateAt(
  document: OpenApiDocumentLike,
  pointer: string,
  response: RestResponseUnderCheck,
  what: string,
): void {
  const result = validatorAt(document, pointer).validate(response.body);
  if (result.valid) return;
  // The innermost errors say what escaped; the `$ref` / combinator frames only point at them.
  const leaves = result.errors.filter((error) =>
    !result.errors.some((other) =>
      other !== error && other.keywordLocation.startsWith(`${error.keywordLocation}/`)
    )
  );
  const details = (leaves.length > 0 ? leaves : result.errors)
    .slice(0, 8)
    .map((error) => `${error.instanceLocation}: ${error.error}`)
    .join('; ');
  fail(response, `body escapes ${what} (${details}); body: ${JSON.stringify(response.body)}`);
}

function mediaTypeOf(response: RestResponseUnderCheck): string | undefined {
  const raw = response.contentType !== undefined
    ? response.contentType
    : response.headers?.get('Content-Type');
  if (raw === null || raw === undefined || raw === '') return undefined;
  return raw.split(';')[0].trim().toLowerCase();
}

function isEmptyBody(body: unknown): boolean {
  return body === undefined || body === '';
}

/** Checks a problem body against `components.schemas.Problem` (404 and 405 have no operation). */
function checkProblem(document: OpenApiDocumentLike, response: RestResponseUnderCheck): void {
  if (mediaTypeOf(response) !== PROBLEM_MEDIA_TYPE) {
    fail(response, `expected ${PROBLEM_MEDIA_TYPE}, got ${mediaTypeOf(response) ?? 'no body'}`);
  }
  if (document.components?.schemas?.Problem === undefined) {
    fail(response, 'the document has no components.schemas.Problem');
  }
  validateAt(document, '/components/schemas/Problem', response, 'components.schemas.Problem');
  const status = (response.body as { status?: unknown }).status;
  if (status !== response.status) fail(response, `problem status ${status} is not the HTTP status`);
}

function checkNoSuchPath(document: OpenApiDocumentLike, response: RestResponseUnderCheck): void {
  if (response.status !== 404) {
    fail(response, 'the document declares no such path, so the only honest answer is 404');
  }
  checkProblem(document, response);
}

function checkNoSuchOperation(
  document: OpenApiDocumentLike,
  response: RestResponseUnderCheck,
  served: Set<string>,
): void {
  if (response.status !== 405) {
    fail(response, `the document declares no ${response.method} here (only ${[...served]}): 405`);
  }
  checkProblem(document, response);
  if (response.headers !== undefined) {
    const allow = (response.headers.get('Allow') ?? '').split(',').map((m) => m.trim())
      .filter((m) => m.length > 0).map((m) => m.toUpperCase()).sort();
    const declared = [...served].map((m) => m.toUpperCase()).sort();
    if (allow.join(',') !== declared.join(',')) {
      fail(response, `Allow is "${allow.join(', ')}", the document declares ${declared}`);
    }
  }
}

/** The declared response key for a status: exact, then `4XX`, then `default` (errors only). */
function responseKey(
  responses: Record<string, unknown>,
  status: number,
): string | undefined {
  if (Object.hasOwn(responses, String(status))) return String(status);
  const range = `${String(status)[0]}XX`;
  if (Object.hasOwn(responses, range)) return range;
  if (status >= 400 && Object.hasOwn(responses, 'default')) return 'default';
  return undefined;
}

function checkDeclaredHeaders(
  document: OpenApiDocumentLike,
  response: RestResponseUnderCheck,
  declared: Record<string, unknown>,
): void {
  if (response.headers === undefined) return;
  for (const [name, value] of Object.entries(declared)) {
    const header = resolveRef(document, value);
    if (header?.required === true && !response.headers.has(name)) {
      fail(response, `the declared required header ${name} is missing`);
    }
  }
}

function checkOperationResponse(
  document: OpenApiDocumentLike,
  response: RestResponseUnderCheck,
  template: string,
  method: string,
  operation: Record<string, unknown>,
): void {
  const responses = (operation.responses ?? {}) as Record<string, unknown>;
  const key = responseKey(responses, response.status);
  if (key === undefined) {
    fail(
      response,
      `status ${response.status} is not declared (declared: ${Object.keys(responses)})`,
    );
  }
  const declared = resolveRef(document, responses[key]);
  checkDeclaredHeaders(document, response, (declared.headers ?? {}) as Record<string, unknown>);
  const content = declared.content as Record<string, { schema?: unknown }> | undefined;
  if (content === undefined || Object.keys(content).length === 0) {
    if (!isEmptyBody(response.body)) fail(response, `responses.${key} declares no body`);
    return;
  }
  if (method === 'head') return;
  const mediaType = mediaTypeOf(response);
  if (mediaType === undefined || !Object.hasOwn(content, mediaType)) {
    fail(response, `content type ${mediaType} is not declared (${Object.keys(content)})`);
  }
  if (content[mediaType].schema === undefined) return;
  // The pointer is taken from where the response really sits, following a component $ref.
  const base = typeof (responses[key] as { $ref?: unknown }).$ref === 'string'
    ? (responses[key] as { $ref: string }).$ref.slice(1)
    : `/paths/${escapePointer(template)}/${method}/responses/${escapePointer(key)}`;
  validateAt(
    document,
    `${base}/content/${escapePointer(mediaType)}/schema`,
    response,
    `${method.toUpperCase()} ${template} responses.${key} (${mediaType})`,
  );
}

/**
 * Asserts that `response` is what `document` declares: its status is declared for the operation
 * (`default` covers only 4xx/5xx), its body is empty exactly when no content is declared, its
 * media type is declared and its body matches that schema, and declared required headers are
 * present (when `headers` is given). An unknown path must be a problem 404; a known path under
 * another method a problem 405 with `Allow` naming the declared methods. Throws an
 * `AssertionError` naming what escaped.
 */
export function assertResponseMatchesOpenApi(
  document: OpenApiDocumentLike,
  response: RestResponseUnderCheck,
): void {
  const templates = matchingTemplates(document, response.path);
  if (templates.length === 0) return checkNoSuchPath(document, response);
  const asked = response.method.toLowerCase();
  const method = asked === 'head' ? 'get' : asked;
  const served = new Set<string>();
  for (const template of templates) {
    const operations = operationsOf(document.paths![template]);
    const operation = operations.get(method);
    if (operation !== undefined) {
      return checkOperationResponse(document, response, template, asked, operation);
    }
    for (const name of operations.keys()) served.add(name);
  }
  checkNoSuchOperation(document, response, served);
}

/**
 * As {@link assertResponseMatchesOpenApi}, for a response already read by the conformance
 * fixtures' `readResponse` (`{ status, headers, body }`).
 */
export function assertReadResponseMatchesOpenApi(
  document: OpenApiDocumentLike,
  method: string,
  path: string,
  read: { status: number; headers: Headers; body: unknown },
): void {
  assertResponseMatchesOpenApi(document, {
    method,
    path,
    status: read.status,
    headers: read.headers,
    body: read.body,
  });
}
