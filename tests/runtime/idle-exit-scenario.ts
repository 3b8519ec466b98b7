/**
 * A cancelled shared timeout must not keep a process alive: the shared timer stops holding the
 * event loop once no timeout is pending. Each runtime's test file says how its executable runs a
 * TypeScript file.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Runs the child through `launcher`; it must print `idle` and exit well before 120 s. */
export async function assertIdleProcessExits(launcher: readonly string[]): Promise<void> {
  const [command, ...flags] = launcher;
  const outcome = await new Promise<{ stdout: string; stderr: string; killed: boolean }>(
    (resolve) => {
      execFile(
        command,
        [...flags, 'tests/runtime/idle-exit-child.ts'],
        // A quarter of the cancelled timeout: a held process is killed here, and fails below.
        { cwd: root, timeout: 30_000 },
        (error, stdout, stderr) => resolve({ stdout, stderr, killed: error?.killed === true }),
      );
    },
  );
  assert.equal(outcome.killed, false, 'the child was still running 30 s after it went idle');
  assert.equal(outcome.stdout.trim(), 'idle', outcome.stderr);
}
