import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  decodeBase64Url,
  encodeBase64Url,
  encodeBase64UrlText,
  hasCanonicalBase64UrlEnding,
  isCanonicalBase64Url,
  writeBase64UrlUnits,
} from '../../src/core/base64url.ts';

/** Unpadded base64url through the platform's own btoa: a reference independent of ours. */
function referenceBase64Url(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_')
    .replace(/=+$/, '');
}

test('base64url round-trips every length and byte value without padding', () => {
  for (let length = 0; length < 70; length++) {
    const bytes = new Uint8Array(length).map((_, i) => (i * 37 + length * 11) & 0xff);
    const text = encodeBase64Url(bytes);
    assert.doesNotMatch(text, /[=+/]/);
    assert.deepEqual(decodeBase64Url(text), bytes);
  }
  const all = new Uint8Array(256).map((_, i) => i);
  assert.deepEqual(decodeBase64Url(encodeBase64Url(all)), all);
  assert.equal(encodeBase64UrlText('{"a":"é"}'), 'eyJhIjoiw6kifQ');
});

test('writeBase64UrlUnits writes the reference encoding at any unit and nothing beyond one spare byte', () => {
  for (let length = 0; length < 70; length++) {
    const bytes = new Uint8Array(length).map((_, i) => (i * 53 + length * 7 + 3) & 0xff);
    const expected = referenceBase64Url(bytes);
    for (const unitOffset of [0, 1, 5]) {
      const units = new Uint16Array(unitOffset + 50);
      const out = new Uint8Array(units.buffer);
      out.fill(0x2a);
      const written = writeBase64UrlUnits(bytes, length, units, unitOffset);
      assert.equal(written, expected.length, `length ${length}`);
      const start = unitOffset * 2;
      const text = String.fromCharCode(...out.subarray(start, start + written));
      assert.equal(text, expected, `length ${length} at unit ${unitOffset}`);
      assert.ok(out.subarray(0, start).every((byte) => byte === 0x2a), 'nothing before');
      const after = start + written + (written % 2);
      assert.ok(out.subarray(after).every((byte) => byte === 0x2a), 'nothing past the unit');
    }
  }
});

test('base64url decoding refuses padding, foreign characters and impossible lengths', () => {
  for (const text of ['QQ==', 'QQ=', 'a+b/', 'ab c', 'ab\n', 'abcde', 'a', '%41', 'ab*d']) {
    assert.equal(decodeBase64Url(text), undefined, JSON.stringify(text));
  }
});

test('base64url decoding refuses non-zero trailing bits (one encoding per byte string)', () => {
  // "QQ" and "QR" would both decode to "A" in a lenient decoder.
  assert.deepEqual(decodeBase64Url('QQ'), new Uint8Array([0x41]));
  assert.equal(decodeBase64Url('QR'), undefined);
  assert.deepEqual(decodeBase64Url('QUI'), new Uint8Array([0x41, 0x42]));
  assert.equal(decodeBase64Url('QUJ'), undefined);
  assert.equal(hasCanonicalBase64UrlEnding('QR'), false);
  assert.equal(hasCanonicalBase64UrlEnding('Qw'), true);
  assert.equal(isCanonicalBase64Url(''), true);
});
