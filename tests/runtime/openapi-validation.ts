// The plane's OpenAPI document judged by two outside validators: `@seriousme/openapi-schema-validator`
// (the 3.2 schema) and `@scalar/openapi-parser` (semantics such as undeclared path parameters).
// Both compile schemas with `new Function` (and the first reads files), which workerd refuses, so
// Node, Deno and Bun run these from tests/runtime/<runtime>/; the generator's own tests run on
// all four runtimes.
import assert from 'node:assert/strict';
import { validate } from '@scalar/openapi-parser';
import { Validator } from '@seriousme/openapi-schema-validator';
import { createPlaneDeployment, PLANE_URL } from '../conformance/plane-fixture.ts';

// deno-lint-ignore no-explicit-any
type Json = any;

const SECURED_PLANE = {
  openapi: {
    security: [{ fixtureBearer: [] }],
    securitySchemes: { fixtureBearer: { type: 'http', scheme: 'bearer' } },
  },
  publicOrigin: 'https://api.fixture.test',
};

async function planeDocument(plane: Record<string, unknown>): Promise<Json> {
  const fx = await createPlaneDeployment({ restService: true, plane });
  const response = await fx.plane.fetch(new Request(`${PLANE_URL}/openapi.json`));
  assert.equal(response.status, 200);
  return await response.json();
}

/**
 * The document of a plane with the REST-rich catalog (every REST method including QUERY, path
 * variables, statuses 201 and 204) validates, without and with `openapi.security` and
 * `publicOrigin`; and the validator refuses a QUERY misplaced in `additionalOperations`.
 */
export async function schemaValidatorAcceptsPlaneDocuments(): Promise<void> {
  for (const plane of [{}, SECURED_PLANE]) {
    const document = await planeDocument(plane);
    const result = await new Validator().validate(document);
    assert.deepEqual(result, { valid: true }, JSON.stringify(result.errors));
  }
  const broken = await planeDocument({});
  broken.paths['/notes/search'].additionalOperations = {
    QUERY: broken.paths['/notes/search'].query,
  };
  assert.equal((await new Validator().validate(broken)).valid, false);
}

/**
 * The same documents pass the semantic validator, which (the control shows) does refuse an
 * operation whose path variable has no declared parameter.
 */
export async function semanticValidatorAcceptsPlaneDocuments(): Promise<void> {
  for (const plane of [{}, SECURED_PLANE]) {
    const result = await validate(await planeDocument(plane));
    assert.equal(result.valid, true, JSON.stringify(result.errors));
  }
  const missing = await planeDocument({});
  missing.paths['/notes/{noteId}'].get.parameters = [];
  assert.equal((await validate(missing)).valid, false, 'a missing path parameter is refused');
}
