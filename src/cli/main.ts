#!/usr/bin/env node
/**
 * The `svcplane` executable (`npx svcplane`, `deno run -A jsr:@svcplane/svcplane/cli`). Run
 * `svcplane --help` for the commands and exit codes.
 *
 * @module
 */
import process from 'node:process';
import { runCli } from './run.ts';

const code = await runCli(process.argv.slice(2));
process.exitCode = code;
// Whatever a command left open (a socket still closing) must not hold the process: its output
// is written by now. Unreferenced, so an idle process still ends at once.
setTimeout(() => process.exit(code), 2_000).unref?.();
