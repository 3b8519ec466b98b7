// Security checklist A13 (request size and DoS bounds) for the token endpoint of the real plane:
// deeply nested JSON (DOS-02) and oversized headers (DOS-03). The REST and MCP variants of these
// cases belong to the front doors. DOS-01, DOS-07 and DOS-08 are in tests/plane/token-endpoint.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  createPlaneDeployment,
  hmacTokenRequest,
  type PlaneDeployment,
  type ReadResponse,
  TOKEN_URL,
  tokenBody,
} from './plane-fixture.ts';

/** A 4xx refusal with the endpoint's headers and no token. */
function assertRefusedWithoutToken(response: ReadResponse, label: string): void {
  assert.ok(response.status >= 400 && response.status < 500, `${label}: ${response.status}`);
  assert.equal(response.headers.get('Cache-Control'), 'no-store', label);
  assert.equal(response.headers.get('Content-Type'), 'application/problem+json', label);
  assert.equal(response.body?.token, undefined, label);
}

/** The plane still issues a token to a well-behaved caller. */
async function stillServes(fx: PlaneDeployment): Promise<void> {
  const response = await fx.send(await hmacTokenRequest(tokenBody()));
  assert.equal(response.status, 200);
  assert.equal(typeof response.body.token, 'string');
}

const nestedArrays = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
const nestedObjects = (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);

test('DOS-02 100 000 nested arrays or objects, signed or not, are refused unparsed with 413', async () => {
  const fx = await createPlaneDeployment({ countSigningKeyLookups: true });
  const started = Date.now();
  for (const nested of [nestedArrays(100_000), nestedObjects(100_000)]) {
    const body = `{"callerServiceId":"svc-caller","targetServiceId":"svc-a","scopes":${nested}}`;
    const signed = await fx.send(await hmacTokenRequest(body));
    assertRefusedWithoutToken(signed, 'signed');
    assert.equal(signed.status, 413);
    assert.equal(signed.body.reason, 'body_too_large');
    const unsigned = await fx.send(
      new Request(TOKEN_URL, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body,
      }),
    );
    assertRefusedWithoutToken(unsigned, 'unsigned');
    assert.ok([401, 413].includes(unsigned.status), `unsigned: ${unsigned.status}`);
  }
  assert.ok(Date.now() - started < 2_000, 'answered within 2 s');
  assert.equal(fx.counters.signingKeyLookups, 0, 'nothing reached the signer');
  await stillServes(fx);
});

test('DOS-02 nesting that fits the body limit is parsed and refused with 400 naming the field', async () => {
  const fx = await createPlaneDeployment({ countSigningKeyLookups: true });
  const cases: [string, string][] = [
    ['scopes', nestedArrays(8_000)],
    ['scopes', `[${nestedObjects(2_600)}]`],
    ['targetServiceId', nestedObjects(2_600)],
  ];
  for (const [field, nested] of cases) {
    const fields = { callerServiceId: '"svc-caller"', targetServiceId: '"svc-a"', scopes: '[]' };
    const body = `{${
      Object.entries({ ...fields, [field]: nested }).map(([name, value]) => `"${name}":${value}`)
        .join(',')
    }}`;
    assert.ok(body.length <= 16 * 1024, `the case must fit the body limit (${body.length})`);
    const response = await fx.send(await hmacTokenRequest(body));
    assertRefusedWithoutToken(response, field);
    assert.equal(response.status, 400, field);
    assert.equal(response.body.code, 'ability_validation');
    assert.equal(response.body.issues[0].path[0], field);
  }
  assert.equal(fx.counters.signingKeyLookups, 0, 'nothing reached the signer');
  await stillServes(fx);
});

test('DOS-03 a 64 KiB Authorization is refused 401 with a challenge for each scheme', async () => {
  const fx = await createPlaneDeployment({ countSigningKeyLookups: true });
  const filler = 'A'.repeat(64 * 1024);
  const cases: [string, RegExp][] = [
    [`Svc-HMAC-SHA256 ${filler}`, /Svc-HMAC-SHA256/],
    [`Svc-JWK ${filler}`, /Svc-JWK/],
    [`Bearer ${filler}`, /Svc-HMAC-SHA256/],
    [filler, /Svc-HMAC-SHA256/],
  ];
  for (const [authorization, challenge] of cases) {
    const response = await fx.send(
      await hmacTokenRequest(tokenBody(), { headers: { Authorization: authorization } }),
    );
    const label = authorization.slice(0, 16);
    assertRefusedWithoutToken(response, label);
    assert.equal(response.status, 401, label);
    assert.equal(response.body.code, 'capability_auth', label);
    assert.match(response.headers.get('WWW-Authenticate') ?? '', challenge, label);
    // The refusal does not echo the oversized value back.
    assert.ok(JSON.stringify(response.body).length < 4096, label);
  }
  assert.equal(fx.counters.signingKeyLookups, 0, 'nothing reached the signer');
  await stillServes(fx);
});

test('DOS-03 500 headers: an unsigned request is refused 401; a signed one is unaffected', async () => {
  const fx = await createPlaneDeployment({ countSigningKeyLookups: true });
  const junk: Record<string, string> = {};
  for (let i = 0; i < 500; i++) junk[`X-Junk-${i}`] = 'x'.repeat(64);
  const unsigned = await fx.send(
    new Request(TOKEN_URL, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...junk },
      body: JSON.stringify(tokenBody()),
    }),
  );
  assertRefusedWithoutToken(unsigned, 'unsigned');
  assert.equal(unsigned.status, 401);
  assert.equal(fx.counters.signingKeyLookups, 0, 'the unsigned request reached no signer');
  // Headers the signature does not cover change nothing for a caller that did sign.
  const signed = await fx.send(await hmacTokenRequest(tokenBody(), { headers: junk }));
  assert.equal(signed.status, 200);
  assert.equal(typeof signed.body.token, 'string');
});
