import assert from 'node:assert/strict';
import { test } from 'node:test';
import { constantTimeEqual, HmacSha256Key, sha256 } from '../../src/core/sha256.ts';

const utf8 = new TextEncoder();

function hex(bytes: ArrayBuffer | Uint8Array): string {
  return Array.from(new Uint8Array(bytes), (byte) => byte.toString(16).padStart(2, '0')).join('');
}

/** The same key as a WebCrypto HMAC-SHA256 key: the reference implementation. */
function webCryptoHmacKey(key: Uint8Array<ArrayBuffer>): Promise<CryptoKey> {
  return crypto.subtle.importKey('raw', key, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
}

test('sha256 matches the FIPS 180-4 examples', () => {
  assert.equal(
    hex(sha256(utf8.encode('abc'))),
    'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
  );
  assert.equal(
    hex(sha256(new Uint8Array(0))),
    'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
  );
  assert.equal(
    hex(sha256(utf8.encode('abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq'))),
    '248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1',
  );
});

test('sha256 equals WebCrypto for every length across the padding boundaries', async () => {
  for (let length = 0; length <= 200; length++) {
    const message = crypto.getRandomValues(new Uint8Array(length));
    const expected = hex(await crypto.subtle.digest('SHA-256', message));
    assert.equal(hex(sha256(message)), expected, `length ${length}`);
  }
  const large = crypto.getRandomValues(new Uint8Array(65_536));
  assert.equal(hex(sha256(large)), hex(await crypto.subtle.digest('SHA-256', large)));
});

test('sha256 reads only the view it is given', async () => {
  const buffer = crypto.getRandomValues(new Uint8Array(300));
  const view = buffer.subarray(17, 17 + 130);
  assert.equal(hex(sha256(view)), hex(await crypto.subtle.digest('SHA-256', view.slice())));
});

test('HMAC-SHA256 equals WebCrypto for short, block-sized and long keys', async () => {
  for (const keyLength of [1, 16, 32, 63, 64, 65, 200]) {
    const key = crypto.getRandomValues(new Uint8Array(keyLength));
    const reference = await webCryptoHmacKey(key);
    const ours = new HmacSha256Key(key);
    for (const length of [0, 1, 55, 56, 64, 119, 120, 300]) {
      const message = crypto.getRandomValues(new Uint8Array(length));
      const expected = new Uint8Array(await crypto.subtle.sign('HMAC', reference, message));
      assert.equal(hex(ours.sign(message)), hex(expected), `key ${keyLength}, message ${length}`);
      // A key is reusable: signing twice gives the same MAC.
      assert.equal(hex(ours.sign(message)), hex(expected));
    }
  }
});

test('HMAC-SHA256 matches RFC 4231 test case 2', () => {
  const mac = new HmacSha256Key(utf8.encode('Jefe')).sign(
    utf8.encode('what do ya want for nothing?'),
  );
  assert.equal(hex(mac), '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843');
});

test('HMAC verify accepts the MAC and refuses any other bytes or length', () => {
  const key = new HmacSha256Key(utf8.encode('secret'));
  const message = utf8.encode('SVC-HMAC-SHA256\nPOST\n/path');
  const mac = key.sign(message);
  assert.equal(key.verify(message, mac), true);
  for (let i = 0; i < mac.length; i++) {
    const flipped = mac.slice();
    flipped[i] ^= 1;
    assert.equal(key.verify(message, flipped), false, `byte ${i}`);
  }
  assert.equal(key.verify(message, mac.subarray(0, 31)), false);
  assert.equal(key.verify(utf8.encode('SVC-HMAC-SHA256\nPOST\n/patH'), mac), false);
  assert.equal(new HmacSha256Key(utf8.encode('secreT')).verify(message, mac), false);
});

test('constantTimeEqual compares lengths and every byte', () => {
  assert.equal(constantTimeEqual(new Uint8Array([1, 2]), new Uint8Array([1, 2])), true);
  assert.equal(constantTimeEqual(new Uint8Array([1, 2]), new Uint8Array([1, 3])), false);
  assert.equal(constantTimeEqual(new Uint8Array([1, 2]), new Uint8Array([1, 2, 0])), false);
  assert.equal(constantTimeEqual(new Uint8Array(0), new Uint8Array(0)), true);
});

test('sha256 and HMAC of a string hash its UTF-8 bytes, short or longer than any buffer', async () => {
  const key = crypto.getRandomValues(new Uint8Array(32));
  const reference = await webCryptoHmacKey(key);
  const ours = new HmacSha256Key(key);
  const texts = [
    '',
    'plain ascii',
    'é, 漢字 and 🔑',
    'x'.repeat(2047),
    '漢'.repeat(2048),
    '🔑'.repeat(5000),
  ];
  for (const text of texts) {
    const bytes = utf8.encode(text);
    const label = `${text.length} units`;
    assert.equal(hex(sha256(text)), hex(await crypto.subtle.digest('SHA-256', bytes)), label);
    const expected = new Uint8Array(await crypto.subtle.sign('HMAC', reference, bytes));
    assert.equal(hex(ours.sign(text)), hex(expected), label);
    assert.equal(ours.verify(text, expected), true, label);
  }
});

test('hashes and keys used in turn never leak state into each other', async () => {
  const first = new HmacSha256Key(utf8.encode('first key'));
  const second = new HmacSha256Key(utf8.encode('second key'));
  const messages = [0, 1, 63, 64, 65, 130].map((length) =>
    crypto.getRandomValues(new Uint8Array(length))
  );
  const expected = [];
  for (const message of messages) {
    expected.push([hex(first.sign(message)), hex(second.sign(message)), hex(sha256(message))]);
  }
  // Interleaved in another order, and each result kept while the next is computed.
  const kept = [];
  for (let round = 0; round < 3; round++) {
    for (const [index, message] of [...messages.entries()].reverse()) {
      const digest = sha256(message);
      const fromSecond = second.sign(message);
      const fromFirst = first.sign(message);
      kept.push({ index, fromFirst, fromSecond, digest });
    }
  }
  for (const { index, fromFirst, fromSecond, digest } of kept) {
    assert.deepEqual([hex(fromFirst), hex(fromSecond), hex(digest)], expected[index]);
  }
  assert.notEqual(expected[0][0], expected[0][1]);
  assert.equal(expected[2][2], hex(await crypto.subtle.digest('SHA-256', messages[2])));
});
