// The `npm start` demo: its tour in-process (every step as expected), `npm start` with
// DEMO_EXIT_AFTER_TOUR=1 end to end, and a clean exit on SIGINT while it serves.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startDemo } from '../../../examples/demo-deployment.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const BOUND = { timeout: 90_000 };

interface Finished {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Collects a child's output until it exits; kills it if it outlives `limitMs`. */
function finished(child: ChildProcess, limitMs: number): Promise<Finished> {
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk) => (stdout += chunk));
  child.stderr?.on('data', (chunk) => (stderr += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), limitMs);
  return new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

test('the demo tour succeeds at every step, on loopback servers', BOUND, async () => {
  const demo = await startDemo();
  try {
    for (const url of Object.values(demo.urls)) {
      assert.match(url, /^http:\/\/127\.0\.0\.1:\d+(\/openapi\.json|\/reference)?$/);
    }
    const steps = await demo.runTour();
    assert.equal(steps.length, 11);
    for (const step of steps) assert.ok(step.ok, `${step.title}: ${step.details.join('; ')}`);
    const text = steps.map((step) => step.details.join('\n'));
    assert.match(text[0], /sub=billing aud=orders scp=\["orders.read"\] spa=service/);
    assert.doesNotMatch(text[0], /cnf/);
    assert.match(text[1], /sub=shipping .*spa=service\ncnf\.jkt=[A-Za-z0-9_-]{43}$/);
    assert.match(text[3], /reserved=true, streamed 3 updates/);
    assert.match(text[4], /brokered by demo-plane/);
    assert.match(text[5], /"brokeredBy":"demo-plane","onBehalfOf":"demo-user"/);
    assert.ok(text[5].includes(demo.rest.curl), 'the tour prints the curl line');
    assert.ok(text[5].includes(`${demo.urls.plane}/openapi.json`));
    assert.match(text[6], /401, WWW-Authenticate: Bearer realm="svcplane-demo"/);
    assert.match(text[6], /422 application\/problem\+json .*"issues":\[/);
    assert.match(text[7], /^broker http:\/\/127\.0\.0\.1:\d+\/rpc: \d+ items for demo-plane\n/);
    assert.match(text[7], /streamed 2 updates through the broker/);
    assert.equal(text[8], 'refused: code=capability_auth status=403 reason=ingress_required');
    assert.match(text[9], /^tools: orders_list, orders_watch\n/);
    assert.match(text[9], /orders_list: 2 items in stock, served to demo-plane$/m);
    assert.match(text[9], /orders_watch: 3 items, 3 progress notifications/);
    assert.equal(text[10], 'refused: code=capability_auth status=403 reason=missing_scope');
    // The printed curl line is what a user pastes: the same request, answered the same way.
    const curl = /^curl -s -H 'Authorization: Bearer ([\w-]+)' (http:\/\/\S+)$/.exec(
      demo.rest.curl,
    );
    assert.ok(curl !== null, demo.rest.curl);
    const pasted = await fetch(curl[2], { headers: { Authorization: `Bearer ${curl[1]}` } });
    assert.equal(pasted.status, 200);
    assert.equal((await pasted.json()).account, 'acme');
  } finally {
    await demo.close();
  }
});

test('npm start with DEMO_EXIT_AFTER_TOUR=1 prints the tour and exits 0', BOUND, async () => {
  const child = spawn('npm', ['start', '--silent'], {
    cwd: root,
    env: { ...process.env, DEMO_EXIT_AFTER_TOUR: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const result = await finished(child, 80_000);
  assert.equal(result.code, 0, result.stderr || result.stdout);
  assert.match(result.stdout, /control plane\s+http:\/\/127\.0\.0\.1:\d+/);
  assert.equal((result.stdout.match(/^OK /gm) ?? []).length, 11, result.stdout);
  assert.match(result.stdout, /RPC broker\s+http:\/\/127\.0\.0\.1:\d+\/rpc/);
  assert.doesNotMatch(result.stdout, /FAILED/);
  assert.match(result.stdout, /tour: all 11 steps OK/);
  assert.match(result.stdout, /OpenAPI 3\.2\s+http:\/\/127\.0\.0\.1:\d+\/openapi\.json/);
  assert.match(result.stdout, /API reference\s+http:\/\/127\.0\.0\.1:\d+\/reference\n/);
  // One line per door before the tour, the REST one a curl command to paste.
  const doors = result.stdout.slice(0, result.stdout.indexOf('OK '));
  for (
    const door of [
      'JWKS',
      'token endpoint',
      'REST',
      'OpenAPI 3.2',
      'API reference',
      'MCP endpoint',
      'RPC broker',
    ]
  ) {
    assert.match(doors, new RegExp(`^ {4}${door}\\s+\\S`, 'm'), door);
  }
  assert.match(
    doors,
    /REST\s+curl -s -H 'Authorization: Bearer [\w-]+' http:\/\/127\.0\.0\.1:\d+\//,
  );
});

test('the demo keeps serving after the tour and exits 0 on SIGINT', BOUND, async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', 'examples/demo.ts'], {
    cwd: root,
    env: { ...process.env, DEMO_EXIT_AFTER_TOUR: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exit = finished(child, 80_000);
  let output = '';
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (chunk) => {
      output += chunk;
      if (output.includes('serving until interrupted')) resolve();
    });
    child.on('exit', () => reject(new Error(`the demo exited early:\n${output}`)));
  });
  const plane = /control plane\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(output)?.[1];
  assert.ok(plane, output);
  const jwks = await fetch(`${plane}/.well-known/svc/jwks.json`);
  assert.equal(jwks.status, 200);
  assert.equal(((await jwks.json()) as { keys: unknown[] }).keys.length, 1);
  // The curl line printed before "serving until interrupted" works against the running demo.
  const curl = /curl -s -H 'Authorization: Bearer ([\w-]+)' (http:\/\/\S+)/.exec(output);
  assert.ok(curl !== null, output);
  const pasted = await fetch(curl[2], { headers: { Authorization: `Bearer ${curl[1]}` } });
  assert.equal(pasted.status, 200);
  assert.equal(((await pasted.json()) as { onBehalfOf: string }).onBehalfOf, 'demo-user');
  child.kill('SIGINT');
  const result = await exit;
  assert.equal(result.code, 0, result.stderr);
  await assert.rejects(fetch(`${plane}/.well-known/svc/jwks.json`));
});
