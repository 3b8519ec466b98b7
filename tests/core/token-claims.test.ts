import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  type CapabilityTokenClaims,
  readCapabilityClaims,
  writeCapabilityClaimsJson,
} from '../../src/core/token-claims.ts';
import { baselineClaims } from '../support/forge.ts';

function closedClaims(overrides: Record<string, unknown>): CapabilityTokenClaims {
  return readCapabilityClaims(baselineClaims(overrides), (problem) => {
    throw new Error(problem);
  });
}

// Text that exercises every escape JSON.stringify knows: quote, backslash, each control
// character, DEL, non-ASCII in one, two and three UTF-8 bytes, astral characters, lone
// surrogates of both halves, and the line and paragraph separators.
const AWKWARD_TEXTS = [
  '',
  'plain',
  'quote " inside',
  'back\\slash',
  Array.from({ length: 32 }, (_, code) => String.fromCharCode(code)).join(''),
  'del \u007f',
  'caf\u00e9 \u20ac \u{1f511}',
  'lone \ud800 high',
  'lone \udfff low',
  'line \u2028 paragraph \u2029',
  '</script>',
];

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The claims JSON as written, decoded; the buffer is sized for any case below. */
function claimsJson(claims: CapabilityTokenClaims): string {
  const out = new Uint8Array(4096);
  const written = writeCapabilityClaimsJson(claims, out);
  assert.ok(written > 0, 'the claims fit');
  return decoder.decode(out.subarray(0, written));
}

test('writeCapabilityClaimsJson writes exactly the UTF-8 of what JSON.stringify writes for the closed claim set', () => {
  const cases: Record<string, unknown>[] = [
    {},
    { spa: 'service' },
    { spa: 'plane', spb: 'svc-plane', cnf: { jkt: 'A'.repeat(43) } },
    { spa: 'plane', act: { sub: 'svc-caller' }, sub: 'user-1', spk: 'user', spo: 'org-1' },
    { scp: [] },
    { scp: ['svc-a.read', 'svc-a.write', 'svc-a.admin'] },
    // The largest time a claim may hold: the last second a Date can represent.
    { iat: 1, nbf: 2, exp: 8_640_000_000_000 },
  ];
  for (const text of AWKWARD_TEXTS.filter((text) => text.length > 0)) {
    cases.push({ iss: text }, { sub: text }, { aud: text }, { jti: text }, { scp: [text, 'x'] });
    cases.push({ spa: 'plane', act: { sub: text }, spk: text, spo: text, spb: text });
  }
  for (const overrides of cases) {
    const claims = closedClaims(overrides);
    const out = new Uint8Array(4096);
    const written = writeCapabilityClaimsJson(claims, out);
    assert.deepEqual(
      out.subarray(0, written),
      encoder.encode(JSON.stringify(claims)),
      JSON.stringify(overrides),
    );
  }
});

test('writeCapabilityClaimsJson output parses back to the claims it was given', () => {
  for (const text of AWKWARD_TEXTS.filter((text) => text.length > 0)) {
    const claims = closedClaims({ sub: text, scp: [text], spb: text });
    assert.deepEqual(JSON.parse(claimsJson(claims)), claims);
  }
});

test('writeCapabilityClaimsJson reports -1 when the JSON does not fit, and fits a buffer of its exact size', () => {
  const cases = [
    closedClaims({}),
    closedClaims({ sub: 'caf\u00e9 "quoted" \u{1f511}', scp: ['a', 'b'] }),
    closedClaims({ spa: 'plane', act: { sub: 'svc-caller' }, sub: 'user-1', spk: 'user' }),
  ];
  for (const claims of cases) {
    const length = encoder.encode(JSON.stringify(claims)).length;
    const exact = new Uint8Array(length);
    assert.equal(writeCapabilityClaimsJson(claims, exact), length);
    assert.equal(decoder.decode(exact), JSON.stringify(claims));
    for (const size of [0, 1, 8, length - 2, length - 1]) {
      assert.equal(writeCapabilityClaimsJson(claims, new Uint8Array(size)), -1, `size ${size}`);
    }
  }
});

test('readCapabilityClaims reads only own members: claims on a prototype are no claims', () => {
  const refuse = (problem: string): never => {
    throw new Error(problem);
  };
  const inherited = {
    spb: 'svc-plane',
    cnf: { jkt: 'A'.repeat(43) },
    act: { sub: 'svc-other' },
    spa: 'plane',
  };
  const claims = Object.assign(Object.create(inherited), baselineClaims({ spa: undefined }));
  const read = readCapabilityClaims(claims, refuse);
  assert.deepEqual(Object.keys(read), ['iss', 'sub', 'aud', 'scp', 'iat', 'nbf', 'exp', 'jti']);
  // A required claim present only on the prototype is missing.
  const { iss: _iss, ...withoutIssuer } = baselineClaims();
  const inheritedIssuer = Object.assign(
    Object.create({ iss: 'https://plane.test' }),
    withoutIssuer,
  );
  assert.throws(() => readCapabilityClaims(inheritedIssuer, refuse), /claim "iss"/);
});
