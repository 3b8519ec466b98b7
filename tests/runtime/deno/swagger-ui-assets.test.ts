// swaggerUiAssets() from the Deno adapter reads the installed swagger-ui-dist and the plane serves it.
import { test } from 'node:test';
import { swaggerUiAssets } from '../../../src/adapters/deno.ts';
import { assertSwaggerUiAssetsRead } from '../swagger-ui-assets-scenario.ts';

test('swaggerUiAssets on Deno: the installed Swagger UI files, served by the plane as they are', {
  timeout: 60_000,
}, () => assertSwaggerUiAssetsRead(swaggerUiAssets));
