import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  capabilityClaimsJson,
  type CapabilityTokenClaims,
  readCapabilityClaims,
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

test('capabilityClaimsJson writes exactly what JSON.stringify writes for the closed claim set', () => {
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
    assert.equal(capabilityClaimsJson(claims), JSON.stringify(claims), JSON.stringify(overrides));
  }
});

test('capabilityClaimsJson output parses back to the claims it was given', () => {
  for (const text of AWKWARD_TEXTS.filter((text) => text.length > 0)) {
    const claims = closedClaims({ sub: text, scp: [text], spb: text });
    assert.deepEqual(JSON.parse(capabilityClaimsJson(claims)), claims);
  }
});
