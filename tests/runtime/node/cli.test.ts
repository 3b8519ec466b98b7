// The `svcplane` command end to end: the real executable (src/cli/main.ts, as package.json's
// `bin` builds it) runs as a child process against the demo deployment — a real plane and real
// services on 127.0.0.1 — and is judged by its output and exit codes.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { type DemoDeployment, startDemo } from '../../../examples/demo-deployment.ts';
import { loadSigningAuthority } from '../../../src/plane/signing-keys.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const BOUND = { timeout: 60_000 };

interface Run {
  stdout: string;
  stderr: string;
  code: number;
}

function svcplane(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'src/cli/main.ts', ...args],
      { cwd: root, timeout: 30_000, env: { ...process.env, ...env } },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ stdout, stderr, code });
      },
    );
  });
}

let demo: DemoDeployment;
let scratch: string;

before(async () => {
  demo = await startDemo();
  scratch = await mkdtemp(path.join(tmpdir(), 'svcplane-cli-'));
});

after(async () => {
  await demo?.close();
  if (scratch !== undefined) await rm(scratch, { recursive: true, force: true });
});

function billingArgs(): string[] {
  const { clientId } = demo.callers.billing;
  return ['--plane', demo.urls.plane, '--client-id', clientId];
}

function billingEnv(): Record<string, string> {
  return { SVC_CLIENT_SECRET: demo.callers.billing.clientSecret };
}

async function billingToken(): Promise<string> {
  const run = await svcplane([
    'token',
    'request',
    '--caller',
    'billing',
    '--target',
    'orders',
    '--ability',
    'orders.catalog',
    '--scope',
    'orders.read',
    ...billingArgs(),
  ], billingEnv());
  assert.equal(run.code, 0, run.stderr);
  return run.stdout.trim();
}

test(
  'keygen prints an entry and env lines whose kids agree, and the entry loads as-is',
  BOUND,
  async () => {
    const run = await svcplane(['keygen', '--kid', 'k-test', '--json']);
    assert.equal(run.code, 0, run.stderr);
    const printed = JSON.parse(run.stdout);
    assert.equal(printed.kid, 'k-test');
    assert.equal(JSON.parse(printed.secret).kid, 'k-test');
    assert.deepEqual(printed.env, { SVC_SIGNING_KID: 'k-test', SVC_SIGNING_KEY: printed.secret });
    const authority = await loadSigningAuthority([{ kid: printed.kid, secret: printed.secret }]);
    assert.equal(authority.signer.kid, 'k-test');

    const human = await svcplane(['keygen']);
    assert.equal(human.code, 0, human.stderr);
    const kid = /^SVC_SIGNING_KID='([^']+)'$/m.exec(human.stdout)?.[1];
    const secret = /^SVC_SIGNING_KEY='([^']+)'$/m.exec(human.stdout)?.[1];
    assert.ok(kid !== undefined && secret !== undefined, human.stdout);
    // The README's plane reads exactly these two variables.
    assert.equal((await loadSigningAuthority([{ kid, secret }])).signer.kid, kid);
  },
);

test(
  'keygen --pem prints a PKCS#8 PEM secret; a bad option is a usage error (exit 2)',
  BOUND,
  async () => {
    const pem = await svcplane(['keygen', '--pem', '--json']);
    assert.equal(pem.code, 0, pem.stderr);
    const entry = JSON.parse(pem.stdout);
    assert.match(entry.secret, /^-----BEGIN PRIVATE KEY-----\n/);
    const loaded = await loadSigningAuthority([{ kid: entry.kid, secret: entry.secret }]);
    assert.equal(loaded.jwks.keys[0].kid, entry.kid);
    for (const args of [['keygen', '--bogus'], ['keygen', '--kid'], ['nonsense']]) {
      const run = await svcplane(args);
      assert.equal(run.code, 2, args.join(' '));
      assert.equal(run.stdout, '');
    }
  },
);

test(
  'jwks prints the public JWKS of the keys in the environment, private members left out',
  BOUND,
  async () => {
    const generated = JSON.parse((await svcplane(['keygen', '--kid', 'k-env', '--json'])).stdout);
    const run = await svcplane(['jwks'], generated.env);
    assert.equal(run.code, 0, run.stderr);
    const jwks = JSON.parse(run.stdout);
    assert.equal(jwks.keys.length, 1);
    assert.equal(jwks.keys[0].kid, 'k-env');
    assert.equal(jwks.keys[0].d, undefined);
    const broken = await svcplane(['jwks'], { SVC_SIGNING_KID: 'k-env', SVC_SIGNING_KEY: '{}' });
    assert.equal(broken.code, 3, broken.stderr);
    assert.match(broken.stderr, /configuration invalid_signing_keys/);
  },
);

test(
  'token request (HMAC) then token inspect: identity, expiry and a valid verdict from the JWKS',
  BOUND,
  async () => {
    const token = await billingToken();
    const run = await svcplane([
      'token',
      'inspect',
      token,
      '--jwks',
      demo.urls.plane,
      '--issuer',
      demo.urls.plane,
      '--audience',
      'orders',
      '--json',
    ]);
    assert.equal(run.code, 0, run.stderr);
    const inspected = JSON.parse(run.stdout);
    assert.equal(inspected.header.typ, 'svc-capability+jwt');
    assert.equal(inspected.claims.sub, 'billing');
    assert.equal(inspected.identity.serviceId, 'billing');
    assert.deepEqual(inspected.identity.scopes, ['orders.read']);
    assert.equal(inspected.expiry.expired, false);
    assert.equal(inspected.verdict.valid, true);

    const human = await svcplane(['token', 'inspect', token, '--jwks', demo.urls.plane]);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /^verdict +valid: signature verifies against .*jwks\.json/m);
    assert.match(human.stdout, /^expires +\S+ \(in \d+m \d+s\)$/m);
  },
);

test('token inspect gives the exact refusal reason and exits 4', BOUND, async () => {
  const token = await billingToken();
  const wrongAudience = await svcplane([
    'token',
    'inspect',
    token,
    '--jwks',
    demo.urls.plane,
    '--audience',
    'ledger',
  ]);
  assert.equal(wrongAudience.code, 4, wrongAudience.stderr);
  assert.match(wrongAudience.stdout, /^verdict +refused: audience_mismatch \(401\)/m);
  const [header, payload] = token.split('.');
  const forged = `${header}.${payload}.${'A'.repeat(86)}`;
  const badSignature = await svcplane(['token', 'inspect', forged, '--jwks', demo.urls.plane]);
  assert.equal(badSignature.code, 4);
  assert.match(badSignature.stdout, /refused: bad_signature/);
  // Without keys, a claim set no service would read is still refused.
  const garbage = await svcplane(['token', 'inspect', 'not.a.token']);
  assert.equal(garbage.code, 4);
  assert.match(garbage.stdout, /^verdict +refused: invalid_claims/m);
});

test('token request for a scope not granted exits 4 with the plane reason', BOUND, async () => {
  const run = await svcplane([
    'token',
    'request',
    '--caller',
    'billing',
    '--target',
    'orders',
    '--ability',
    'orders.catalog',
    '--scope',
    'orders.write',
    ...billingArgs(),
  ], billingEnv());
  assert.equal(run.code, 4, run.stderr);
  assert.equal(run.stdout, '');
  assert.match(run.stderr, /^error: capability_auth \S+ \(status 403\): /m);
});

test('token request (JWK) returns a token bound to the caller key', BOUND, async () => {
  const { clientId, keyId, privateJwk } = demo.callers.shipping;
  const jwkFile = path.join(scratch, 'shipping.jwk.json');
  await writeFile(jwkFile, JSON.stringify(privateJwk));
  const run = await svcplane([
    'token',
    'request',
    '--caller',
    'shipping',
    '--target',
    'orders',
    '--ability',
    'orders.catalog',
    '--scope',
    'orders.write',
    '--plane',
    demo.urls.plane,
    '--client-id',
    clientId,
    '--jwk',
    jwkFile,
    '--key-id',
    keyId,
    '--json',
  ]);
  assert.equal(run.code, 0, run.stderr);
  const { claims } = JSON.parse(run.stdout);
  assert.equal(claims.sub, 'shipping');
  assert.equal(typeof claims.cnf?.jkt, 'string');

  // A call with the same key: its session proves possession of the key the token is bound to.
  const reserve = await svcplane([
    'call',
    demo.urls.orders,
    'orders.catalog.reserve',
    '{"sku":"tea-01","quantity":2}',
    '--caller',
    'shipping',
    '--plane',
    demo.urls.plane,
    '--client-id',
    clientId,
    '--jwk',
    jwkFile,
    '--key-id',
    keyId,
    '--transport',
    'websocket',
    '--json',
  ]);
  assert.equal(reserve.code, 0, reserve.stderr);
  assert.deepEqual(JSON.parse(reserve.stdout), { reserved: true });
});

test(
  'discover prints abilities, methods, scopes, transports and kinds as a table',
  BOUND,
  async () => {
    const run = await svcplane(['discover', demo.urls.orders]);
    assert.equal(run.code, 0, run.stderr);
    const lines = run.stdout.split('\n');
    assert.match(lines[0], /^orders: Orders 1\.0\.0$/);
    assert.match(lines[1], /^ABILITY +METHOD +KIND +SCOPES +TRANSPORTS +REST +MCP +EXPOSURE$/);
    assert.ok(
      lines.some((line) =>
        /^orders\.catalog +list +call +orders\.read +http-batch,websocket +GET \/orders\/items +orders_list +published\/plane$/
          .test(line)
      ),
      run.stdout,
    );
    assert.ok(
      lines.some((line) =>
        /^orders\.catalog +reserve +call +orders\.read,orders\.write /.test(line)
      ),
      run.stdout,
    );
    assert.ok(lines.some((line) => /^orders\.catalog +watch +stream /.test(line)), run.stdout);
    const json = await svcplane(['discover', demo.urls.ledger, '--json']);
    assert.equal(JSON.parse(json.stdout).ingress.brokerServiceId, 'demo-plane');
  },
);

test(
  'call over HTTP-batch prints the result; a stream prints NDJSON and its count',
  BOUND,
  async () => {
    const list = await svcplane(
      [
        'call',
        demo.urls.orders,
        'orders.catalog.list',
        '{"inStockOnly":true}',
        '--caller',
        'billing',
        ...billingArgs(),
        '--json',
      ],
      billingEnv(),
    );
    assert.equal(list.code, 0, list.stderr);
    const result = JSON.parse(list.stdout);
    assert.equal(result.caller, 'billing');
    assert.deepEqual(result.items.map((item: { sku: string }) => item.sku), ['tea-01', 'mug-02']);

    const watch = await svcplane(
      [
        'call',
        demo.urls.orders,
        'orders.catalog.watch',
        '{"count":5}',
        '--caller',
        'billing',
        ...billingArgs(),
      ],
      billingEnv(),
    );
    assert.equal(watch.code, 0, watch.stderr);
    const items = watch.stdout.trim().split('\n').map((line) => JSON.parse(line));
    assert.equal(items.length, 5);
    assert.deepEqual(items[0], { sku: 'tea-01', stock: 12 });
    assert.match(watch.stderr, /^5 items$/m);
    // Streams need a session transport: a batch is refused as the service refuses it.
    const batch = await svcplane(
      [
        'call',
        demo.urls.orders,
        'orders.catalog.watch',
        '{"count":5}',
        '--caller',
        'billing',
        ...billingArgs(),
        '--transport',
        'http-batch',
      ],
      billingEnv(),
    );
    assert.equal(batch.code, 1);
    assert.match(
      batch.stderr,
      /^error: internal stream_requires_session_transport \(status 405\)/m,
    );
  },
);

test('call failures print the taxonomy code and exit by class', BOUND, async () => {
  const token = await billingToken();
  // A method the token's scopes do not cover: refused by the service, 403.
  const refused = await svcplane([
    'call',
    demo.urls.orders,
    'orders.catalog.reserve',
    '{"sku":"tea-01","quantity":1}',
    '--token',
    token,
    '--scope',
    'orders.read',
  ]);
  assert.equal(refused.code, 4, refused.stderr);
  assert.match(refused.stderr, /^error: capability_auth missing_scope \(status 403\)/m);
  // Input the method's schema refuses: 422-class validation.
  const invalid = await svcplane([
    'call',
    demo.urls.orders,
    'orders.catalog.watch',
    '{"count":0}',
    '--token',
    token,
  ]);
  assert.equal(invalid.code, 5, invalid.stderr);
  assert.match(invalid.stderr, /^error: ability_validation /m);
  // Each issue on its own line, where it went wrong first.
  assert.match(invalid.stderr, /^ {2}at count: \S.*$/m);
  const invalidJson = await svcplane([
    'call',
    demo.urls.orders,
    'orders.catalog.watch',
    '{"count":0}',
    '--token',
    token,
    '--json',
  ]);
  assert.equal(invalidJson.code, 5, invalidJson.stderr);
  const { error } = JSON.parse(invalidJson.stderr.trim().split('\n').at(-1)!);
  assert.equal(error.code, 'ability_validation');
  assert.deepEqual(error.issues.map((issue: { path?: unknown }) => issue.path), [['count']]);
  assert.equal(typeof error.issues[0].message, 'string');
  // A method the service does not have: a usage error, named.
  const unknown = await svcplane([
    'call',
    demo.urls.orders,
    'orders.catalog.nothing',
    '--token',
    token,
  ]);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /orders has no method orders\.catalog\.nothing/);
  // Nothing listening: unreachable, internal (exit 1), retryable.
  const down = await svcplane(['discover', 'http://127.0.0.1:9']);
  assert.equal(down.code, 1);
  assert.match(down.stderr, /^error: internal service_unreachable \(status 503, retryable\)/m);
});

test('catalog names the doors this plane does not serve as unavailable', BOUND, async () => {
  const run = await svcplane(['catalog', demo.urls.plane, '--json']);
  assert.equal(run.code, 0, run.stderr);
  const catalog = JSON.parse(run.stdout);
  assert.equal(catalog.plane, demo.urls.plane);
  for (const door of [catalog.rest, catalog.mcp]) {
    if (door.available) assert.ok(Array.isArray(door.items));
    else assert.match(door.why, /answered HTTP \d{3}/);
  }
  const human = await svcplane(['catalog', demo.urls.plane]);
  assert.match(
    human.stdout,
    /^ {2}JWKS +http:\/\/127\.0\.0\.1:\d+\/\.well-known\/svc\/jwks\.json$/m,
  );
  assert.match(
    human.stdout,
    /^(services \(from \/openapi\.json\)|services and REST routes: unavailable)/m,
  );
});
