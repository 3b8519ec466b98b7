import { test } from 'node:test';
import {
  schemaValidatorAcceptsPlaneDocuments,
  semanticValidatorAcceptsPlaneDocuments,
} from '../openapi-validation.ts';

test(
  'the schema validator (@seriousme/openapi-schema-validator) accepts the plane document, with and without openapi.security',
  schemaValidatorAcceptsPlaneDocuments,
);

test(
  'the semantic validator (@scalar/openapi-parser) accepts the plane document: every path parameter declared',
  semanticValidatorAcceptsPlaneDocuments,
);
