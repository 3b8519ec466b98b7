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

test('writeBase64UrlUnits writes the reference encoding of any range at any unit and nothing beyond one spare byte', () => {
  for (let length = 0; length < 70; length++) {
    const bytes = new Uint8Array(length).map((_, i) => (i * 53 + length * 7 + 3) & 0xff);
    for (const from of [0, 1, 3, 6, 7].filter((from) => from <= length)) {
      const expected = referenceBase64Url(bytes.subarray(from));
      for (const unitOffset of [0, 1, 5]) {
        const units = new Uint16Array(unitOffset + 50);
        const out = new Uint8Array(units.buffer);
        out.fill(0x2a);
        const written = writeBase64UrlUnits(bytes, from, length, units, unitOffset);
        const where = `bytes ${from}..${length} at unit ${unitOffset}`;
        assert.equal(written, expected.length, where);
        const start = unitOffset * 2;
        const text = String.fromCharCode(...out.subarray(start, start + written));
        assert.equal(text, expected, where);
        assert.ok(out.subarray(0, start).every((byte) => byte === 0x2a), 'nothing before');
        const after = start + written + (written % 2);
        assert.ok(out.subarray(after).every((byte) => byte === 0x2a), 'nothing past the unit');
      }
    }
  }
});

test('writeBase64UrlUnits from a multiple of three bytes writes what the whole encoding has there', () => {
  const bytes = new Uint8Array(40).map((_, i) => (i * 29 + 11) & 0xff);
  const whole = referenceBase64Url(bytes);
  for (const from of [3, 12, 39]) {
    const units = new Uint16Array(40);
    const written = writeBase64UrlUnits(bytes, from, bytes.length, units, 0);
    const text = String.fromCharCode(...new Uint8Array(units.buffer).subarray(0, written));
    assert.equal(text, whole.slice((from / 3) * 4), `from byte ${from}`);
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
