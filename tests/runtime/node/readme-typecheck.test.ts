// Every `ts` block of the README type-checks against the package's own sources (`svcplane` and
// its subpaths map to them, as tsconfig.json's paths say), so the README cannot drift from the
// code. A block whose first line is `// <name>.ts` is written under that name, so later blocks can
// import it as the README shows.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/** The README's `ts` blocks, each with the file name it is written under. */
function tsBlocks(readme: string): { name: string; code: string }[] {
  const blocks = [...readme.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((match) => match[1]);
  return blocks.map((code, index) => {
    const named = /^\/\/ ([\w.-]+\.ts)\n/.exec(code);
    return { name: named?.[1] ?? `block-${index + 1}.ts`, code };
  });
}

test('every ts block of README.md type-checks', { timeout: 240_000 }, async () => {
  const blocks = tsBlocks(await readFile(path.join(root, 'README.md'), 'utf8'));
  assert.ok(blocks.length >= 6, `found only ${blocks.length} ts blocks`);
  const names = blocks.map((block) => block.name);
  assert.equal(new Set(names).size, names.length, `two blocks share a file name: ${names}`);
  // Inside the repository, so the blocks resolve zod and the other packages as a user's would.
  const dir = path.join(root, '.tmp', `readme-blocks-${process.pid}`);
  await mkdir(dir, { recursive: true });
  try {
    for (const block of blocks) await writeFile(path.join(dir, block.name), block.code);
    await writeFile(
      path.join(dir, 'tsconfig.json'),
      JSON.stringify({
        extends: '../../tsconfig.json',
        // A snippet may define what it does not use (a plane shown, not served).
        compilerOptions: { noUnusedLocals: false },
        include: ['*.ts'],
      }),
    );
    const result = await new Promise<{ code: number; output: string }>((resolve) => {
      execFile(
        process.execPath,
        [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', path.join(dir, 'tsconfig.json')],
        { cwd: root, timeout: 200_000 },
        (error, stdout, stderr) =>
          resolve({ code: error ? Number(error.code ?? 1) : 0, output: stdout + stderr }),
      );
    });
    assert.equal(result.code, 0, result.output);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
