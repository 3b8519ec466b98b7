/**
 * Runs the quick start the way a new user meets it: from the packed tarball (the built `dist/`,
 * after `npm run build`), in an empty project, on Node 20, Deno and Bun.
 *
 * In a temporary directory: `npm pack`, `npm init -y`, `"type": "module"`, the tarball installed
 * with the packages the README tells users to add (zod, typescript, @types/node, at this
 * repository's versions so a new release elsewhere cannot fail the check), the README's
 * `tsconfig.json` (read from the README, so the two cannot drift) and `examples/quickstart/*`.
 * Then `npx tsc` of those and of the README's own quick start blocks; the compiled plane, service and caller on Node (the caller must exit 0 by
 * itself with the service's answer); the same `.ts` sources with `deno run -A` and `bun`;
 * `npx svcplane keygen --kid`, `npx svcplane token request` against the running plane, and
 * `npx svcplane token inspect` of that token against the plane's JWKS.
 *
 * Servers listen on 127.0.0.1 on free ports; every child is bounded in time and stopped by its
 * pid; the temporary directory is removed at the end. Exits non-zero naming the failed step.
 */
import { spawn } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';

const root = new URL('..', import.meta.url).pathname;
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const bin = join(root, 'node_modules', '.bin');
const STEP_TIMEOUT_MS = 180_000;
const SERVER_START_MS = 60_000;
const BILLING_SECRET = 'a-shared-secret-of-32-characters-or-more';
const ANSWER = /hello billing/;

/** Packages the README tells users to add next to svcplane, at this repository's versions. */
const USER_PACKAGES = ['zod', 'typescript', '@types/node'].map((name) => {
  const version = manifest.devDependencies?.[name] ?? manifest.dependencies?.[name];
  if (version === undefined) throw new Error(`package.json lists no version of ${name}`);
  return `${name}@${version}`;
});

const children = new Set();
const work = mkdtempSync(join(tmpdir(), 'svcplane-quickstart-'));
const app = join(work, 'app');

function cleanUp() {
  for (const child of children) child.kill();
  rmSync(work, { recursive: true, force: true });
}
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    cleanUp();
    process.exit(130);
  });
}

/** Runs a command to its end; resolves with its output, rejects on a non-zero exit or timeout. */
function run(command, args, options = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd ?? app,
      env: { ...process.env, ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const timer = setTimeout(() => child.kill(), options.timeoutMs ?? STEP_TIMEOUT_MS);
    child.once('error', reject);
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      children.delete(child);
      if (code === 0) resolve({ stdout, stderr });
      else {
        const how = signal === null ? `exit ${code}` : `${signal} (timed out?)`;
        reject(new Error(`${command} ${args.join(' ')}: ${how}\n${stdout}${stderr}`));
      }
    });
  });
}

/** Starts a server and resolves once its output matches `ready`; it is stopped by `cleanUp`. */
function start(command, args, env, ready) {
  const child = spawn(command, args, {
    cwd: app,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`${args.join(' ')} did not start: ${output}`));
    }, SERVER_START_MS);
    const read = (chunk) => {
      output += chunk;
      if (ready.test(output)) {
        clearTimeout(timer);
        resolve(child);
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.once('exit', (code) => {
      clearTimeout(timer);
      children.delete(child);
      reject(new Error(`${args.join(' ')} exited with ${code}: ${output}`));
    });
  });
}

function stop(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.removeAllListeners('exit');
    child.once('exit', () => resolve());
    child.kill();
  }).finally(() => children.delete(child));
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** The `tsconfig.json` block of the README's quick start. */
function readmeTsconfig() {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const block = /```json\n(\{\n\s*"compilerOptions"[\s\S]*?)```/.exec(readme);
  if (block === null) throw new Error('README.md shows no tsconfig.json block (```json)');
  return block[1];
}

let stepStarted = Date.now();
function step(name) {
  const now = Date.now();
  console.log(`quickstart: ${name} (${((now - stepStarted) / 1000).toFixed(1)} s after the last)`);
  stepStarted = now;
}

/** The README's quick start blocks (`// plane.ts`, `// service.ts`, `// caller.ts`), by name. */
function readmeQuickstartBlocks() {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const blocks = new Map();
  for (
    const [, name, code] of readme.matchAll(
      /^```ts\n\/\/ (plane|service|caller)\.ts\n([\s\S]*?)^```$/gm,
    )
  ) {
    const file = `${name}.ts`;
    if (!blocks.has(file)) blocks.set(file, code);
  }
  if (blocks.size !== 3) throw new Error('README.md shows no plane.ts, service.ts and caller.ts');
  return blocks;
}

/** Plane, service, then caller with one runtime; returns the caller's output. */
async function runQuickstart(label, command, prefix, directory, extension, env) {
  const ports = { PLANE_URL: await freePort(), NOTES_URL: await freePort() };
  const urls = Object.fromEntries(
    Object.entries(ports).map(([name, port]) => [name, `http://127.0.0.1:${port}`]),
  );
  const withUrls = { ...env, ...urls };
  const file = (name) => join(directory, `${name}.${extension}`);
  const servers = [];
  try {
    servers.push(await start(command, [...prefix, file('plane')], withUrls, /plane on http/));
    servers.push(await start(command, [...prefix, file('service')], withUrls, /notes on http/));
    const caller = await run(command, [...prefix, file('caller')], {
      env: withUrls,
      timeoutMs: 60_000,
    });
    if (!ANSWER.test(caller.stdout)) {
      throw new Error(`${label}: the caller printed no answer:\n${caller.stdout}${caller.stderr}`);
    }
    return { caller, planeUrl: urls.PLANE_URL, servers };
  } catch (error) {
    await Promise.all(servers.map(stop));
    throw error;
  }
}

async function main() {
  if (!existsSync(join(root, 'dist', 'mod.js'))) {
    throw new Error('dist/ is not built: run `npm run build` first');
  }
  // `--ignore-scripts`: prepack would build again; dist/ is what this run checks.
  await run('npm', ['pack', '--ignore-scripts', '--pack-destination', work], { cwd: root });
  const tarball = readdirSync(work).find((name) => name.endsWith('.tgz'));
  step(`packed ${tarball}`);
  mkdirSync(app);
  await run('npm', ['init', '-y']);
  await run('npm', ['pkg', 'set', 'type=module']);
  await run('npm', ['install', '--no-audit', '--no-fund', join(work, tarball), ...USER_PACKAGES]);
  step(`installed the tarball with ${USER_PACKAGES.join(', ')}`);
  writeFileSync(join(app, 'tsconfig.json'), readmeTsconfig());
  const sources = readdirSync(join(root, 'examples', 'quickstart')).filter((name) =>
    name.endsWith('.ts')
  );
  for (const name of sources) {
    copyFileSync(join(root, 'examples', 'quickstart', name), join(app, name));
  }
  await run('npx', ['tsc']);
  step(`tsc compiled ${sources.join(', ')} with the README's tsconfig.json`);
  // The README's own blocks listen on fixed ports, so they are compiled, not run.
  const readmeDir = join(app, 'readme');
  mkdirSync(readmeDir);
  for (const [name, code] of readmeQuickstartBlocks()) writeFileSync(join(readmeDir, name), code);
  writeFileSync(
    join(readmeDir, 'tsconfig.json'),
    JSON.stringify({
      extends: '../tsconfig.json',
      compilerOptions: { noEmit: true },
      include: ['*.ts'],
    }),
  );
  await run('npx', ['tsc', '-p', readmeDir]);
  step("tsc compiled the README's plane.ts, service.ts and caller.ts");

  const human = await run('npx', ['svcplane', 'keygen', '--kid', 'x']);
  if (!/^SVC_SIGNING_KID='x'$/m.test(human.stdout)) {
    throw new Error(
      `npx svcplane keygen --kid x printed no SVC_SIGNING_KID line:\n${human.stdout}`,
    );
  }
  const keygen = JSON.parse(
    (await run('npx', ['svcplane', 'keygen', '--kid', 'x', '--json'])).stdout,
  );
  const env = { ...keygen.env, BILLING_SECRET };
  step('npx svcplane keygen --kid x');

  const outDir = JSON.parse(readmeTsconfig()).compilerOptions.outDir ?? '.';
  const node = await runQuickstart('node', process.execPath, [], outDir, 'js', env);
  step('node ran the compiled quick start');
  try {
    const requested = await run('npx', [
      'svcplane',
      'token',
      'request',
      '--caller',
      'billing',
      '--target',
      'notes',
      '--ability',
      'notes.store',
      '--scope',
      'notes.read',
      '--plane',
      node.planeUrl,
      '--client-id',
      'billing',
      '--client-secret',
      BILLING_SECRET,
      '--json',
    ]);
    const { token } = JSON.parse(requested.stdout);
    const inspected = await run('npx', [
      'svcplane',
      'token',
      'inspect',
      token,
      '--jwks',
      `${node.planeUrl}/.well-known/svc/jwks.json`,
    ]);
    if (!/^verdict\s+valid/m.test(inspected.stdout)) {
      throw new Error(`npx svcplane token inspect gave no valid verdict:\n${inspected.stdout}`);
    }
    step('npx svcplane token request and token inspect (valid against the JWKS)');
  } finally {
    await Promise.all(node.servers.map(stop));
  }
  for (
    const [label, command, prefix] of [
      ['deno', join(bin, 'deno'), ['run', '-A']],
      ['bun', join(bin, 'bun'), []],
    ]
  ) {
    const result = await runQuickstart(label, command, prefix, '.', 'ts', env);
    await Promise.all(result.servers.map(stop));
    step(`${label} ran the quick start's sources`);
  }
}

const began = Date.now();
try {
  await main();
  console.log(`quickstart check: passed in ${((Date.now() - began) / 1000).toFixed(1)} s`);
} catch (error) {
  console.error(`quickstart check failed: ${error instanceof Error ? error.message : error}`);
  process.exitCode = 1;
} finally {
  cleanUp();
}
