/**
 * Swagger UI's files for the plane's reference page (`openapi.reference.assets`), read from the
 * installed `swagger-ui-dist` package with `node:fs`: Node, Bun, and Deno when svcplane itself
 * sits in `node_modules` (a module loaded from JSR has no file to resolve from). Elsewhere, and on
 * Workers, the two files are passed to the plane as they are.
 *
 * @module
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { SvcConfigurationError } from '../core/errors.ts';
import type { ReferenceAssetFiles } from '../plane/reference/reference-option.ts';

/** The package the files come from: an optional peer dependency, installed by whoever serves the page. */
const SWAGGER_UI_PACKAGE = 'swagger-ui-dist';

async function readPackageFile(name: keyof ReferenceAssetFiles): Promise<Uint8Array> {
  const specifier = `${SWAGGER_UI_PACKAGE}/${name}`;
  let path: string;
  try {
    // `require.resolve` finds the package from this module, wherever it is installed.
    path = createRequire(import.meta.url).resolve(specifier);
  } catch (error) {
    throw new SvcConfigurationError(
      `swaggerUiAssets: cannot find ${specifier} (${(error as Error).message}); install ` +
        `${SWAGGER_UI_PACKAGE}, or pass the files as openapi.reference.assets`,
      { reason: 'invalid_openapi' },
    );
  }
  const bytes = await readFile(path);
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * The asset source of the plane's API reference page: `openapi: { reference: { assets:
 * swaggerUiAssets() } }`. The files are read when the page first asks for them; a missing
 * package rejects with `SvcConfigurationError` naming it.
 */
export function swaggerUiAssets(): () => Promise<ReferenceAssetFiles> {
  return async () => {
    const [bundle, css] = await Promise.all([
      readPackageFile('swagger-ui-bundle.js'),
      readPackageFile('swagger-ui.css'),
    ]);
    return { 'swagger-ui-bundle.js': bundle, 'swagger-ui.css': css };
  };
}
