// Seeded fuzzing of the control plane's network parsers, through `createControlPlane(...).fetch`
// of the conformance deployment: the token endpoint as a whole (method, body limit and JSON,
// `Authorization` parsing, HMAC headers, `Svc-JWK` assertions) and the discovery documents the
// plane reads from services. Each case starts from a valid request (or document), applies seeded
// mutations or is random, and must be answered with a token or with a 4xx problem+json carrying
// `code` and `reason`: never a 5xx for the client's garbage, never a hang, and never a token for
// a request whose signed parts changed. A failure prints the seed and the request; replay it with
// SVC_FUZZ_SEED=<seed>.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  encodedRequestBodyHash,
  signHmacTokenRequest,
} from '../../src/caller/token-request-signing.ts';
import {
  createPlaneDeployment,
  decodeJws,
  discoveryDocumentOf,
  fakeService,
  harnessThumbprint,
  HMAC_SECRETS,
  importSigningKey,
  ISS,
  jwkAssertion,
  PLANE_URL,
  type PlaneDeployment,
  planeKeys,
  type ReadResponse,
  readResponse,
  TOKEN_URL,
  tokenBody,
} from '../conformance/plane-fixture.ts';
import { signedToken } from '../support/forge.ts';
import {
  bytesHex,
  describeInput,
  fuzz,
  type FuzzCase,
  jsonText,
  mutateJson,
  mutateJsonBytes,
  mutateText,
  outcomeWithin,
  type Random,
  randomBytes,
  randomJson,
  randomText,
  sameSignedBytes,
  typeConfusionCases,
} from '../support/seeded-fuzz.ts';

/** Bound on one request to the plane (discovery of a huge document included). */
const CALL_BOUND_MS = 5000;

const TOKEN_PATH = new URL(TOKEN_URL).pathname;
const JWKS_PATH = '/.well-known/svc/jwks.json';
const TAXONOMY_CODES = ['capability_auth', 'ability_validation', 'timeout', 'handler', 'internal'];
const FAKE_ID = 'svc-f';

/** A body whose stream fails after `prefix`, as an upload does when the client goes away. */
class FailingBody {
  constructor(readonly prefix: Uint8Array) {}

  stream(): ReadableStream<Uint8Array> {
    let pulls = 0;
    return new ReadableStream<Uint8Array>({
      pull: (controller) => {
        if (pulls++ === 0 && this.prefix.length > 0) controller.enqueue(this.prefix);
        else controller.error(new TypeError('the client went away'));
      },
    });
  }
}

/** A request as sent: headers as pairs (a name may repeat), the body as text, bytes or a failing stream. */
interface Wire {
  method: string;
  url: string;
  headers: [string, string][];
  body: string | Uint8Array | FailingBody | null;
}

function describeWire(wire: Wire): string {
  return describeInput(
    {
      method: wire.method,
      url: wire.url,
      headers: wire.headers,
      body: typeof wire.body === 'string' || wire.body === null
        ? wire.body
        : wire.body instanceof FailingBody
        ? `failing after ${describeInput(wire.body.prefix, 400)}`
        : describeInput(wire.body, 400),
    },
    3000,
  );
}

/** The Request a client could send, or `undefined` when no runtime would build it. */
function requestOf(wire: Wire): Request | undefined {
  try {
    const headers = new Headers();
    for (const [name, value] of wire.headers) headers.append(name, value);
    const bodyless = ['GET', 'HEAD'].includes(wire.method.toUpperCase()) || wire.body === null;
    const body = wire.body instanceof FailingBody ? wire.body.stream() : wire.body;
    return new Request(wire.url, {
      method: wire.method,
      headers,
      ...(bodyless ? {} : { body: body as BodyInit, duplex: 'half' }),
    } as RequestInit);
  } catch {
    return undefined;
  }
}

function withHeader(wire: Wire, name: string, value: string | null, append = false): Wire {
  const lower = name.toLowerCase();
  const headers = append
    ? [...wire.headers]
    : wire.headers.filter(([existing]) => existing.toLowerCase() !== lower);
  if (value !== null) headers.push([name, value]);
  return { ...wire, headers };
}

function headerOf(wire: Wire, name: string): string {
  return wire.headers.find(([existing]) => existing.toLowerCase() === name.toLowerCase())?.[1] ??
    '';
}

/** What a plane request may be answered with, whatever it carried. */
function assertPlaneAnswer(response: ReadResponse, request: Request): void {
  const { status, headers, body } = response;
  assert.ok(status >= 200 && status <= 599, `status ${status}`);
  const requestId = headers.get('X-Request-Id');
  assert.ok(requestId !== null && /^[\x21-\x7e]{1,200}$/.test(requestId), 'X-Request-Id');
  const sent = request.headers.get('X-Request-Id');
  if (sent !== null && /^[\x21-\x7e]{1,200}$/.test(sent)) assert.equal(requestId, sent);
  if (new URL(request.url).pathname === TOKEN_PATH) {
    assert.equal(headers.get('Cache-Control'), 'no-store', 'token endpoint answers are no-store');
  }
  if (status < 400) return;
  assert.ok(status < 500, `a ${status} ${body?.code}/${body?.reason} for the client's input`);
  assert.ok(
    (headers.get('Content-Type') ?? '').startsWith('application/problem+json'),
    `a ${status} is problem+json`,
  );
  if (status === 401) assert.ok((headers.get('WWW-Authenticate') ?? '').length > 0, 'challenge');
  // A HEAD answer carries the headers of the problem without its body.
  if (request.method === 'HEAD') return;
  assert.ok(body !== null && typeof body === 'object', 'a problem body');
  assert.ok(TAXONOMY_CODES.includes(body.code), `problem code ${body.code}`);
  assert.equal(body.status, status);
  assert.ok(typeof body.reason === 'string' && body.reason.length > 0, 'problem reason');
  assert.equal(typeof body.detail, 'string');
  assert.equal(body.token, undefined);
}

/** Sends a wire request to the deployed plane within the bound. */
async function answerOf(
  deployment: PlaneDeployment,
  wire: Wire,
): Promise<{ request: Request; response: ReadResponse } | undefined> {
  const request = requestOf(wire);
  if (request === undefined) return undefined;
  const outcome = await outcomeWithin(
    async () => await readResponse(await deployment.plane.fetch(request.clone())),
    CALL_BOUND_MS,
    'plane.fetch',
  );
  if (!outcome.ok) assert.fail(`plane.fetch threw ${String(outcome.error)}`);
  assertPlaneAnswer(outcome.value, request);
  return { request, response: outcome.value };
}

let requestCounter = 0;
/** A fresh, deterministic request id. */
const nextRequestId = (label: string): string => `fuzz-${label}-${++requestCounter}`;

let deploymentOfThisFile: Promise<PlaneDeployment> | undefined;
let discoveryAnswer: () => Response = () => new Response('{}');

/** The conformance deployment plus a fake service whose discovery answer each case sets. */
function deployment(): Promise<PlaneDeployment> {
  deploymentOfThisFile ??= createPlaneDeployment({
    extraServices: [fakeService(FAKE_ID, () => discoveryAnswer()).endpoint],
  });
  return deploymentOfThisFile;
}

/** Decoded claims of an issued token, with the checks every issued token must pass. */
function assertIssuedToken(
  response: ReadResponse,
  expected: { sub: string; aud: string; scp: string[]; jkt?: string; maxTtl?: number },
): void {
  assert.equal(response.status, 200);
  assert.equal(response.body.tokenType, 'svc-capability');
  const { header, claims } = decodeJws(response.body.token);
  assert.equal(header.alg, 'ES256');
  assert.equal(claims.iss, ISS);
  assert.equal(claims.sub, expected.sub);
  assert.equal(claims.aud, expected.aud);
  assert.deepEqual(claims.scp, expected.scp);
  assert.equal(claims.spa, 'service');
  for (const absent of ['act', 'spk', 'spo', 'spb']) assert.equal(claims[absent], undefined);
  if (expected.jkt === undefined) assert.equal(claims.cnf, undefined);
  else assert.deepEqual(claims.cnf, { jkt: expected.jkt });
  const lifetime = (claims.exp as number) - (claims.iat as number);
  assert.ok(lifetime > 0 && lifetime <= (expected.maxTtl ?? 3600), `lifetime ${lifetime}`);
}

// ---------------------------------------------------------------------------------------------
// Views of what a signature covers, read from the request the plane receives

async function bodyHex(request: Request): Promise<string> {
  return request.body === null ? '' : bytesHex(new Uint8Array(await request.clone().arrayBuffer()));
}

function pathWithQuery(request: Request): string {
  const beforeFragment = request.url.split('#')[0];
  return beforeFragment.slice(new URL(request.url).origin.length);
}

/**
 * `[scheme in lower case, credential]` as RFC 9110 splits one credential, or the raw value.
 * `trimmed` first drops JavaScript white space around the value (NBSP, VT, FF besides the HTTP
 * white space `Headers` drops; the plane drops spaces and tabs only): that never changes a
 * credential's bytes, so a token is allowed under either reading and a refusal is wrong only
 * under the strict one.
 */
function authorizationParts(request: Request, trimmed = false): [string, string] | string | null {
  const raw = request.headers.get('Authorization');
  if (raw === null) return null;
  const value = trimmed ? raw.trim() : raw;
  const match = /^([^ ]+) +([^ ]+)$/.exec(value);
  return match === null ? value : [match[1].toLowerCase(), match[2]];
}

const sameAuthorization = (a: Request, b: Request, trimmed: boolean): boolean =>
  JSON.stringify(authorizationParts(a, trimmed)) === JSON.stringify(authorizationParts(b, trimmed));

async function signedView(request: Request, headerNames: string[]): Promise<string> {
  return JSON.stringify({
    method: request.method.toUpperCase(),
    path: pathWithQuery(request),
    body: await bodyHex(request),
    headers: headerNames.map((name) => request.headers.get(name)),
  });
}

// ---------------------------------------------------------------------------------------------
// HMAC caller authentication

const HMAC_HEADERS = ['X-Svc-Client-Id', 'X-Svc-Timestamp', 'X-Request-Id'];

async function signedHmacWire(body: string, requestId: string): Promise<Wire> {
  const signed = await signHmacTokenRequest({
    clientId: 'hc1',
    clientSecret: HMAC_SECRETS.hc1,
    url: TOKEN_URL,
    body,
    requestId,
  });
  return {
    method: 'POST',
    url: TOKEN_URL,
    headers: [['Content-Type', 'application/json'], ...Object.entries(signed)],
    body,
  };
}

const SCHEMES = [
  'Svc-HMAC-SHA256',
  'svc-hmac-sha256',
  'SVC-HMAC-SHA256',
  'sVC-hMAC-sHA256',
  'Svc-JWK',
  'svc-jwk',
  'SVC-JWK',
  'Bearer',
  'Basic',
  'Svc-HMAC-SHA256x',
  'Svc-HMAC',
  'Svc HMAC',
  '',
];

const METHODS = [
  'GET',
  'HEAD',
  'PUT',
  'post',
  'Post',
  'PATCH',
  'DELETE',
  'OPTIONS',
  'QUERY',
  'P0ST',
];

/** Mutates one part of a signed request after signing: the parts a client can get wrong. */
function mutateSignedWire(
  random: Random,
  wire: Wire,
  credentialHeaders: string[],
): FuzzCase<Wire> {
  const site = random.below(8);
  const authorization = headerOf(wire, 'Authorization');
  const space = authorization.indexOf(' ');
  const [scheme, credential] = [authorization.slice(0, space), authorization.slice(space + 1)];
  if (site === 0) {
    const mutated = mutateText(random, authorization, { maxLength: 20_000 });
    return {
      input: withHeader(wire, 'Authorization', mutated.input),
      how: `Authorization: ${mutated.how}`,
    };
  }
  if (site === 1) {
    const mutated = mutateText(random, credential, { maxLength: 20_000 });
    return {
      input: withHeader(wire, 'Authorization', `${scheme} ${mutated.input}`),
      how: `credential: ${mutated.how}`,
    };
  }
  if (site === 2) {
    const chosen = random.pick(SCHEMES);
    const separator = random.pick([' ', ' ', '  ', '\t', '', ', ']);
    return {
      input: withHeader(wire, 'Authorization', `${chosen}${separator}${credential}`),
      how: `scheme ${JSON.stringify(chosen)} separator ${JSON.stringify(separator)}`,
    };
  }
  if (site === 3) {
    const name = random.pick([...credentialHeaders, 'Authorization']);
    const choice = random.below(4);
    if (choice === 0) return { input: withHeader(wire, name, null), how: `${name} removed` };
    if (choice === 1) {
      const value = random.chance(0.5) ? headerOf(wire, name) : 'other';
      return { input: withHeader(wire, name, value, true), how: `${name} sent twice` };
    }
    const mutated = mutateText(random, headerOf(wire, name), { maxLength: 400 });
    return { input: withHeader(wire, name, mutated.input), how: `${name}: ${mutated.how}` };
  }
  if (site === 4) {
    const text = typeof wire.body === 'string' ? wire.body : '';
    const mutated = random.chance(0.8)
      ? mutateText(random, text, { maxLength: 20_000 })
      : { input: text.replace('"svc-a.read"', '"svc-a.read","svc-a.write"'), how: 'scope added' };
    return { input: { ...wire, body: mutated.input }, how: `body: ${mutated.how}` };
  }
  if (site === 5) {
    const path = TOKEN_URL.slice(PLANE_URL.length);
    const mutated = mutateText(random, path, { maxLength: 400 });
    let url: string;
    try {
      url = new URL(mutated.input, PLANE_URL).href;
    } catch {
      url = TOKEN_URL;
    }
    return { input: { ...wire, url }, how: `path: ${mutated.how}` };
  }
  if (site === 6) {
    const method = random.pick(METHODS);
    return { input: { ...wire, method }, how: `method ${method}` };
  }
  // Nothing signed changes: header name case, an unrelated header, the content type.
  const choice = random.below(3);
  if (choice === 0) {
    return {
      input: { ...wire, headers: wire.headers.map(([name, value]) => [name.toUpperCase(), value]) },
      how: 'header names in upper case',
    };
  }
  if (choice === 1) {
    return { input: withHeader(wire, 'X-Unrelated', 'x'), how: 'an unrelated header' };
  }
  return { input: withHeader(wire, 'Content-Type', 'text/plain'), how: 'another content type' };
}

test('token endpoint: HMAC-signed requests changed after signing never get a token unless every signed part is unchanged', async () => {
  const plane = await deployment();
  const body = JSON.stringify(tokenBody());
  const baseline = await answerOf(plane, await signedHmacWire(body, 'fuzz-hmac-baseline'));
  assert.equal(baseline?.response.status, 200, 'the baseline request gets a token');
  let tokens = 0;
  await fuzz<{ original: Wire; mutated: Wire }>({
    name: 'HMAC requests mutated after signing',
    seeds: [0x4ac00001, 0x4ac00002],
    iterations: 150,
    async generate(random, iteration) {
      const original = await signedHmacWire(body, `fuzz-hmac-${iteration}`);
      let mutated = mutateSignedWire(random, original, HMAC_HEADERS);
      if (random.chance(0.15)) {
        const again = mutateSignedWire(random, mutated.input, HMAC_HEADERS);
        mutated = { input: again.input, how: `${mutated.how}; ${again.how}` };
      }
      return { input: { original, mutated: mutated.input }, how: mutated.how };
    },
    async check({ original, mutated }) {
      const answer = await answerOf(plane, mutated);
      if (answer === undefined) return;
      const originalRequest = requestOf(original)!;
      const sameSigned = await signedView(answer.request, HMAC_HEADERS) ===
        await signedView(originalRequest, HMAC_HEADERS);
      const same = sameSigned && sameAuthorization(answer.request, originalRequest, false);
      if (answer.response.status === 200) {
        assert.ok(
          sameSigned && sameAuthorization(answer.request, originalRequest, true),
          'a request whose signed parts changed got a token',
        );
        assertIssuedToken(answer.response, {
          sub: 'svc-caller',
          aud: 'svc-a',
          scp: ['svc-a.read'],
        });
        tokens++;
      } else {
        assert.ok(!same, `an unchanged signed request was refused: ${answer.response.status}`);
      }
    },
    describe: ({ mutated }) => describeWire(mutated),
  });
  assert.ok(tokens > 0, 'some mutations left the signed parts unchanged');
});

// ---------------------------------------------------------------------------------------------
// JWK caller authentication

async function signedJwkWire(body: string, requestId: string, assertion?: string): Promise<Wire> {
  return {
    method: 'POST',
    url: TOKEN_URL,
    headers: [
      ['Content-Type', 'application/json'],
      ['Authorization', `Svc-JWK ${assertion ?? await jwkAssertion(body, requestId)}`],
      ['X-Request-Id', requestId],
    ],
    body,
  };
}

const jwkBody = () => JSON.stringify(tokenBody({ callerServiceId: 'svc-jwk' }));

test('token endpoint: JWK-asserted requests changed after signing never get a token unless the assertion and what it binds are unchanged', async () => {
  const plane = await deployment();
  const keys = await planeKeys();
  const jkt = await harnessThumbprint(keys.K1.publicJwk);
  const body = jwkBody();
  const baseline = await answerOf(plane, await signedJwkWire(body, 'fuzz-jwk-baseline'));
  assert.equal(baseline?.response.status, 200, 'the baseline request gets a token');
  let tokens = 0;
  await fuzz<{ original: Wire; mutated: Wire }>({
    name: 'JWK requests mutated after signing',
    seeds: [0x14a50001, 0x14a50002],
    iterations: 150,
    async generate(random, iteration) {
      const original = await signedJwkWire(body, `fuzz-jwk-${iteration}`);
      const mutated = mutateSignedWire(random, original, ['X-Request-Id']);
      return { input: { original, mutated: mutated.input }, how: mutated.how };
    },
    async check({ original, mutated }) {
      const answer = await answerOf(plane, mutated);
      if (answer === undefined) return;
      const originalRequest = requestOf(original)!;
      const sameBound = await signedView(answer.request, ['X-Request-Id']) ===
        await signedView(originalRequest, ['X-Request-Id']);
      const sent = authorizationParts(answer.request);
      const [scheme, assertion] = authorizationParts(originalRequest) as [string, string];
      const sameScheme = Array.isArray(sent) && sent[0] === scheme;
      if (answer.response.status === 200) {
        const trimmed = authorizationParts(answer.request, true);
        assert.ok(
          sameBound && Array.isArray(trimmed) && trimmed[0] === scheme,
          'a request whose bound parts changed got a token',
        );
        assert.ok(sameSignedBytes(assertion, trimmed[1]), 'a changed assertion got a token');
        assertIssuedToken(answer.response, {
          sub: 'svc-jwk',
          aud: 'svc-a',
          scp: ['svc-a.read'],
          jkt,
        });
        tokens++;
      } else {
        assert.ok(
          !(sameBound && sameScheme && sent![1] === assertion),
          `an unchanged assertion was refused: ${answer.response.status}`,
        );
      }
    },
    describe: ({ mutated }) => describeWire(mutated),
  });
  assert.ok(tokens > 0, 'some mutations left the assertion and what it binds unchanged');
});

/** What an assertion must have said for the plane to answer it with a token. */
function assertAcceptableAssertion(
  header: unknown,
  claims: unknown,
  bound: { body: string; requestId: string },
): void {
  assert.ok(header !== null && typeof header === 'object' && !Array.isArray(header));
  assert.ok(claims !== null && typeof claims === 'object' && !Array.isArray(claims));
  const h = header as Record<string, unknown>;
  const c = claims as Record<string, unknown>;
  assert.deepEqual(Object.keys(h).sort(), ['alg', 'kid', 'typ']);
  assert.equal(h.alg, 'ES256');
  assert.equal(h.kid, 'jk1');
  assert.equal(h.typ, 'svc-client+jwt');
  assert.equal(c.iss, 'jc1');
  assert.equal(c.sub, 'jc1');
  assert.equal(c.aud, ISS);
  assert.equal(c.htm, 'POST');
  assert.equal(c.htu, TOKEN_PATH);
  assert.equal(c.bh, encodedRequestBodyHash(bound.body));
  assert.equal(c.rid, bound.requestId);
  assert.ok(typeof c.jti === 'string' && c.jti.length > 0);
  const [iat, exp] = [c.iat as number, c.exp as number];
  assert.ok(typeof iat === 'number' && typeof exp === 'number' && exp > iat && exp - iat <= 300);
  const nowSeconds = Date.now() / 1000;
  assert.ok(iat <= nowSeconds + 31 && exp >= nowSeconds - 31, 'the assertion is current');
}

function parsedPart(part: string | Uint8Array): unknown {
  const bytes = typeof part === 'string' ? new TextEncoder().encode(part) : part;
  try {
    return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch {
    return undefined;
  }
}

test('token endpoint: JWK assertions with each wrong JSON type or seeded header and claim mutations, signed by the client key, get a 401 or bind the request', async () => {
  const plane = await deployment();
  const keys = await planeKeys();
  const key = await importSigningKey(keys.K1);
  const body = jwkBody();
  const requestId = 'fuzz-jwk-signed';
  const nowSeconds = Math.floor(Date.now() / 1000);
  const header = { alg: 'ES256', kid: 'jk1', typ: 'svc-client+jwt' };
  const claims = {
    iss: 'jc1',
    sub: 'jc1',
    aud: ISS,
    htm: 'POST',
    htu: TOKEN_PATH,
    bh: encodedRequestBodyHash(body),
    rid: requestId,
    iat: nowSeconds,
    exp: nowSeconds + 60,
    jti: 'fuzz-jti',
  };
  const grid = [
    ...typeConfusionCases(header).map((c) => ({ ...c, part: 'header' })),
    ...typeConfusionCases(claims).map((c) => ({ ...c, part: 'claims' })),
  ];
  const options = { maxLength: 2500, maxDepth: 1000 };
  type Parts = { header: string | Uint8Array; claims: string | Uint8Array };
  await fuzz<Parts>({
    name: 'JWK assertions signed with mutations',
    seeds: [0x14a5a001, 0x14a5a002],
    iterations: Math.max(grid.length, 120),
    generate(random: Random, iteration: number) {
      if (iteration < grid.length && random.seed === 0x14a5a001) {
        const cell = grid[iteration];
        return {
          input: cell.part === 'header'
            ? { header: cell.input, claims: jsonText(claims) }
            : { header: jsonText(header), claims: cell.input },
          how: `${cell.part}: ${cell.how}`,
        };
      }
      const target = random.below(3);
      const mutate = (value: unknown) =>
        random.chance(0.3)
          ? mutateJsonBytes(random, value, options)
          : mutateJson(random, value, options);
      const h: FuzzCase<string | Uint8Array> = target !== 1
        ? mutate(header)
        : { input: jsonText(header), how: 'kept' };
      const c: FuzzCase<string | Uint8Array> = target !== 0
        ? mutate(claims)
        : { input: jsonText(claims), how: 'kept' };
      return {
        input: { header: h.input, claims: c.input },
        how: `header ${h.how} | claims ${c.how}`,
      };
    },
    async check(parts) {
      const part = (value: string | Uint8Array) =>
        typeof value === 'string' ? { raw: value } : { bytes: value };
      const assertion = await signedToken(key, part(parts.claims), part(parts.header));
      const answer = await answerOf(plane, await signedJwkWire(body, requestId, assertion));
      if (answer === undefined) return;
      if (answer.response.status !== 200) {
        assert.equal(answer.response.status, 401, 'a signed assertion over a valid body');
        return;
      }
      assertAcceptableAssertion(parsedPart(parts.header), parsedPart(parts.claims), {
        body,
        requestId,
      });
      assertIssuedToken(answer.response, {
        sub: 'svc-jwk',
        aud: 'svc-a',
        scp: ['svc-a.read'],
        jkt: await harnessThumbprint(keys.K1.publicJwk),
      });
    },
    describe: (parts) =>
      `header ${describeInput(parts.header, 600)} claims ${describeInput(parts.claims, 1200)}`,
  });
});

// ---------------------------------------------------------------------------------------------
// Token request bodies

const KNOWN_TARGETS = new Set(['svc-a', 'svc-b', 'svc-c', 'svc-d']);

test('token endpoint: correctly signed bodies of each wrong JSON type or seeded mutations get a token as asked or a 400, 403 or 413', async () => {
  const plane = await deployment();
  const base = tokenBody({ abilityId: 'svc-a.echo', ttlSeconds: 60 });
  const grid = typeConfusionCases(base);
  await fuzz<string | Uint8Array>({
    name: 'token request bodies',
    seeds: [0xb0d40001, 0xb0d40002],
    iterations: Math.max(grid.length, 150),
    generate(random, iteration) {
      if (iteration < grid.length && random.seed === 0xb0d40001) return grid[iteration];
      const choice = random.below(10);
      if (choice === 0) return { input: jsonText(randomJson(random)), how: 'random JSON' };
      if (choice === 1) {
        return { input: randomBytes(random, random.below(600)), how: 'random bytes' };
      }
      if (choice === 2) {
        return { input: jsonText({ ...base, subject: randomJson(random) }), how: 'with a subject' };
      }
      const options = { maxLength: 20_000, maxDepth: 9000 };
      return choice <= 4
        ? mutateJsonBytes(random, base, options)
        : mutateJson(random, base, options);
    },
    async check(body) {
      // Signed over the exact bytes sent.
      const headers = await signHmacTokenRequest({
        clientId: 'hc1',
        clientSecret: HMAC_SECRETS.hc1,
        url: TOKEN_URL,
        body,
        requestId: nextRequestId('body'),
      });
      const wire: Wire = {
        method: 'POST',
        url: TOKEN_URL,
        headers: [['Content-Type', 'application/json'], ...Object.entries(headers)],
        body,
      };
      const answer = await answerOf(plane, wire);
      assert.ok(answer !== undefined, 'a signed request can always be sent');
      const { status, body: answered } = answer.response;
      const size = typeof body === 'string' ? new TextEncoder().encode(body).length : body.length;
      const parsed = parsedPart(body);
      const isObject = parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed);
      if (size > 16 * 1024) {
        assert.equal(status, 413);
        return;
      }
      if (!isObject) {
        assert.equal(status, 400, 'a body that is not a JSON object');
        return;
      }
      const request = parsed as Record<string, unknown>;
      if (Object.hasOwn(request, 'subject')) {
        assert.equal(status, 403, 'a stated subject');
        assert.equal(answered.reason, 'subject_not_allowed');
        return;
      }
      assert.ok([200, 400, 403].includes(status), `status ${status}`);
      if (status !== 200) return;
      assert.equal(request.callerServiceId, 'svc-caller');
      assert.ok(KNOWN_TARGETS.has(request.targetServiceId as string));
      const scopes = request.scopes as string[];
      assert.ok(Array.isArray(scopes) && scopes.length > 0);
      assertIssuedToken(answer.response, {
        sub: 'svc-caller',
        aud: request.targetServiceId as string,
        scp: [...new Set(scopes)].sort(),
        // The plane's lifetime (120 s by default) is also the most a request may ask for.
        maxTtl: Math.min(typeof request.ttlSeconds === 'number' ? request.ttlSeconds : 120, 120),
      });
    },
    describe: (body) => describeInput(body, 3000),
  });
});

// ---------------------------------------------------------------------------------------------
// Random requests

const PATHS = [
  TOKEN_PATH,
  TOKEN_PATH,
  `${TOKEN_PATH}/`,
  TOKEN_PATH.toUpperCase(),
  `${TOKEN_PATH}?a=1`,
  `${TOKEN_PATH}/..`,
  '/.well-known/svc/%63apability-token',
  JWKS_PATH,
  '/',
  '/rpc/svc-a.echo',
];

function randomWire(random: Random): Wire {
  // Mostly the token endpoint, where the parsers are; sometimes any other path.
  const path = random.chance(0.6)
    ? TOKEN_PATH
    : random.chance(0.3)
    ? `/${randomText(random, 60, 'ascii').replace(/[#?]/g, '')}`
    : random.pick(PATHS);
  const headers: [string, string][] = [];
  if (random.chance(0.8)) {
    const credential = random.pick([
      () => randomText(random, 600, 'compact'),
      () => randomText(random, 60, 'base64url'),
      () => randomText(random, 200, 'latin1'),
      () => `${randomText(random, 40, 'base64url')}.${randomText(random, 40, 'base64url')}`,
    ])();
    headers.push([
      'Authorization',
      `${random.pick(SCHEMES)}${random.pick([' ', '', '  '])}${credential}`,
    ]);
  }
  if (random.chance(0.6)) {
    headers.push([
      'X-Svc-Client-Id',
      random.pick(['hc1', 'hc2', 'jc1', randomText(random, 30, 'latin1')]),
    ]);
  }
  if (random.chance(0.6)) {
    headers.push([
      'X-Svc-Timestamp',
      random.pick([
        String(Math.floor(Date.now() / 1000)),
        '',
        'NaN',
        '1e309',
        randomText(random, 14, 'ascii'),
      ]),
    ]);
  }
  if (random.chance(0.7)) {
    headers.push([
      'X-Request-Id',
      randomText(random, 260, random.pick(['ascii', 'latin1'] as const)),
    ]);
  }
  if (random.chance(0.5)) {
    headers.push(['Content-Type', random.pick(['application/json', 'text/plain', ''])]);
  }
  const body = random.pick<() => Wire['body']>([
    () => null,
    () => jsonText(randomJson(random)),
    () => jsonText(tokenBody()),
    () => randomText(random, 3000, 'unicode'),
    () => randomBytes(random, random.below(2000)),
    () =>
      new FailingBody(new TextEncoder().encode(jsonText(tokenBody()).slice(0, random.below(60)))),
  ])();
  const method = random.chance(0.7) ? 'POST' : random.pick(METHODS);
  return { method, url: `${PLANE_URL}${path}`, headers, body };
}

test('plane: random requests are answered with a 4xx problem+json (or the JWKS), never a token or a 5xx', async () => {
  const plane = await deployment();
  let failingBodies = 0;
  await fuzz<Wire>({
    name: 'random plane requests',
    seeds: [0x2a4d0001, 0x2a4d0002],
    iterations: 150,
    generate: (random) => ({ input: randomWire(random), how: 'random request' }),
    async check(wire) {
      const answer = await answerOf(plane, wire);
      if (answer === undefined) return;
      const { status, body } = answer.response;
      const path = new URL(answer.request.url).pathname;
      if (
        wire.body instanceof FailingBody && path === TOKEN_PATH && answer.request.method === 'POST'
      ) {
        assert.equal(status, 400, 'a body that fails mid-way');
        assert.equal(body.reason, 'body_unreadable');
        failingBodies++;
      }
      if (status >= 400) return;
      assert.equal(path, JWKS_PATH, `a ${status} for a random request to ${path}`);
      assert.ok(['GET', 'HEAD'].includes(answer.request.method));
      if (answer.request.method === 'GET') assert.ok(Array.isArray(body?.keys));
    },
    describe: describeWire,
  });
  assert.ok(failingBodies > 0, 'bodies failing mid-way reached the token endpoint');
});

// ---------------------------------------------------------------------------------------------
// Discovery documents

function containsText(value: unknown, text: string, depth = 0): boolean {
  if (depth > 64) return false;
  if (value === text) return true;
  if (value === null || typeof value !== 'object') return false;
  const record = value as Record<string, unknown>;
  return Object.keys(record).some((key) =>
    key === text || containsText(record[key], text, depth + 1)
  );
}

/** Every path outside the two JSON Schemas, each given each wrong type (the schemas are opaque). */
function discoveryTypeConfusion(document: Record<string, unknown>): FuzzCase<string>[] {
  return typeConfusionCases(document).filter(({ how }) =>
    !/(inputSchema|outputSchema)\.[^ ]/.test(how.split(' as ')[0].split(' removed')[0])
  );
}

function discoveryMutation(
  random: Random,
  document: Record<string, unknown>,
  valid: string,
): FuzzCase<string | Uint8Array> {
  const choice = random.below(12);
  if (choice === 0) return { input: randomText(random, 5000, 'unicode'), how: 'random text' };
  if (choice === 1) return { input: jsonText(randomJson(random, 5)), how: 'random JSON' };
  if (choice === 2) return mutateText(random, valid, { maxLength: 200_000 });
  if (choice === 3) {
    const depth = random.between(10_000, 200_000);
    return {
      input: valid.replace(
        '"inputSchema":{',
        `"inputSchema":{"x":${'['.repeat(depth)}${']'.repeat(depth)},`,
      ),
      how: `inputSchema nested ${depth} deep`,
    };
  }
  if (choice === 4) {
    return {
      input: `{"id":"${FAKE_ID}","pad":"${'A'.repeat(4 * 1024 * 1024)}"}`,
      how: 'over 4 MiB',
    };
  }
  const options = { maxLength: 100_000, maxDepth: 50_000 };
  return choice <= 6
    ? mutateJsonBytes(random, document, options)
    : mutateJson(random, document, options);
}

test('discovery: documents with each wrong JSON type, seeded mutations, huge nesting or garbage make the target unknown or keep issuing, never a 5xx', async () => {
  const plane = await deployment();
  const document = await discoveryDocumentOf(FAKE_ID);
  const valid = jsonText(document);
  const tokenRequest = async (abilityId?: string) =>
    await answerOf(
      plane,
      await signedHmacWire(
        JSON.stringify(tokenBody({
          targetServiceId: FAKE_ID,
          scopes: [`${FAKE_ID}.read`],
          ...(abilityId !== undefined ? { abilityId } : {}),
        })),
        nextRequestId('discovery'),
      ),
    );
  const serve = (body: string | Uint8Array) => {
    discoveryAnswer = () =>
      new Response(body as BodyInit, { headers: { 'content-type': 'application/json' } });
  };
  serve(valid);
  assert.equal((await tokenRequest())?.response.status, 200, 'the valid document issues');
  const grid = discoveryTypeConfusion(document);
  type Served = { body: string | Uint8Array; abilityId?: string };
  await fuzz<Served>({
    name: 'discovery documents',
    seeds: [0xd15c0001, 0xd15c0002],
    iterations: Math.max(grid.length, 120),
    generate(random, iteration) {
      const named = random.chance(0.3) ? { abilityId: `${FAKE_ID}.echo` } : {};
      const served = (made: FuzzCase<string | Uint8Array>): FuzzCase<Served> => ({
        input: { body: made.input, ...named },
        how: made.how,
      });
      if (iteration < grid.length && random.seed === 0xd15c0001) return served(grid[iteration]);
      return served(discoveryMutation(random, document, valid));
    },
    async check({ body, abilityId }) {
      serve(body);
      const answer = await tokenRequest(abilityId);
      assert.ok(answer !== undefined);
      const { status, body: answered } = answer.response;
      assert.ok(status === 200 || status === 403, `status ${status}`);
      if (status === 403) {
        assert.ok(
          ['unknown_target', 'unknown_scope', 'unknown_ability'].includes(answered.reason),
          `reason ${answered.reason}`,
        );
        return;
      }
      const parsed = parsedPart(body) as Record<string, unknown> | undefined;
      assert.ok(parsed !== null && typeof parsed === 'object', 'an accepted document is JSON');
      assert.equal(parsed.id, FAKE_ID, 'the endpoint configuration is the identity authority');
      const capabilities = parsed.capabilities as Record<string, unknown> | undefined;
      if (capabilities !== null && typeof capabilities === 'object') {
        assert.ok(
          capabilities.serviceId === undefined || capabilities.serviceId === FAKE_ID,
          'capabilities.serviceId',
        );
      }
      assert.ok(containsText(parsed, `${FAKE_ID}.read`), 'the scope is published');
      assertIssuedToken(answer.response, {
        sub: 'svc-caller',
        aud: FAKE_ID,
        scp: [`${FAKE_ID}.read`],
      });
    },
    describe: ({ body, abilityId }) => `${abilityId ?? 'no ability'} ${describeInput(body, 2000)}`,
  });
  // A refused document is never remembered: the valid one issues again at once.
  serve(valid);
  assert.equal((await tokenRequest())?.response.status, 200, 'the valid document issues again');
});
