import assert from 'node:assert/strict';
import { AssertionError } from 'node:assert';
import { test } from 'node:test';
import {
  assertReadResponseMatchesOpenApi,
  assertResponseMatchesOpenApi,
  type OpenApiDocumentLike,
  type RestResponseUnderCheck,
} from './openapi-response-check.ts';

const problemRef = { $ref: '#/components/schemas/Problem' };
const problemContent = { 'application/problem+json': { schema: problemRef } };

// A hand-written document, so the check is tested apart from the generator it judges.
const DOCUMENT: OpenApiDocumentLike = {
  openapi: '3.2.0',
  info: { title: 't', version: '1' },
  paths: {
    '/items/{id}': {
      get: {
        responses: {
          '200': {
            description: 'ok',
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  properties: {
                    id: { type: 'string' },
                    tags: { $ref: '#/components/schemas/Tags' },
                  },
                  required: ['id'],
                  additionalProperties: false,
                },
              },
            },
          },
          '401': {
            description: 'no credential',
            headers: { 'WWW-Authenticate': { required: true, schema: { type: 'string' } } },
            content: problemContent,
          },
          '422': { $ref: '#/components/responses/Invalid' },
          default: { description: 'handler', content: problemContent },
        },
      },
      delete: { responses: { '204': { description: 'gone' } } },
    },
    '/items/search': {
      query: {
        responses: {
          '200': { description: 'ok', content: { 'application/json': { schema: {} } } },
        },
      },
    },
  },
  components: {
    schemas: {
      Tags: { type: 'array', items: { type: 'string' } },
      Problem: {
        type: 'object',
        properties: {
          type: { type: 'string' },
          title: { type: 'string' },
          status: { type: 'integer' },
          detail: { type: 'string' },
          code: { type: 'string' },
          retryable: { type: 'boolean' },
          issues: { type: 'array', items: { type: 'object', required: ['message'] } },
        },
        required: ['type', 'title', 'status', 'detail', 'code', 'retryable'],
        additionalProperties: false,
      },
    },
    responses: {
      Invalid: {
        description: 'invalid',
        content: {
          'application/problem+json': {
            schema: { allOf: [problemRef, { required: ['issues'] }] },
          },
        },
      },
    },
  },
};

function problem(status: number, extra: Record<string, unknown> = {}) {
  return {
    type: 'urn:svcplane:problem:x',
    title: 't',
    status,
    detail: 'd',
    code: 'capability_auth',
    retryable: false,
    ...extra,
  };
}

const PROBLEM_HEADERS = { 'Content-Type': 'application/problem+json' };
const JSON_HEADERS = { 'Content-Type': 'application/json; charset=utf-8' };

function check(response: Omit<RestResponseUnderCheck, 'headers'> & { headers?: HeadersInit }) {
  assertResponseMatchesOpenApi(DOCUMENT, {
    ...response,
    headers: new Headers(response.headers ?? {}),
  });
}

function refuses(
  response: Parameters<typeof check>[0],
  mentions: RegExp,
): void {
  assert.throws(() => check(response), (error: unknown) => {
    assert.ok(error instanceof AssertionError, `expected an AssertionError: ${error}`);
    assert.match(error.message, mentions);
    return true;
  });
}

test('a success body matching its schema passes, by template or concrete path', () => {
  check({
    method: 'GET',
    path: '/items/{id}',
    status: 200,
    headers: JSON_HEADERS,
    body: { id: 'a' },
  });
  check({
    method: 'get',
    path: '/items/a%2Fb?x=1',
    status: 200,
    headers: JSON_HEADERS,
    body: { id: 'a/b', tags: ['x'] },
  });
});

test('a success body escaping its schema is named, through a component $ref too', () => {
  refuses(
    {
      method: 'GET',
      path: '/items/a',
      status: 200,
      headers: JSON_HEADERS,
      body: { id: 'a', leak: 1 },
    },
    /escapes GET \/items\/\{id\} responses\.200/,
  );
  refuses(
    {
      method: 'GET',
      path: '/items/a',
      status: 200,
      headers: JSON_HEADERS,
      body: { id: 'a', tags: [1] },
    },
    /#\/tags\/0/,
  );
});

test('an undeclared status fails; default covers errors, never another success', () => {
  refuses(
    { method: 'GET', path: '/items/a', status: 201, headers: JSON_HEADERS, body: { id: 'a' } },
    /status 201 is not declared/,
  );
  check({
    method: 'GET',
    path: '/items/a',
    status: 409,
    headers: PROBLEM_HEADERS,
    body: problem(409),
  });
  refuses(
    {
      method: 'DELETE',
      path: '/items/a',
      status: 500,
      headers: PROBLEM_HEADERS,
      body: problem(500),
    },
    /status 500 is not declared/,
  );
});

test('an undeclared content type or a body where none is declared fails', () => {
  refuses(
    {
      method: 'GET',
      path: '/items/a',
      status: 200,
      headers: { 'Content-Type': 'text/plain' },
      body: { id: 'a' },
    },
    /content type text\/plain is not declared/,
  );
  check({ method: 'DELETE', path: '/items/a', status: 204 });
  refuses(
    { method: 'DELETE', path: '/items/a', status: 204, headers: JSON_HEADERS, body: {} },
    /declares no body/,
  );
});

test('problem bodies are checked against the shared component, with extra members refused', () => {
  refuses(
    {
      method: 'GET',
      path: '/items/a',
      status: 418,
      headers: PROBLEM_HEADERS,
      body: problem(418, { stack: 'at handler' }),
    },
    /escapes .*responses\.default/,
  );
  refuses(
    { method: 'GET', path: '/items/a', status: 422, headers: PROBLEM_HEADERS, body: problem(422) },
    /escapes .*responses\.422/,
  );
  check({
    method: 'GET',
    path: '/items/a',
    status: 422,
    headers: PROBLEM_HEADERS,
    body: problem(422, { issues: [{ message: 'm' }] }),
  });
});

test('a declared required header must be present', () => {
  refuses(
    { method: 'GET', path: '/items/a', status: 401, headers: PROBLEM_HEADERS, body: problem(401) },
    /WWW-Authenticate is missing/,
  );
  check({
    method: 'GET',
    path: '/items/a',
    status: 401,
    headers: { ...PROBLEM_HEADERS, 'WWW-Authenticate': 'Bearer' },
    body: problem(401),
  });
});

test('an unknown path must be a problem 404', () => {
  check({
    method: 'GET',
    path: '/nothing',
    status: 404,
    headers: PROBLEM_HEADERS,
    body: problem(404),
  });
  check({
    method: 'GET',
    path: '/items/',
    status: 404,
    headers: PROBLEM_HEADERS,
    body: problem(404),
  });
  refuses(
    { method: 'GET', path: '/nothing', status: 200, headers: JSON_HEADERS, body: {} },
    /declares no such path/,
  );
  refuses(
    { method: 'GET', path: '/nothing', status: 404, headers: PROBLEM_HEADERS, body: problem(403) },
    /problem status 403/,
  );
});

test('a known path under another method must be a problem 405 whose Allow lists the declared methods', () => {
  check({
    method: 'PUT',
    path: '/items/a',
    status: 405,
    headers: { ...PROBLEM_HEADERS, Allow: 'DELETE, GET' },
    body: problem(405),
  });
  refuses(
    {
      method: 'PUT',
      path: '/items/a',
      status: 405,
      headers: { ...PROBLEM_HEADERS, Allow: 'GET' },
      body: problem(405),
    },
    /Allow is "GET"/,
  );
  refuses(
    { method: 'PUT', path: '/items/a', status: 404, headers: PROBLEM_HEADERS, body: problem(404) },
    /405/,
  );
  // A concrete path two templates serve: the literal one has QUERY, the variable one GET.
  check({ method: 'QUERY', path: '/items/search', status: 200, headers: JSON_HEADERS, body: [] });
  check({
    method: 'GET',
    path: '/items/search',
    status: 200,
    headers: JSON_HEADERS,
    body: { id: 's' },
  });
  check({
    method: 'POST',
    path: '/items/search',
    status: 405,
    headers: { ...PROBLEM_HEADERS, Allow: 'QUERY, GET, DELETE' },
    body: problem(405),
  });
});

test('assertReadResponseMatchesOpenApi takes what readResponse returns', () => {
  const read = { status: 200, headers: new Headers(JSON_HEADERS), body: { id: 'a' } };
  assertReadResponseMatchesOpenApi(DOCUMENT, 'GET', '/items/a', read);
  assert.throws(
    () => assertReadResponseMatchesOpenApi(DOCUMENT, 'GET', '/items/a', { ...read, body: {} }),
    AssertionError,
  );
});
