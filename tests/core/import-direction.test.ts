// DESIGN.md "Style": imports run one way (core <- service <- caller <- plane <- adapters, cli on
// top, testing free), runtime APIs stay in adapters and cli, and no import closes a circle. The
// first test reads every file under src/; the others show the checker names what it must.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { directionProblems, importCircles, importsOf } from '../support/import-rules.ts';

type FileSystem = typeof import('node:fs/promises');

// Taken from the runtime rather than imported: the workerd bundle of this file must not need
// a module it does not have.
const fileSystem = (globalThis as {
  process?: { getBuiltinModule?: (id: string) => unknown };
}).process?.getBuiltinModule?.('node:fs/promises') as FileSystem | undefined;

// workerd runs a bundle of this file: the sources are not on any file system it can read.
const inWorkerd = (globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent ===
  'Cloudflare-Workers';

async function readSources(fs: FileSystem): Promise<Map<string, string>> {
  const root = new URL('../../src/', import.meta.url);
  const files = new Map<string, string>();
  const walk = async (relative: string): Promise<void> => {
    const entries = await fs.readdir(new URL(relative, root), { withFileTypes: true });
    for (const entry of entries) {
      const path = `${relative}${entry.name}`;
      if (entry.isDirectory()) await walk(`${path}/`);
      else if (path.endsWith('.ts')) {
        files.set(path, await fs.readFile(new URL(path, root), 'utf8'));
      }
    }
  };
  await walk('');
  return files;
}

test('every import under src/ runs one way and none closes a circle', {
  skip: inWorkerd || fileSystem === undefined
    ? 'no file system holding the sources in this runtime'
    : false,
}, async () => {
  const files = await readSources(fileSystem!);
  assert.ok(files.size > 50, `read only ${files.size} source files`);
  assert.ok(files.has('caller/ability-session.ts') && files.has('core/errors.ts'));
  assert.deepEqual(directionProblems(files), []);
  assert.deepEqual(importCircles(files), []);
});

test('an import against the direction is named with its file and specifier', () => {
  const files = new Map([
    ['core/a.ts', "import { b } from '../service/b.ts';\nexport const a = b;\n"],
    ['service/b.ts', "export { c } from '../caller/c.ts';\nexport const b = 1;\n"],
    ['caller/c.ts', "import type { P } from '../plane/p.ts';\nexport const c = 1;\n"],
    ['plane/p.ts', "import { x } from '../adapters/x.ts';\nexport type P = 1;\n"],
    ['adapters/x.ts', "import { readFile } from 'node:fs';\nexport const x = Deno.env;\n"],
    ['cli/main.ts', "import { x } from '../adapters/x.ts';\nimport '../testing/t.ts';\n"],
    ['testing/t.ts', "import { main } from '../cli/main.ts';\n"],
  ]);
  assert.deepEqual(directionProblems(files), [
    'src/core/a.ts imports ../service/b.ts: core may not import service ' +
    '(imports run core <- service <- caller <- plane <- adapters <- cli)',
    'src/service/b.ts imports ../caller/c.ts: service may not import caller ' +
    '(imports run core <- service <- caller <- plane <- adapters <- cli)',
    'src/caller/c.ts imports ../plane/p.ts: caller may not import plane ' +
    '(imports run core <- service <- caller <- plane <- adapters <- cli)',
    'src/plane/p.ts imports ../adapters/x.ts: plane may not import adapters ' +
    '(imports run core <- service <- caller <- plane <- adapters <- cli)',
    'src/cli/main.ts imports ../testing/t.ts: only tests use src/testing',
  ]);
});

test('runtime modules and runtime globals outside adapters and cli are named; comments are not', () => {
  const files = new Map([
    ['service/s.ts', "import { readFile } from 'node:fs/promises';\n// Deno.serve is fine here\n"],
    ['core/c.ts', "/** See Bun.serve. */\nexport const x = () => Bun.file('a');\n"],
    ['plane/p.ts', "const url = 'http://x//Deno.y';\nexport const d = Deno.env.get('A');\n"],
    ['adapters/a.ts', "import http from 'node:http';\nexport const b = Bun.serve;\n"],
  ]);
  assert.deepEqual(directionProblems(files), [
    'src/service/s.ts imports node:fs/promises: runtime modules belong in adapters or cli',
    'src/core/c.ts uses Bun.*: runtime APIs belong in adapters or cli',
    'src/plane/p.ts uses Deno.*: runtime APIs belong in adapters or cli',
    'src/plane/p.ts uses Deno.*: runtime APIs belong in adapters or cli',
  ]);
});

test('an import circle is reported once, as the path that closes it, type-only imports included', () => {
  const files = new Map([
    ['plane/catalog.ts', "import { e } from './endpoints.ts';\n"],
    ['plane/endpoints.ts', "import { g } from './grants.ts';\n"],
    ['plane/grants.ts', "import type { R } from './catalog.ts';\n"],
    ['service/ability.ts', "import type {\n  T,\n} from './types.ts';\n"],
    ['service/types.ts', "import type { A } from './ability.ts';\n"],
    ['core/self.ts', "export * from './self.ts';\n"],
    ['core/leaf.ts', "import { x } from './errors.ts';\n"],
    ['core/errors.ts', 'export const x = 1;\n'],
  ]);
  assert.deepEqual(importCircles(files), [
    'src/core/self.ts -> src/core/self.ts',
    'src/plane/catalog.ts -> src/plane/endpoints.ts -> src/plane/grants.ts -> src/plane/catalog.ts',
    'src/service/ability.ts -> src/service/types.ts -> src/service/ability.ts',
  ]);
});

test('imports are read from every form: multi-line, re-export, side effect, dynamic, type-only', () => {
  const text = [
    "import {\n  a,\n  type B,\n} from './a.ts';",
    "import type { C } from './c.ts';",
    "export { d } from './d.ts';",
    "export type { E } from './e.ts';",
    "export * from './f.ts';",
    "import './g.ts';",
    "const h = await import('./h.ts');",
    "// import { no } from './comment.ts';",
    "/* export { no } from './block.ts'; */",
    'const s = "import { no } from \'./string.ts\'";',
  ].join('\n');
  assert.deepEqual(importsOf(text), [
    { specifier: './a.ts', typeOnly: false },
    { specifier: './c.ts', typeOnly: true },
    { specifier: './d.ts', typeOnly: false },
    { specifier: './e.ts', typeOnly: true },
    { specifier: './f.ts', typeOnly: false },
    { specifier: './g.ts', typeOnly: false },
    { specifier: './h.ts', typeOnly: false },
  ]);
});
