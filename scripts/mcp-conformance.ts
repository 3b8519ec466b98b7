// Runs the official MCP conformance suite (server mode) against a real control plane serving the
// conformance fixtures of `svcplane/testing` through a real service, on 127.0.0.1. The suite
// needs Node ≥ 22 (`fs.globSync`), so it runs under the Bun the devDependencies bring, which has
// it; a Node 22 binary from npm would shadow `node` for every npm script. Exits non-zero
// on any failure outside tests/mcp-conformance-baseline.yaml (and on a stale baseline entry), and
// prints the suite's totals.
//
//   node_modules/.bin/tsx scripts/mcp-conformance.ts [--scenario NAME]
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { serveNode } from '../src/adapters/node.ts';
import { createMcpConformancePlane } from '../src/testing/mcp-conformance.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const BUN = `${root}node_modules/.bin/bun`;
const SUITE = `${root}node_modules/@modelcontextprotocol/conformance/dist/index.js`;
const BASELINE = `${root}tests/mcp-conformance-baseline.yaml`;
const SUITE_TIMEOUT_MS = 300_000;

const plane = await createMcpConformancePlane();
const server = await serveNode(plane, { hostname: '127.0.0.1', port: 0 });
const url = `${server.url}/mcp`;
const scenario = process.argv.indexOf('--scenario');
const args = [SUITE, 'server', '--url', url, '--suite', 'all', '--expected-failures', BASELINE];
if (scenario !== -1) args.push('--scenario', process.argv[scenario + 1]);

let output = '';
const child = spawn(BUN, args, { stdio: ['ignore', 'pipe', 'pipe'], cwd: root });
child.stdout.on('data', (chunk) => (output += chunk));
child.stderr.on('data', (chunk) => (output += chunk));
const timer = setTimeout(() => child.kill('SIGTERM'), SUITE_TIMEOUT_MS);
const code = await new Promise<number>((resolve) => child.on('close', (c) => resolve(c ?? 1)));
clearTimeout(timer);
await server.close();

const verbose = process.argv.includes('--verbose') || code !== 0;
// The suite's `Total: N passed, M failed` counts baselined scenarios as failed; said in other
// words so a reader (or CI) does not take it for a test run that failed.
const lines = output.split('\n').map((line) =>
  line.replace(
    /^Total: (\d+) passed, (\d+) failed$/,
    'scenarios: $1 passing, $2 not passing (each must be in the baseline)',
  )
);
const summary = lines.findIndex((line) => line.includes('=== SUMMARY ==='));
process.stdout.write(
  verbose ? output : `${lines.slice(summary === -1 ? 0 : summary).join('\n')}\n`,
);
console.log(`MCP conformance (${url}): ${code === 0 ? 'ok' : 'FAILED'} (exit ${code})`);
process.exit(code);
