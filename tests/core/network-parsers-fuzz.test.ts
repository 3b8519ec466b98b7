// Seeded fuzzing of every parser a service runs on bytes from the network: the capability token
// (compact form, JOSE header, claims), the JWKS (read directly and fetched through a binding),
// the proof of possession, and the propagated metadata (conn-info, X-Svc-Timeout, idempotency
// key, request id) read alone and from a request's headers or query. Each case starts from a
// valid input, applies seeded mutations or is random, and must end in a normal result or a typed
// refusal (never an untyped throw, never a hang); a mutated token or proof is accepted only when
// its signed bytes did not change. A failure prints the seed and the input; replay it with
// SVC_FUZZ_SEED=<seed>.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  capabilityKeyThumbprint,
  importCapabilityKeys,
  readCapabilityJwks,
} from '../../src/core/capability-key-set.ts';
import {
  CAPABILITY_TOKEN_TYP,
  type VerifiedCapabilityToken,
} from '../../src/core/capability-token.ts';
import { parseConnInfo, sanitizeConnInfo } from '../../src/core/conn-info.ts';
import {
  MAX_SVC_TIMEOUT_MS,
  normalizeTimeoutBudget,
  parseTimeoutBudget,
} from '../../src/core/deadline.ts';
import {
  CapabilityAuthError,
  SvcConfigurationError,
  SvcError,
  SvcInternalError,
} from '../../src/core/errors.ts';
import { filterIdempotencyKey } from '../../src/core/idempotency.ts';
import { acceptRequestId } from '../../src/core/request-id.ts';
import { readInboundMetadata } from '../../src/service/inbound-metadata.ts';
import { jwksFromServiceBinding } from '../../src/service/jwks-sources.ts';
import { tokenHashForProof, verifyCapabilityProof } from '../../src/service/proof-verify.ts';
import {
  baselineClaims,
  capabilityHeader,
  encodePart,
  signedToken,
  TEST_ISSUER,
} from '../support/forge.ts';
import {
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
import { type TokenFixture, tokenFixture } from '../support/token-fixture.ts';

/** Bound on one parser call; every parser here answers in well under a millisecond. */
const CALL_BOUND_MS = 2000;

// A fixed clock, so claims and freshness do not depend on when the test runs.
const NOW_MS = 1_800_000_000_000;
const NOW_S = NOW_MS / 1000;
const now = () => NOW_MS;
/** The largest time a `Date` holds, in seconds. */
const MAX_DATE_SECONDS = 8_640_000_000_000;

const TOKEN_REFUSAL_REASONS = new Set([
  'token_missing',
  'token_too_large',
  'token_malformed',
  'unsupported_alg',
  'token_type_mismatch',
  'header_not_allowed',
  'unknown_capability_key_id',
  'bad_signature',
  'invalid_claims',
  'issuer_mismatch',
  'audience_mismatch',
  'token_expired',
  'token_not_yet_valid',
  'token_issued_in_future',
]);

const PROOF_REFUSAL_REASONS = new Set([
  'proof_required',
  'proof_invalid',
  'proof_not_fresh',
  'proof_key_mismatch',
  'proof_token_mismatch',
  'proof_audience_mismatch',
  'proof_ability_mismatch',
]);

/** Values a loosely typed entry point (RPC arguments, bindings) may be handed. */
function hostileValues(valid: string): unknown[] {
  const getterThrows = {};
  Object.defineProperty(getterThrows, 'address', {
    enumerable: true,
    get() {
      throw new Error('a getter ran');
    },
  });
  const nullPrototype = Object.assign(Object.create(null), { address: '1.2.3.4', port: 1 });
  return [
    undefined,
    null,
    0,
    -0,
    Number.NaN,
    Infinity,
    1n,
    true,
    Symbol('token'),
    () => valid,
    [valid],
    { token: valid },
    { toString: () => valid },
    new String(valid),
    new Uint8Array([1, 2, 3]),
    new Date(0),
    new Map([['address', '1.2.3.4']]),
    getterThrows,
    nullPrototype,
    '',
  ];
}

/** Asserts a typed refusal: a project error class with `code`, `status` and a `reason`. */
function assertTyped(error: unknown, label: string): asserts error is SvcError {
  assert.ok(
    error instanceof SvcError,
    `${label}: expected a typed svcplane error, got ${
      error instanceof Error ? `${error.name}: ${error.message}` : describeInput(error)
    }`,
  );
  assert.equal(typeof error.code, 'string', `${label}: code`);
  assert.equal(typeof error.status, 'number', `${label}: status`);
  assert.ok(typeof error.reason === 'string' && error.reason.length > 0, `${label}: reason`);
}

function assertTokenRefusal(error: unknown): void {
  assertTyped(error, 'verifyCapabilityToken');
  assert.ok(
    error instanceof CapabilityAuthError,
    `expected CapabilityAuthError, got ${error.name}`,
  );
  assert.equal(error.code, 'capability_auth');
  assert.equal(error.status, 401);
  assert.equal(error.retryable, false);
  assert.ok(TOKEN_REFUSAL_REASONS.has(error.reason!), `undocumented reason ${error.reason}`);
}

function assertProofRefusal(error: unknown): void {
  assertTyped(error, 'verifyCapabilityProof');
  assert.ok(
    error instanceof CapabilityAuthError,
    `expected CapabilityAuthError, got ${error.name}`,
  );
  assert.equal(error.status, 401);
  assert.ok(PROOF_REFUSAL_REASONS.has(error.reason!), `undocumented reason ${error.reason}`);
}

/**
 * A JWS part or body parsed the way the verifiers parse one (its UTF-8 bytes decoded, a leading BOM
 * dropped, strictly unless `lenient`), or `undefined`.
 */
function parsedJson(text: string | Uint8Array, lenient = false): unknown {
  const bytes = typeof text === 'string' ? new TextEncoder().encode(text) : text;
  try {
    return JSON.parse(new TextDecoder('utf-8', { fatal: !lenient }).decode(bytes));
  } catch {
    return undefined;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

// ---------------------------------------------------------------------------------------------
// Capability token

/** The baseline claim set B at the fixed clock, with a jti fixed per seed. */
function claimsAtNow(jti = 'fuzz-token'): Record<string, unknown> {
  return baselineClaims({ jti, iat: NOW_S - 5, nbf: NOW_S - 5, exp: NOW_S + 120 });
}

const verifyAtNow = (fixture: TokenFixture, token: unknown) =>
  outcomeWithin(() => fixture.verify(token, { now }), CALL_BOUND_MS, 'verifyCapabilityToken');

/** What any accepted token must say, whatever its (signed) claims were. */
function assertSaneIdentity(verified: VerifiedCapabilityToken): void {
  const { identity } = verified;
  assert.equal(identity.issuer, TEST_ISSUER);
  assert.equal(identity.audience, 'svc-a');
  assert.ok(typeof identity.serviceId === 'string' && identity.serviceId.length > 0);
  assert.ok(typeof identity.tokenId === 'string' && identity.tokenId.length > 0);
  assert.ok(Array.isArray(identity.scopes));
  for (const scope of identity.scopes) assert.ok(typeof scope === 'string' && scope.length > 0);
  assert.ok(identity.callerAccess === 'service' || identity.callerAccess === 'plane');
  assert.ok(identity.expiresAt instanceof Date);
  // A time past what a Date can hold is refused, so expiresAt is always a valid Date.
  assert.ok(verified.claims.exp <= MAX_DATE_SECONDS);
  assert.ok(
    identity.expiresAt.getTime() > NOW_MS - 30_000,
    `expiresAt ${String(identity.expiresAt)} is not after now minus the skew`,
  );
}

test('capability token: wire mutations of a signed token are refused with a typed 401 unless the signed bytes are unchanged', async () => {
  const fixture = await tokenFixture();
  const valid = await signedToken(fixture.keys.k1.privateKey, claimsAtNow());
  const baseline = await verifyAtNow(fixture, valid);
  if (!baseline.ok) assert.fail('the baseline token verifies');
  await fuzz({
    name: 'capability token wire mutations',
    seeds: [0x70c0001, 0x70c0002, 0x70c0003],
    iterations: 300,
    generate: (random) => mutateText(random, valid, { maxLength: 9000 }),
    async check(token) {
      const outcome = await verifyAtNow(fixture, token);
      if (!outcome.ok) return assertTokenRefusal(outcome.error);
      assert.ok(sameSignedBytes(valid, token), 'a token whose signed bytes changed was accepted');
      assert.deepEqual(outcome.value.claims, baseline.value.claims);
    },
  });
});

/** A header and payload (text or bytes) signed by k1: the parser sees validly signed hostility. */
interface SignedParts {
  header: string | Uint8Array;
  payload: string | Uint8Array;
  token: string;
}

const describeParts = (parts: SignedParts): string =>
  `header ${describeInput(parts.header, 600)} payload ${describeInput(parts.payload, 900)}`;

async function signParts(
  fixture: TokenFixture,
  header: string | Uint8Array,
  payload: string | Uint8Array,
  key = fixture.keys.k1.privateKey,
): Promise<SignedParts> {
  const part = (value: string | Uint8Array) =>
    typeof value === 'string' ? { raw: value } : { bytes: value };
  return { header, payload, token: await signedToken(key, part(payload), part(header)) };
}

/** What the header must have been for a token to be accepted. */
function assertAcceptableHeader(header: string | Uint8Array): void {
  const value = parsedJson(header);
  assert.ok(isObject(value), 'an accepted token has an object header');
  assert.deepEqual(
    Object.keys(value).sort(),
    ['alg', 'kid', 'typ'],
    'an accepted header carries alg, kid, typ only',
  );
  assert.equal(value.alg, 'ES256');
  assert.equal(value.typ, CAPABILITY_TOKEN_TYP);
  assert.equal(value.kid, 'k1');
}

async function checkSignedParts(fixture: TokenFixture, parts: SignedParts): Promise<void> {
  const outcome = await verifyAtNow(fixture, parts.token);
  if (!outcome.ok) return assertTokenRefusal(outcome.error);
  assertAcceptableHeader(parts.header);
  assertSaneIdentity(outcome.value);
  const claims = parsedJson(parts.payload);
  assert.ok(isObject(claims), 'an accepted token has an object payload');
  // What is reported is what was signed (the last of duplicated members, as JSON.parse reads).
  assert.equal(outcome.value.claims.aud, claims.aud);
  assert.deepEqual(outcome.value.claims.scp, claims.scp);
  assert.equal(outcome.value.claims.exp, claims.exp);
}

test('capability token: every claim and header member of each wrong JSON type, signed, is refused with a typed 401 or verified', async () => {
  const fixture = await tokenFixture();
  const header = capabilityHeader();
  const claims = claimsAtNow();
  const cases: FuzzCase<SignedParts>[] = [];
  for (const mutated of typeConfusionCases(header)) {
    cases.push({
      input: await signParts(fixture, mutated.input, jsonText(claims)),
      how: `header ${mutated.how}`,
    });
  }
  for (const mutated of typeConfusionCases(claims)) {
    cases.push({
      input: await signParts(fixture, jsonText(header), mutated.input),
      how: `payload ${mutated.how}`,
    });
  }
  await fuzz({
    name: 'capability token type confusion',
    seeds: [0],
    iterations: cases.length,
    generate: (_random, iteration) => cases[iteration],
    check: (parts) => checkSignedParts(fixture, parts),
    describe: describeParts,
  });
});

test('capability token: seeded header and claim mutations, signed, are refused with a typed 401 or verified with what was signed', async () => {
  const fixture = await tokenFixture();
  const header = capabilityHeader();
  const options = { maxLength: 2500, maxDepth: 1400 };
  await fuzz({
    name: 'capability token signed mutations',
    seeds: [0x51c0001, 0x51c0002, 0x51c0003],
    iterations: 150,
    async generate(random, iteration) {
      const claims = claimsAtNow(`fuzz-${iteration}`);
      const target = random.below(3);
      const mutateHeader = target !== 1;
      const mutatePayload = target !== 0;
      const asBytes = random.chance(0.3);
      const headerCase = mutateHeader
        ? asBytes ? mutateJsonBytes(random, header, options) : mutateJson(random, header, options)
        : { input: jsonText(header), how: 'header kept' };
      const payloadCase = mutatePayload
        ? asBytes ? mutateJsonBytes(random, claims, options) : mutateJson(random, claims, options)
        : { input: jsonText(claims), how: 'payload kept' };
      return {
        input: await signParts(fixture, headerCase.input, payloadCase.input),
        how: `${headerCase.how} | ${payloadCase.how}`,
      };
    },
    check: (parts) => checkSignedParts(fixture, parts),
    describe: describeParts,
  });
});

test('capability token: random text, random compact forms and non-string values are refused with a typed 401', async () => {
  const fixture = await tokenFixture();
  const valid = await signedToken(fixture.keys.k1.privateKey, claimsAtNow());
  const hostile = hostileValues(valid);
  await fuzz<unknown>({
    name: 'capability token random inputs',
    seeds: [0x4a40001, 0x4a40002, 0x4a40003],
    iterations: 250,
    generate(random) {
      const choice = random.below(5);
      if (choice === 0) return { input: random.pick(hostile), how: 'a non-string value' };
      if (choice === 1) {
        const alphabet = random.pick(['compact', 'base64url', 'ascii', 'unicode'] as const);
        return { input: randomText(random, 9000, alphabet), how: `random ${alphabet} text` };
      }
      if (choice === 2) {
        const segments = Array.from(
          { length: random.between(1, 5) },
          () => randomText(random, 400, 'base64url'),
        );
        return { input: segments.join('.'), how: `${segments.length} random segments` };
      }
      // Plausible JSON parts with an unsigned (random) signature.
      const header = random.chance(0.5)
        ? jsonText(capabilityHeader())
        : jsonText(randomJson(random));
      const payload = jsonText(random.chance(0.5) ? claimsAtNow() : randomJson(random));
      return {
        input: `${encodePart({ raw: header })}.${encodePart({ raw: payload })}.${
          encodePart({ bytes: randomBytes(random, random.pick([0, 32, 64, 64, 65, 72])) })
        }`,
        how: 'JSON parts with a random signature',
      };
    },
    async check(input) {
      const outcome = await verifyAtNow(fixture, input);
      assert.ok(!outcome.ok, 'a random input was accepted');
      assertTokenRefusal(outcome.error);
    },
  });
});

// ---------------------------------------------------------------------------------------------
// JWKS

/** What every key the reader returns must look like. */
function assertReadKeys(keys: unknown): void {
  assert.ok(Array.isArray(keys));
  const kids = new Set<string>();
  for (const key of keys as Record<string, unknown>[]) {
    assert.equal(key.kty, 'EC');
    assert.equal(key.crv, 'P-256');
    for (const coordinate of [key.x, key.y]) {
      assert.ok(typeof coordinate === 'string' && /^[A-Za-z0-9_-]{43}$/.test(coordinate));
    }
    assert.ok(typeof key.kid === 'string' && key.kid.length > 0);
    assert.ok(!kids.has(key.kid as string), 'kids are unique');
    kids.add(key.kid as string);
    for (const member of Object.keys(key)) {
      assert.ok(['kty', 'crv', 'x', 'y', 'kid', 'alg', 'use'].includes(member), member);
    }
    if (key.alg !== undefined) assert.equal(key.alg, 'ES256');
    if (key.use !== undefined) assert.equal(key.use, 'sig');
  }
}

class Sentinel extends Error {}

/** Reads (and imports) a JWKS value; refusals must be typed, `fail` must be the only exit. */
async function checkJwksValue(value: unknown): Promise<void> {
  const read = await outcomeWithin(() => readCapabilityJwks(value), CALL_BOUND_MS, 'read');
  if (!read.ok) {
    assertTyped(read.error, 'readCapabilityJwks');
    assert.ok(read.error instanceof SvcConfigurationError);
    assert.equal(read.error.reason, 'invalid_jwks');
  } else {
    assertReadKeys(read.value);
    const imported = await outcomeWithin(
      () => importCapabilityKeys(read.value),
      CALL_BOUND_MS,
      'import',
    );
    if (imported.ok) {
      assert.deepEqual([...imported.value.keys()].sort(), read.value.map((key) => key.kid).sort());
    } else {
      assertTyped(imported.error, 'importCapabilityKeys');
      assert.equal(imported.error.reason, 'invalid_jwks');
    }
  }
  const withHandler = await outcomeWithin(
    () =>
      readCapabilityJwks(value, () => {
        throw new Sentinel();
      }),
    CALL_BOUND_MS,
    'read with a handler',
  );
  assert.equal(withHandler.ok, read.ok, 'the problem handler is the only way out');
  if (!withHandler.ok) assert.ok(withHandler.error instanceof Sentinel);
}

/** Fetches a JWKS body through a binding; the lookup yields a key, none, or a typed 503. */
async function checkFetchedJwks(body: string | Uint8Array, status = 200): Promise<void> {
  const keys = jwksFromServiceBinding(
    {
      fetch: () =>
        Promise.resolve(
          new Response(body as BodyInit, {
            status,
            headers: { 'content-type': 'application/jwk-set+json' },
          }),
        ),
    },
    { cacheTtlSeconds: 0, failureCooldownMs: 0, fetchTimeoutMs: CALL_BOUND_MS },
  );
  const outcome = await outcomeWithin(() => keys.getKey('k1'), CALL_BOUND_MS, 'getKey');
  if (outcome.ok) {
    assert.ok(outcome.value === undefined || typeof outcome.value === 'object');
    return;
  }
  assertTyped(outcome.error, 'jwksFromServiceBinding.getKey');
  assert.ok(outcome.error instanceof SvcInternalError);
  assert.equal(outcome.error.status, 503);
  assert.equal(outcome.error.reason, 'jwks_unavailable');
}

test('JWKS: every member of each wrong JSON type is read, left out or refused as invalid_jwks', async () => {
  const fixture = await tokenFixture();
  const jwks = JSON.parse(JSON.stringify(fixture.authority.jwks));
  const cases = typeConfusionCases(jwks);
  await fuzz({
    name: 'JWKS type confusion',
    seeds: [0],
    iterations: cases.length,
    generate: (_random, iteration) => cases[iteration],
    async check(text) {
      await checkJwksValue(JSON.parse(text));
      await checkFetchedJwks(text);
    },
  });
});

test('JWKS: seeded mutations and random documents are read, refused as invalid_jwks, or fail closed with a typed 503 when fetched', async () => {
  const fixture = await tokenFixture();
  const jwks = JSON.parse(JSON.stringify(fixture.authority.jwks));
  await fuzz<string | Uint8Array>({
    name: 'JWKS mutations',
    seeds: [0x1e450001, 0x1e450002, 0x1e450003],
    iterations: 200,
    generate(random) {
      const choice = random.below(10);
      if (choice === 0) return { input: jsonText(randomJson(random)), how: 'random JSON' };
      if (choice === 1) return { input: randomText(random, 2000, 'unicode'), how: 'random text' };
      if (choice <= 3) return mutateJsonBytes(random, jwks, { maxLength: 20_000, maxDepth: 5000 });
      return mutateJson(random, jwks, { maxLength: 20_000, maxDepth: 5000 });
    },
    async check(body) {
      const value = parsedJson(body);
      if (value !== undefined) await checkJwksValue(value);
      await checkFetchedJwks(body);
    },
  });
});

// ---------------------------------------------------------------------------------------------
// Proof of possession

interface ProofSetup {
  token: string;
  jkt: string;
  header: Record<string, unknown>;
  claims: Record<string, unknown>;
  proof: string;
  key: CryptoKey;
}

async function proofSetup(fixture: TokenFixture): Promise<ProofSetup> {
  const token = await signedToken(fixture.keys.k1.privateKey, claimsAtNow());
  const { kty, crv, x, y } = fixture.keys.client.publicJwk;
  const header = { alg: 'ES256', typ: 'svc-pop+jwt', jwk: { kty, crv, x, y } };
  const claims = {
    ath: await tokenHashForProof(token),
    aud: 'svc-a',
    ab: 'svc-a.echo',
    iat: NOW_S - 5,
    jti: 'fuzz-proof',
  };
  const key = fixture.keys.client.privateKey;
  return {
    token,
    jkt: await capabilityKeyThumbprint(fixture.keys.client.publicJwk),
    header,
    claims,
    key,
    proof: await signedToken(key, claims, header),
  };
}

const verifyProofAtNow = (setup: ProofSetup, proof: unknown, token = setup.token) =>
  outcomeWithin(
    () =>
      verifyCapabilityProof(proof, {
        token,
        jkt: setup.jkt,
        audience: 'svc-a',
        abilityId: 'svc-a.echo',
        now,
      }),
    CALL_BOUND_MS,
    'verifyCapabilityProof',
  );

test('proof of possession: wire mutations of a proof, or of the token it binds, are refused with a typed 401 unless nothing signed changed', async () => {
  const fixture = await tokenFixture();
  const setup = await proofSetup(fixture);
  assert.ok((await verifyProofAtNow(setup, setup.proof)).ok, 'the baseline proof verifies');
  await fuzz<{ proof: string; token: string }>({
    name: 'proof wire mutations',
    seeds: [0x9f0f0001, 0x9f0f0002, 0x9f0f0003],
    iterations: 200,
    generate(random) {
      if (random.chance(0.25)) {
        const token = mutateText(random, setup.token, { maxLength: 9000 });
        return { input: { proof: setup.proof, token: token.input }, how: `token: ${token.how}` };
      }
      const proof = mutateText(random, setup.proof, { maxLength: 5000 });
      return { input: { proof: proof.input, token: setup.token }, how: `proof: ${proof.how}` };
    },
    async check({ proof, token }) {
      const outcome = await verifyProofAtNow(setup, proof, token);
      if (!outcome.ok) return assertProofRefusal(outcome.error);
      assert.ok(sameSignedBytes(setup.proof, proof), 'a proof whose signed bytes changed passed');
      assert.equal(token, setup.token, 'a proof passed for another token');
    },
  });
});

test('proof of possession: seeded header and claim mutations, signed by the bound key, are refused with a typed 401 or bind token, service and ability', async () => {
  const fixture = await tokenFixture();
  const setup = await proofSetup(fixture);
  const grid = [
    ...typeConfusionCases(setup.header).map((c) => ({ ...c, part: 'header' as const })),
    ...typeConfusionCases(setup.claims).map((c) => ({ ...c, part: 'payload' as const })),
  ];
  const options = { maxLength: 1500, maxDepth: 900 };
  await fuzz<SignedParts>({
    name: 'proof signed mutations',
    seeds: [0x9f510001, 0x9f510002, 0x9f510003],
    iterations: Math.max(grid.length, 150),
    async generate(random: Random, iteration: number) {
      let header: FuzzCase<string | Uint8Array> = { input: jsonText(setup.header), how: 'kept' };
      let payload: FuzzCase<string | Uint8Array> = { input: jsonText(setup.claims), how: 'kept' };
      if (iteration < grid.length && random.seed === 0x9f510001) {
        const cell = grid[iteration];
        if (cell.part === 'header') header = cell;
        else payload = cell;
      } else {
        const target = random.below(3);
        if (target !== 1) {
          header = random.chance(0.3)
            ? mutateJsonBytes(random, setup.header, options)
            : mutateJson(random, setup.header, options);
        }
        if (target !== 0) {
          payload = random.chance(0.3)
            ? mutateJsonBytes(random, setup.claims, options)
            : mutateJson(random, setup.claims, options);
        }
      }
      return {
        input: await signParts(fixture, header.input, payload.input, setup.key),
        how: `header ${header.how} | payload ${payload.how}`,
      };
    },
    async check(parts) {
      const outcome = await verifyProofAtNow(setup, parts.token);
      if (!outcome.ok) return assertProofRefusal(outcome.error);
      // jose decodes the protected header without `fatal`, the payload is decoded strictly.
      const header = parsedJson(parts.header, true);
      const claims = parsedJson(parts.payload);
      assert.ok(isObject(header) && isObject(claims), 'an accepted proof has object parts');
      assert.equal(header.alg, 'ES256');
      assert.equal(header.typ, 'svc-pop+jwt');
      assert.ok(isObject(header.jwk));
      assert.equal(await capabilityKeyThumbprint(header.jwk), setup.jkt);
      assert.equal(claims.ath, setup.claims.ath);
      assert.equal(claims.aud, 'svc-a');
      assert.equal(claims.ab, 'svc-a.echo');
      assert.ok(Number.isInteger(claims.iat) && Math.abs(NOW_S - (claims.iat as number)) <= 90);
    },
    describe: describeParts,
  });
});

test('proof of possession: random text and non-string values are refused with a typed 401', async () => {
  const fixture = await tokenFixture();
  const setup = await proofSetup(fixture);
  const hostile = hostileValues(setup.proof);
  await fuzz<unknown>({
    name: 'proof random inputs',
    seeds: [0x9f4a0001, 0x9f4a0002, 0x9f4a0003],
    iterations: 200,
    generate(random) {
      if (random.chance(0.3)) return { input: random.pick(hostile), how: 'a non-string value' };
      const alphabet = random.pick(['compact', 'base64url', 'ascii', 'unicode'] as const);
      return { input: randomText(random, 5000, alphabet), how: `random ${alphabet} text` };
    },
    async check(input) {
      const outcome = await verifyProofAtNow(setup, input);
      assert.ok(!outcome.ok, 'a random proof was accepted');
      assertProofRefusal(outcome.error);
    },
  });
});

// ---------------------------------------------------------------------------------------------
// Propagated metadata

const CONN_INFO = { address: '203.0.113.7', addressType: 'IPv4', port: 443, transport: 'tcp' };
const CONN_INFO_FIELDS = ['address', 'addressType', 'port', 'transport'];

/** Sanitised conn-info holds only valid known fields, each copied from the input. */
function assertSanitizedConnInfo(result: unknown, source: unknown): void {
  if (result === undefined) return;
  assert.ok(isObject(result));
  assert.deepEqual(Object.keys(result), ['remote']);
  const remote = result.remote as Record<string, unknown>;
  assert.ok(isObject(remote) && Object.keys(remote).length > 0);
  for (const field of Object.keys(remote)) assert.ok(CONN_INFO_FIELDS.includes(field), field);
  if (remote.address !== undefined) {
    assert.match(remote.address as string, /^[0-9A-Za-z.:%_-]{1,64}$/);
  }
  if (remote.addressType !== undefined) {
    assert.ok(remote.address !== undefined, 'an address type never comes without its address');
    assert.ok(remote.addressType === 'IPv4' || remote.addressType === 'IPv6');
  }
  if (remote.port !== undefined) {
    const port = remote.port as number;
    assert.ok(Number.isInteger(port) && port >= 0 && port <= 65535);
  }
  if (remote.transport !== undefined) {
    assert.ok(remote.transport === 'tcp' || remote.transport === 'udp');
  }
  // Nothing is invented: each kept field is the received one.
  assert.ok(isObject(source));
  const fields = Object.hasOwn(source, 'remote') ? source.remote : source;
  assert.ok(isObject(fields));
  for (const field of Object.keys(remote)) {
    assert.ok(Object.is(remote[field], fields[field]), `${field} was not received`);
  }
}

test('conn-info: mutated and random X-Svc-Conn-Info values are sanitised to known, valid, received fields or dropped', async () => {
  const flat = jsonText(CONN_INFO);
  const grid = [
    ...typeConfusionCases(CONN_INFO),
    ...typeConfusionCases({ remote: CONN_INFO }),
  ];
  await fuzz<string>({
    name: 'conn-info',
    seeds: [0xc0440001, 0xc0440002, 0xc0440003],
    iterations: 600,
    generate(random, iteration) {
      if (iteration < grid.length && random.seed === 0xc0440001) return grid[iteration];
      const choice = random.below(6);
      if (choice === 0) return { input: randomText(random, 1200, 'unicode'), how: 'random text' };
      if (choice === 1) return mutateText(random, flat, { maxLength: 1500 });
      if (choice === 2) return { input: jsonText(randomJson(random)), how: 'random JSON' };
      return mutateJson(random, random.chance(0.5) ? CONN_INFO : { remote: CONN_INFO }, {
        maxLength: 1100,
        maxDepth: 400,
      });
    },
    async check(raw) {
      const outcome = await outcomeWithin(() => parseConnInfo(raw), CALL_BOUND_MS, 'parseConnInfo');
      if (!outcome.ok) assert.fail(`parseConnInfo threw ${String(outcome.error)}`);
      if (raw.length > 1024) assert.equal(outcome.value, undefined, 'oversized input is dropped');
      else assertSanitizedConnInfo(outcome.value, parsedJson(raw));
    },
  });
  for (const value of hostileValues(flat)) {
    const outcome = await outcomeWithin(() => sanitizeConnInfo(value), CALL_BOUND_MS);
    if (!outcome.ok) assert.fail(`sanitizeConnInfo threw for ${describeInput(value)}`);
    assertSanitizedConnInfo(outcome.value, value);
  }
});

/** The budget rule, written out: plain decimal digits, positive, clamped. */
function expectedBudget(raw: string | null): number | undefined {
  if (raw === null || !/^[0-9]+$/.test(raw) || Number(raw) <= 0) return undefined;
  return Math.min(Number(raw), MAX_SVC_TIMEOUT_MS);
}

test('X-Svc-Timeout: mutated and random budgets are read as a clamped positive integer or ignored, never thrown', async () => {
  await fuzz<string>({
    name: 'timeout budget',
    seeds: [0x71e00001, 0x71e00002, 0x71e00003],
    iterations: 800,
    generate(random) {
      const choice = random.below(4);
      if (choice === 0) return { input: randomText(random, 40, 'ascii'), how: 'random ascii' };
      if (choice === 1) {
        const digits = randomText(random, 400, 'base64url').replace(/[^0-9]/g, '');
        return { input: digits, how: 'random digits' };
      }
      return mutateText(random, random.pick(['5000', '1', '600000', '700000']), { maxLength: 400 });
    },
    check(raw) {
      const budget = parseTimeoutBudget(raw);
      assert.equal(budget, expectedBudget(raw));
      if (budget !== undefined) {
        assert.ok(Number.isInteger(budget) && budget >= 1 && budget <= MAX_SVC_TIMEOUT_MS);
      }
    },
  });
  const numbers = [
    0,
    -0,
    -1,
    1,
    1.5,
    2 ** 53,
    Number.MAX_SAFE_INTEGER,
    1e308,
    Number.NaN,
    Infinity,
  ];
  for (const value of [...numbers, ...hostileValues('5000')]) {
    const budget = normalizeTimeoutBudget(value);
    const expected = typeof value === 'number' && Number.isSafeInteger(value) && value > 0
      ? Math.min(value, MAX_SVC_TIMEOUT_MS)
      : undefined;
    assert.equal(budget, expected, describeInput(value));
  }
  assert.equal(parseTimeoutBudget(null), undefined);
  assert.equal(parseTimeoutBudget(undefined), undefined);
});

test('idempotency key and request id: mutated and random values are kept exactly when well formed, else dropped', async () => {
  await fuzz<string>({
    name: 'idempotency key and request id',
    seeds: [0x1de00001, 0x1de00002, 0x1de00003],
    iterations: 800,
    generate(random) {
      const choice = random.below(4);
      if (choice === 0) {
        return {
          input: randomText(random, 400, random.pick(['ascii', 'unicode'] as const)),
          how: 'random',
        };
      }
      const base = random.pick(['retry-2026_01=', 'a'.repeat(255), crypto.randomUUID(), 'r-1']);
      return mutateText(random, base, { maxLength: 300 });
    },
    check(raw) {
      const key = filterIdempotencyKey(raw);
      assert.equal(key, /^[A-Za-z0-9_\-=]{1,255}$/.test(raw) ? raw : undefined, 'idempotency key');
      const id = acceptRequestId(raw);
      assert.equal(id, /^[\x21-\x7e]{1,200}$/.test(raw) ? raw : undefined, 'request id');
    },
  });
  for (const value of hostileValues('retry-1')) {
    assert.equal(filterIdempotencyKey(value), undefined, describeInput(value));
    assert.equal(acceptRequestId(value), undefined, describeInput(value));
  }
});

interface MetadataInput {
  channel: 'header' | 'query';
  values: Record<string, string>;
}

const METADATA_NAMES = {
  timeout: ['X-Svc-Timeout', 'timeout'],
  idempotency: ['X-Svc-Idempotency-Key', 'idempotency_key'],
  connInfo: ['X-Svc-Conn-Info', 'conn_info'],
} as const;

/** The request a service would receive, or `undefined` when no runtime could send it. */
function metadataRequest({ channel, values }: MetadataInput): Request | undefined {
  try {
    if (channel === 'header') {
      return new Request('https://svc-a.internal/rpc/svc-a.echo', { headers: values });
    }
    const url = new URL('https://svc-a.internal/rpc/svc-a.echo');
    for (const [name, value] of Object.entries(values)) url.searchParams.set(name, value);
    return new Request(url);
  } catch {
    return undefined;
  }
}

test('inbound metadata: headers and query parameters with hostile values yield only filtered metadata, never a throw', async () => {
  let sendable = 0;
  await fuzz<MetadataInput>({
    name: 'inbound metadata',
    seeds: [0x3e7a0001, 0x3e7a0002, 0x3e7a0003],
    iterations: 200,
    generate(random) {
      const channel = random.pick(['header', 'query'] as const);
      const index = channel === 'header' ? 0 : 1;
      const values: Record<string, string> = {};
      const steps: string[] = [];
      const bases = { timeout: '5000', idempotency: 'retry-1', connInfo: jsonText(CONN_INFO) };
      for (const field of ['timeout', 'idempotency', 'connInfo'] as const) {
        if (random.chance(0.2)) continue;
        const mutated = random.chance(0.3)
          ? { input: bases[field], how: 'valid' }
          : field === 'connInfo' && random.chance(0.5)
          ? mutateJson(random, CONN_INFO, { maxLength: 1100, maxDepth: 300 })
          : mutateText(random, bases[field], { maxLength: 1500 });
        values[METADATA_NAMES[field][index]] = mutated.input;
        steps.push(`${field}: ${mutated.how}`);
      }
      return { input: { channel, values }, how: `${channel}: ${steps.join('; ')}` };
    },
    async check(input) {
      const request = metadataRequest(input);
      if (request === undefined) return;
      sendable++;
      const channel = input.channel;
      const outcome = await outcomeWithin(
        () => readInboundMetadata(request, channel),
        CALL_BOUND_MS,
        'readInboundMetadata',
      );
      if (!outcome.ok) assert.fail(`readInboundMetadata threw ${String(outcome.error)}`);
      const metadata = outcome.value;
      for (const field of Object.keys(metadata)) {
        assert.ok(['budgetMs', 'idempotencyKey', 'connInfo'].includes(field), field);
      }
      const received = (name: readonly [string, string]) =>
        channel === 'header'
          ? request.headers.get(name[0])
          : new URL(request.url).searchParams.get(name[1]);
      assert.equal(metadata.budgetMs, expectedBudget(received(METADATA_NAMES.timeout)));
      assert.equal(
        metadata.idempotencyKey,
        filterIdempotencyKey(received(METADATA_NAMES.idempotency)),
      );
      const connInfo = received(METADATA_NAMES.connInfo);
      if (metadata.connInfo !== undefined) {
        assert.ok(connInfo !== null && connInfo.length <= 1024);
        assertSanitizedConnInfo(metadata.connInfo, parsedJson(connInfo));
      }
    },
    describe: (input) => describeInput(input, 3000),
  });
  assert.ok(sendable > 100, `most generated requests can be built (${sendable})`);
});
