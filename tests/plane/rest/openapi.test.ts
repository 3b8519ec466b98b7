// The OpenAPI generator as a pure function of discovery documents: what each route becomes, what
// stays out, and that the bytes depend on nothing but the catalog and the options.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { defineAbility } from '../../../src/service/ability.ts';
import {
  parseServiceDiscoveryDocument,
  type ServiceDiscoveryDocument,
  serviceDiscoveryDocument,
} from '../../../src/service/discovery.ts';
import { abilityMethod } from '../../../src/service/method.ts';
import { generateOpenApiDocument } from '../../../src/plane/rest/openapi.ts';
import { queryFallbackFields } from '../../../src/plane/rest/query-fallback.ts';
import {
  createFixtureStats,
  echoAbility,
  internalAbility,
  otherAbility,
  privateAbility,
} from '../../conformance/fixture-abilities.ts';
import {
  draftsAbility,
  notesAbility,
  REST_SERVICE_ID,
} from '../../conformance/fixture-rest-abilities.ts';
import { assertResponseMatchesOpenApi } from '../../support/openapi-response-check.ts';

// deno-lint-ignore no-explicit-any
type Json = any;

/** A discovery document as the plane holds it: projected, then parsed from JSON. */
function received(
  id: string,
  // deno-lint-ignore no-explicit-any
  abilities: any[],
  version = '1.0.0',
): ServiceDiscoveryDocument {
  const document = serviceDiscoveryDocument({ id, title: `Service ${id}`, version, abilities });
  return parseServiceDiscoveryDocument(JSON.parse(JSON.stringify(document)), id);
}

function catalog(): ServiceDiscoveryDocument[] {
  const stats = createFixtureStats();
  return [
    received('svc-a', [
      echoAbility(stats),
      otherAbility(stats),
      internalAbility(stats),
      privateAbility(stats),
    ]),
    received(REST_SERVICE_ID, [notesAbility(stats), draftsAbility(stats)], '2.0.0'),
  ];
}

function generate(options: Json = {}, documents = catalog()): Json {
  return JSON.parse(JSON.stringify(
    generateOpenApiDocument(documents, { title: 'Plane API', ...options }).document,
  ));
}

function operationIds(document: Json): string[] {
  return Object.values(document.paths as Record<string, Json>)
    .flatMap((item) => Object.values(item).map((operation: Json) => operation.operationId))
    .sort();
}

test('one operation per published non-streaming REST method; the rest stay out', () => {
  const document = generate();
  assert.equal(document.openapi, '3.2.0');
  assert.deepEqual(operationIds(document), [
    'svc-a.echo.badOutput',
    'svc-a.echo.fail',
    'svc-a.echo.failShaped',
    'svc-a.echo.items.delete',
    'svc-a.echo.items.get',
    'svc-a.echo.items.patch',
    'svc-a.echo.items.replace',
    'svc-a.echo.items.search',
    'svc-a.echo.items.update',
    'svc-a.echo.sleep',
    'svc-a.echo.whoami',
    'svc-a.internal.whoami',
    'svc-r.notes.create',
    'svc-r.notes.get',
    'svc-r.notes.list',
    'svc-r.notes.outline',
    'svc-r.notes.page',
    'svc-r.notes.remove',
    'svc-r.notes.replace',
    'svc-r.notes.retitle',
    'svc-r.notes.search',
  ]);
  const text = JSON.stringify(document);
  // Private abilities (with REST metadata), streaming methods and methods without `rest`.
  for (const absent of ['/private/secret', '/drafts', 'svc-r.notes.watch', 'svc-r.notes.count']) {
    assert.ok(!text.includes(absent), `${absent} must not be described`);
  }
});

test('every REST method lands in its path-item field, QUERY under the 3.2 query field', () => {
  const { paths } = generate();
  assert.deepEqual(Object.keys(paths['/notes/{noteId}']), [
    'get',
    'post',
    'put',
    'patch',
    'delete',
  ]);
  assert.deepEqual(Object.keys(paths['/notes/search']), ['query']);
  assert.deepEqual(Object.keys(paths['/items/search']), ['query']);
  assert.equal(paths['/notes/search'].additionalOperations, undefined);
  // Paths are sorted, so the bytes do not depend on discovery order.
  const keys = Object.keys(paths);
  assert.deepEqual(keys, [...keys].sort());
});

test('operation ids, tags, summary and description come from the definitions', () => {
  const document = generate();
  const list = document.paths['/notes'].get;
  assert.equal(list.operationId, 'svc-r.notes.list');
  // One tag, the ability's; its service is the tag's parent, so tools list it once.
  assert.deepEqual(list.tags, ['svc-r.notes']);
  assert.equal(list.summary, 'List notes, optionally by tag');
  assert.equal(list.description, 'Notes kept by the REST fixture service.');
  assert.equal(document.paths['/notes/{noteId}'].get.summary, undefined);
  const tags = Object.fromEntries(document.tags.map((tag: Json) => [tag.name, tag]));
  assert.deepEqual(Object.keys(tags), [
    'svc-a',
    'svc-a.echo',
    'svc-a.internal',
    'svc-r',
    'svc-r.notes',
  ]);
  assert.equal(tags['svc-r'].summary, 'Service svc-r');
  assert.equal(tags['svc-r.notes'].summary, 'Notes');
  assert.equal(tags['svc-r.notes'].parent, 'svc-r');
});

test('path fields leave the body and become required path parameters; strings fall back to the query', () => {
  const create = generate().paths['/notes/{noteId}'].post;
  const path = create.parameters.filter((p: Json) => p.in === 'path');
  assert.deepEqual(path, [{
    name: 'noteId',
    in: 'path',
    required: true,
    schema: { type: 'string' },
  }]);
  const query = create.parameters.filter((p: Json) => p.in === 'query');
  assert.deepEqual(query.map((p: Json) => p.name), ['title', 'body', 'tags']);
  assert.ok(query.every((p: Json) => p.required === false));
  const tags = query.find((p: Json) => p.name === 'tags');
  assert.equal(tags.style, 'form');
  assert.equal(tags.explode, true);
  assert.equal(query.find((p: Json) => p.name === 'title').style, undefined);
  const body = create.requestBody.content['application/json'].schema;
  assert.deepEqual(Object.keys(body.properties), ['title', 'body', 'tags']);
  assert.deepEqual(body.required, ['title']);
  assert.equal(JSON.stringify(body).includes('noteId'), false);
});

test('only top-level string and string-array fields fall back to the query', () => {
  const { paths } = generate();
  const page = paths['/pages/{page}'].get;
  // `page` is a path variable (a string of digits), `size` a number: neither is a query fallback.
  assert.deepEqual(page.parameters, [{
    name: 'page',
    in: 'path',
    required: true,
    schema: { type: 'string', pattern: '^[0-9]{1,6}$' },
  }]);
  const list = paths['/notes'].get.parameters.map((p: Json) => p.name);
  assert.deepEqual(list, ['tag', 'tags']);
  const search = paths['/notes/search'].query.parameters.map((p: Json) => p.name);
  assert.deepEqual(search, ['q']);
  const fields = queryFallbackFields({
    type: 'object',
    properties: {
      a: { type: 'string' },
      b: { type: 'array', items: { type: 'string' } },
      c: { type: 'array', items: { type: 'number' } },
      d: { type: 'object' },
      e: { $ref: '#/$defs/S' },
      f: { type: ['string', 'null'] },
    },
    $defs: { S: { type: 'string' } },
  });
  assert.deepEqual([...fields], [['a', 'string'], ['b', 'string-array'], ['e', 'string']]);
});

test('GET and DELETE read no body; post, put, patch and query do', () => {
  const { paths } = generate();
  const item = paths['/notes/{noteId}'];
  assert.equal(item.get.requestBody, undefined);
  assert.equal(item.delete.requestBody, undefined);
  for (const method of ['post', 'put', 'patch']) assert.ok(item[method].requestBody, method);
  assert.ok(paths['/notes/search'].query.requestBody);
  // The body is required only when a required field cannot come from the query.
  assert.equal(paths['/notes/search'].query.requestBody.required, false);
  for (const method of ['get', 'delete']) {
    assert.equal(item[method].responses['413'], undefined, `${method} reads no body: no 413`);
    assert.equal(item[method].responses['415'], undefined, `${method} reads no body: no 415`);
  }
  assert.ok(item.post.responses['413'] && item.post.responses['415']);
});

test('success responses: rest.status with the output schema; 204 has no content', () => {
  const { paths } = generate();
  const item = paths['/notes/{noteId}'];
  assert.deepEqual(Object.keys(item.post.responses).filter((s) => s.startsWith('2')), ['201']);
  assert.ok(item.post.responses['201'].content['application/json'].schema.properties.noteId);
  assert.deepEqual(item.delete.responses['204'], { description: 'Success' });
  assert.ok(item.get.responses['200'].content['application/json']);
  assert.equal(item.get.responses['201'], undefined);
});

test('every error is a problem+json response of the one Problem component', () => {
  const document = generate();
  const responses = document.paths['/notes/{noteId}'].post.responses;
  assert.deepEqual(
    Object.keys(responses).sort(),
    ['201', '400', '403', '404', '413', '415', '422', '500', '504', 'default'],
  );
  for (const [status, response] of Object.entries(responses as Record<string, Json>)) {
    if (status === '201') continue;
    const resolved = document.components.responses[response.$ref.split('/').pop()];
    const schema = resolved.content['application/problem+json'].schema;
    assert.ok(JSON.stringify(schema).includes('"#/components/schemas/Problem"'), status);
  }
  const problem = document.components.schemas.Problem;
  assert.deepEqual(problem.required, ['type', 'title', 'status', 'detail', 'code', 'retryable']);
  assert.deepEqual(
    Object.keys(problem.properties),
    ['type', 'title', 'status', 'detail', 'code', 'retryable', 'reason', 'requestId', 'issues'],
  );
  assert.deepEqual(problem.properties.issues.items.required, ['message']);
  const invalid = document.components.responses.InvalidInput;
  assert.deepEqual(invalid.content['application/problem+json'].schema.allOf[1], {
    required: ['issues'],
  });
});

test('no security is invented: none without the option, exactly the option with it', () => {
  const plain = generate();
  assert.equal(plain.security, undefined);
  assert.equal(plain.components.securitySchemes, undefined);
  assert.equal(plain.components.responses.Unauthorized, undefined);
  const text = JSON.stringify(plain);
  assert.ok(!text.includes('"security"') && !text.includes('"401"'));
  const secured = generate({
    security: [{ bearer: [] }],
    securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
  });
  assert.deepEqual(secured.security, [{ bearer: [] }]);
  assert.deepEqual(secured.components.securitySchemes, {
    bearer: { type: 'http', scheme: 'bearer' },
  });
  const unauthorized = secured.paths['/notes'].get.responses['401'];
  assert.equal(unauthorized.$ref, '#/components/responses/Unauthorized');
  assert.ok(secured.components.responses.Unauthorized.headers['WWW-Authenticate']);
  // No operation carries its own security (no `security: []` anywhere).
  assert.ok(!JSON.stringify(secured.paths).includes('"security"'));
});

test('info and servers: title, version (the services by default) and public origins', () => {
  const document = generate({ servers: ['https://api.example.com', 'http://localhost:8787'] });
  assert.deepEqual(document.info, { title: 'Plane API', version: 'svc-a@1.0.0 svc-r@2.0.0' });
  assert.deepEqual(document.servers, [
    { url: 'https://api.example.com' },
    { url: 'http://localhost:8787' },
  ]);
  assert.equal(generate().servers, undefined);
  assert.equal(generate({ version: '7' }).info.version, '7');
});

test('the bytes depend only on the catalog and the options, not on discovery order', () => {
  const documents = catalog();
  const forward = JSON.stringify(generateOpenApiDocument(documents, { title: 'T' }).document);
  const backward = JSON.stringify(
    generateOpenApiDocument([...documents].reverse(), { title: 'T' }).document,
  );
  assert.equal(forward, backward);
  assert.equal(
    JSON.stringify(generateOpenApiDocument(catalog(), { title: 'T' }).document),
    forward,
  );
});

test('schema definitions move to components and their references follow; $schema is dropped', () => {
  const document = generate();
  const text = JSON.stringify(document);
  assert.ok(!text.includes('"$schema"'));
  assert.ok(!text.includes('"#/$defs/'), 'no reference into a schema-local $defs remains');
  assert.ok(!/"\$ref":"#"/.test(text), 'no root self-reference remains');
  const outline = document.paths['/notes/{noteId}/outline'].get.responses['200'];
  const ref = outline.content['application/json'].schema.$ref;
  assert.equal(ref, '#/components/schemas/svc-r.notes.outline.output');
  const component = document.components.schemas['svc-r.notes.outline.output'];
  assert.equal(component.properties.children.items.$ref, ref);
  const filter = document.paths['/notes/search'].query.requestBody.content['application/json']
    .schema.properties.filter.$ref;
  assert.ok(document.components.schemas[filter.split('/').pop()], filter);
  // The rewritten references resolve: a recursive body validates, a wrong one does not.
  const check = (body: unknown) =>
    assertResponseMatchesOpenApi(document, {
      method: 'GET',
      path: '/notes/n1/outline',
      status: 200,
      contentType: 'application/json',
      body,
    });
  check({ title: 'a', children: [{ title: 'b', children: [] }] });
  assert.throws(() => check({ title: 'a', children: [{ title: 1, children: [] }] }));
});

test('a route two services declare, or one on a plane path, is left out and reported', () => {
  const stats = createFixtureStats();
  const clash = (id: string, path: string) =>
    defineAbility({
      id: `${id}.clash`,
      exposure: 'published',
      methods: {
        read: abilityMethod({
          input: z.object({ key: z.string() }),
          output: z.object({}),
          rest: { method: 'get', path },
        }),
      },
      handler: () => ({ read: () => ({}) }),
    });
  const documents = [
    received('svc-x', [clash('svc-x', '/shared/{key}')]),
    received('svc-y', [clash('svc-y', '/shared/{key}')]),
    received('svc-z', [clash('svc-z', '/openapi.json')]),
    received('svc-a', [echoAbility(stats)]),
  ];
  const { document, refused } = generateOpenApiDocument(documents, {
    title: 'T',
    planePaths: ['/openapi.json'],
  });
  assert.deepEqual(Object.keys(document.paths as Json), [
    '/bad-output',
    '/fail',
    '/fail-shaped',
    '/items/search',
    '/items/{id}',
    '/sleep',
    '/whoami',
  ]);
  assert.deepEqual(
    refused.map((route) => `${route.serviceId} ${route.path} ${route.reason}`),
    [
      'svc-z /openapi.json plane_route',
      'svc-x /shared/{key} duplicate_route',
      'svc-y /shared/{key} duplicate_route',
    ],
  );
});

test('an empty catalog is still a valid document with no paths', () => {
  const document = generate({}, []);
  assert.deepEqual(document.paths, {});
  assert.deepEqual(document.tags, []);
  assert.equal(document.info.version, '0');
  assert.ok(document.components.schemas.Problem);
});
