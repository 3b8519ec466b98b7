#!/usr/bin/env node
// Runs the whole suite on Node, Deno, Bun and workerd and prints one `N passed, N failed` line per
// runtime and a total. Exits non-zero when any runtime has a failure or ran no test.
//
// Usage: node scripts/test-all.mjs --help
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { runInWorkerd } from './workerd/run-tests.mjs';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const bin = (name) => path.join(root, 'node_modules', '.bin', name);
const ALL_RUNTIMES = ['node', 'deno', 'bun', 'workerd'];

const USAGE = `Usage: node scripts/test-all.mjs [options] [filter...]

Runs the test suite on each runtime and prints one summary line per runtime, then the total
\`N passed, N failed\`. Exits 1 when a runtime has a failure or runs no test, 2 on a usage error.

Options:
  --runtime <list>  comma-separated runtimes to run (default: ${ALL_RUNTIMES.join(',')})
  --verbose         print every runtime's full output, not only a failing one's
  --help, -h        print this help and exit

Filters: test files whose path contains any of the given substrings
  (e.g. tests/caller or ability-session); tests/runtime/<name>/ runs only on <name>.
`;

/** Refuses a command line the runner cannot follow: the message, then the usage, exit 2. */
function refuseUsage(message) {
  console.error(`${message}\n\n${USAGE}`);
  process.exit(2);
}

function parseArgs(argv) {
  const options = { runtimes: ALL_RUNTIMES, filters: [], verbose: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--help' || arg === '-h') {
      console.log(USAGE);
      process.exit(0);
    } else if (arg === '--runtime') {
      const list = argv[++i];
      if (list === undefined || list.startsWith('-')) {
        refuseUsage(`--runtime needs a list: ${ALL_RUNTIMES.join(',')}`);
      }
      options.runtimes = list.split(',').filter((name) => name !== '');
      const unknown = options.runtimes.filter((name) => !ALL_RUNTIMES.includes(name));
      if (unknown.length > 0 || options.runtimes.length === 0) {
        refuseUsage(
          `Unknown runtime ${unknown.map((name) => `"${name}"`).join(', ') || '(none given)'}: ` +
            `the runtimes are ${ALL_RUNTIMES.join(', ')}`,
        );
      }
    } else if (arg === '--verbose') options.verbose = true;
    else if (arg.startsWith('-')) refuseUsage(`Unknown option ${arg}`);
    else options.filters.push(arg);
  }
  return options;
}

function listTests(dir) {
  const found = [];
  for (const name of readdirSync(dir)) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) found.push(...listTests(full));
    else if (name.endsWith('.test.ts')) found.push(path.relative(root, full));
  }
  return found.sort();
}

/** Shared tests run everywhere; tests/runtime/<name>/ run only for that runtime. */
function testsFor(runtime, all, filters) {
  return all.filter((file) => {
    const parts = file.split(path.sep);
    const runtimeDir = parts[1] === 'runtime' ? parts[2] : undefined;
    if (runtimeDir !== undefined && runtimeDir !== runtime) return false;
    return filters.length === 0 || filters.some((f) => file.includes(f));
  });
}

// Counts only agree across runtimes for flat test() calls, and a skip must say why.
function checkTestStyle(files) {
  const problems = [];
  for (const file of files) {
    const text = readFileSync(path.join(root, file), 'utf8');
    if (/\b(describe|it)\s*\(/.test(text)) problems.push(`${file}: use flat test() calls`);
    if (/\btest\.(skip|todo|only)\b|\bskip:\s*true\b|\btodo:/.test(text)) {
      problems.push(`${file}: a skip must be { skip: '<reason>' }`);
    }
    if (/\bt\.test\s*\(/.test(text)) problems.push(`${file}: no subtests`);
  }
  return problems;
}

function withoutColor(env) {
  const copy = { ...env, NO_COLOR: '1' };
  delete copy.FORCE_COLOR;
  return copy;
}

// deno colours some segments even with NO_COLOR when stdout is a pipe; strip escapes to parse.
// deno-lint-ignore no-control-regex
const stripAnsi = (text) => text.replace(/\u001b\[[0-9;]*m/g, '');

function run(command, args, { timeoutMs = 20 * 60_000 } = {}) {
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      cwd: root,
      env: withoutColor(process.env),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output: stripAnsi(output) });
    });
  });
}

const number = (output, pattern) => {
  const matches = [...output.matchAll(pattern)];
  return matches.length ? Number(matches[matches.length - 1][1]) : 0;
};

const runners = {
  async node(files) {
    const { code, output } = await run(process.execPath, [
      '--import',
      'tsx',
      '--test',
      '--test-reporter=tap',
      '--test-concurrency=2',
      ...files,
    ]);
    const failed = number(output, /^# fail (\d+)/gm) + number(output, /^# cancelled (\d+)/gm);
    return {
      passed: number(output, /^# pass (\d+)/gm),
      failed: failed || (code === 0 ? 0 : 1),
      skipped: number(output, /^# skipped (\d+)/gm),
      output,
    };
  },
  async deno(files) {
    const { code, output } = await run(bin('deno'), ['test', '-A', '--no-check', ...files]);
    const summary = output.match(
      /(?:ok|FAILED) \| (\d+) passed[^|]*\| (\d+) failed(?:[^|]*\| (\d+) ignored)?/,
    );
    const failed = summary ? Number(summary[2]) : 0;
    return {
      passed: summary ? Number(summary[1]) : 0,
      failed: failed || (code === 0 ? 0 : 1),
      skipped: summary?.[3] ? Number(summary[3]) : 0,
      output,
    };
  },
  async bun(files) {
    const { code, output } = await run(bin('bun'), [
      'test',
      '--timeout=60000',
      ...files.map((f) => `./${f}`),
    ]);
    const failed = number(output, /^\s*(\d+) fail$/gm);
    return {
      passed: number(output, /^\s*(\d+) pass$/gm),
      failed: failed || (code === 0 ? 0 : 1),
      skipped: number(output, /^\s*(\d+) skip$/gm),
      output,
    };
  },
  async workerd(files) {
    const shared = files.filter((f) => !f.startsWith(path.join('tests', 'runtime', 'workerd')));
    const hostDriven = files.filter((f) => f.startsWith(path.join('tests', 'runtime', 'workerd')));
    let passed = 0, failed = 0, skipped = 0, output = '';
    for (const file of shared) {
      for (const result of await runInWorkerd(file)) {
        if (result.status === 'passed') passed++;
        else if (result.status === 'skipped') {
          skipped++;
          output += `# SKIP ${file} :: ${result.name} — ${result.reason}\n`;
        } else {
          failed++;
          output += `not ok ${file} :: ${result.name}\n${result.error}\n`;
        }
      }
    }
    // Tests that start real workerd processes (sockets, bindings) are driven from Node.
    if (hostDriven.length) {
      const host = await runners.node(hostDriven);
      passed += host.passed;
      failed += host.failed;
      skipped += host.skipped;
      output += host.output;
    }
    return { passed, failed, skipped, output };
  },
};

const options = parseArgs(process.argv.slice(2));
const allTests = listTests(path.join(root, 'tests'));
const styleProblems = checkTestStyle(allTests);
if (styleProblems.length) {
  console.error(styleProblems.join('\n'));
  process.exit(1);
}

let totalPassed = 0, totalFailed = 0, bad = false;
for (const runtime of options.runtimes) {
  const files = testsFor(runtime, allTests, options.filters);
  const started = Date.now();
  const result = files.length
    ? await runners[runtime](files)
    : { passed: 0, failed: 0, skipped: 0, output: '' };
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  if (result.failed || options.verbose) process.stdout.write(result.output + '\n');
  for (const line of result.output.split('\n')) {
    if (/# SKIP/.test(line)) console.log(`[${runtime}] ${line.trim()}`);
  }
  const skipped = result.skipped ? `, ${result.skipped} skipped` : '';
  const line = `${runtime}: ${result.passed} passed, ${result.failed} failed${skipped}`;
  console.log(`${line}  (${files.length} files, ${seconds}s)`);
  totalPassed += result.passed;
  totalFailed += result.failed;
  if (result.failed || result.passed === 0) bad = true;
}
console.log(`${totalPassed} passed, ${totalFailed} failed`);
process.exit(bad ? 1 : 0);
