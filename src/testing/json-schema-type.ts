/**
 * A schema written directly as JSON Schema (draft 2020-12) that implements both the Standard
 * Schema and the Standard JSON Schema contracts, validating with `@cfworker/json-schema` (which
 * runs on every runtime, workerd included). For fixtures whose published schema must be exact
 * (`$schema`, `$defs`, `additionalProperties`), and for tests that need no schema library.
 *
 * @module
 */
import { Validator } from '@cfworker/json-schema';
import type { JsonSchema } from '../core/schema.ts';

/** A Standard Schema whose value type is `T`, published as the given JSON Schema. */
export interface JsonSchemaType<T> {
  readonly '~standard': {
    readonly version: 1;
    readonly vendor: 'svcplane-json-schema';
    validate(value: unknown): { value: T } | { issues: { message: string; path?: string[] }[] };
    readonly jsonSchema: {
      input(options?: unknown): JsonSchema;
      output(options?: unknown): JsonSchema;
    };
    readonly types?: { readonly input: T; readonly output: T };
  };
}

function pathOf(instanceLocation: string): string[] | undefined {
  const segments = instanceLocation.replace(/^#\/?/, '').split('/').filter((s) => s !== '');
  return segments.length === 0
    ? undefined
    : segments.map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** Wraps a JSON Schema (draft 2020-12) as a schema a method definition accepts. */
export function jsonSchemaType<T = unknown>(schema: JsonSchema): JsonSchemaType<T> {
  const published = structuredClone(schema);
  const validator = new Validator(published as never, '2020-12', false);
  return {
    '~standard': {
      version: 1,
      vendor: 'svcplane-json-schema',
      validate(value: unknown) {
        const result = validator.validate(value);
        if (result.valid) return { value: value as T };
        return {
          issues: result.errors.slice(0, 1).map((error) => {
            const path = pathOf(error.instanceLocation);
            return { message: error.error, ...(path !== undefined ? { path } : {}) };
          }),
        };
      },
      jsonSchema: {
        input: () => structuredClone(published),
        output: () => structuredClone(published),
      },
    },
  };
}
