import { defineConfig } from 'tsup';

export default defineConfig({
  entry: [
    'mod.ts',
    'src/service/mod.ts',
    'src/caller/mod.ts',
    'src/plane/mod.ts',
    'src/adapters/node.ts',
    'src/adapters/bun.ts',
    'src/adapters/deno.ts',
    'src/adapters/workers.ts',
    'src/testing/mod.ts',
    // The `svcplane` command (package.json `bin`); its shebang line is kept.
    'src/cli/main.ts',
  ].filter((entry) => entry === 'mod.ts' || existsSync(entry)),
  format: ['esm'],
  dts: { compilerOptions: { ignoreDeprecations: '6.0' } },
  clean: true,
  target: 'es2022',
  platform: 'neutral',
  outDir: 'dist',
  splitting: true,
  // Node built-ins stay `node:` imports: Deno resolves them only under those names.
  external: ['ws', '@hono/node-server', 'cloudflare:workers', /^node:/],
  removeNodeProtocol: false,
});

import { existsSync } from 'node:fs';
