// Security checklist A1 (token parsing and signature), at the verifier level: every token is
// verified as svc-a against the key set built from the JWKS the plane publishes.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { signCapabilityToken } from '../../src/core/capability-token.ts';
import {
  b64url,
  baselineClaims,
  bytesInteger,
  capabilityHeader,
  derFromRawSignature,
  encodePart,
  es256Signature,
  foreignSignature,
  forgeToken,
  fromB64url,
  hs256Signature,
  nowSeconds,
  P256_N,
  P256_P,
  rawSignature,
  signedToken,
  spkiPem,
  TEST_ISSUER,
  withPayload,
} from '../support/forge.ts';
import { assertRefused, tokenFixture } from '../support/token-fixture.ts';

test('TOK-01 control: a token issued by the plane verifies with the published JWKS', async () => {
  const { authority, verify } = await tokenFixture();
  const claims = baselineClaims();
  const token = await signCapabilityToken(claims as never, authority.signer);
  const { identity } = await verify(token);
  assert.deepEqual(identity, {
    serviceId: 'svc-caller',
    audience: 'svc-a',
    scopes: ['svc-a.read'],
    tokenId: claims.jti,
    issuer: TEST_ISSUER,
    expiresAt: new Date((claims.exp as number) * 1000),
    callerAccess: 'service',
  });
  assert.equal('subject' in identity, false);
  assert.equal('confirmation' in identity, false);
  assert.equal('brokerServiceId' in identity, false);
});

test('TOK-02 alg none in every spelling', async () => {
  const { verify } = await tokenFixture();
  for (const alg of ['none', 'None', 'NONE', 'nOnE']) {
    const header = { ...capabilityHeader(), alg };
    for (const segment of ['', b64url(crypto.getRandomValues(new Uint8Array(64)))]) {
      const token = await forgeToken({ header, signature: { segment } });
      // An empty third segment is not even a compact JWS; a random one fails on alg.
      await assertRefused(
        verify(token),
        segment === '' ? 'token_malformed' : 'unsupported_alg',
        alg,
      );
    }
  }
});

test('TOK-03 algorithm confusion: HS256 keyed with public key material', async () => {
  const { authority, keys, verify } = await tokenFixture();
  const k1Entry = JSON.stringify(authority.jwks.keys[0]);
  const jwksBody = JSON.stringify(authority.jwks);
  const xy = new Uint8Array([
    ...fromB64url(keys.k1.publicJwk.x),
    ...fromB64url(keys.k1.publicJwk.y),
  ]);
  const pem = await spkiPem(keys.k1.publicKey);
  const header = { ...capabilityHeader(), alg: 'HS256' };
  const signingInput = `${encodePart(header)}.${encodePart(baselineClaims())}`;
  for (
    const [label, secret] of [
      ['JWKS entry', k1Entry],
      ['JWKS body', jwksBody],
      ['raw x||y', xy],
      ['SPKI PEM', pem],
    ] as const
  ) {
    const tag = await hs256Signature(secret, signingInput);
    await assertRefused(verify(`${signingInput}.${b64url(tag)}`), 'unsupported_alg', label);
  }
});

test('TOK-04 other or malformed alg values', async () => {
  const { keys, verify } = await tokenFixture();
  for (const alg of ['ES384', 'ES512', 'RS256', 'PS256', 'EdDSA'] as const) {
    const header = { ...capabilityHeader(), alg };
    const signingInput = `${encodePart(header)}.${encodePart(baselineClaims())}`;
    const signature = await foreignSignature(alg, signingInput);
    await assertRefused(verify(`${signingInput}.${b64url(signature)}`), 'unsupported_alg', alg);
  }
  for (const alg of ['es256', 'ES256 ', 256, undefined]) {
    const header: Record<string, unknown> = { ...capabilityHeader(), alg };
    if (alg === undefined) delete header.alg;
    // Correct ES256 signature by k1: only the alg value is wrong.
    const token = await signedToken(keys.k1.privateKey, baselineClaims(), header);
    await assertRefused(verify(token), 'unsupported_alg', String(alg));
  }
});

test('TOK-05 psychic signatures', async () => {
  const { verify } = await tokenFixture();
  const cases: [string, Uint8Array][] = [
    ['r=s=0 (64 zero bytes)', new Uint8Array(64)],
    ['r=0, s=1', rawSignature(0n, 1n)],
    ['r=1, s=0', rawSignature(1n, 0n)],
    ['r=n, s=0', rawSignature(P256_N, 0n)],
    ['r=0, s=p', rawSignature(0n, P256_P)],
    ['r=n, s=n', rawSignature(P256_N, P256_N)],
  ];
  for (const [label, bytes] of cases) {
    await assertRefused(verify(await forgeToken({ signature: { bytes } })), 'bad_signature', label);
  }
});

test('TOK-06 signature encodings other than 64-byte R||S', async () => {
  const { keys, verify } = await tokenFixture();
  const signingInput = `${encodePart(capabilityHeader())}.${encodePart(baselineClaims())}`;
  const raw = await es256Signature(keys.k1.privateKey, signingInput);
  // The untouched signature verifies, so each refusal below is caused by the re-encoding alone.
  await verify(`${signingInput}.${b64url(raw)}`);
  const r = raw.subarray(0, 32);
  const s = raw.subarray(32);
  const widened = (value: Uint8Array) => {
    const bytes = new Uint8Array(33);
    bytes.set(value, 1);
    return bytes;
  };
  const rPlusN = rawSignature(bytesInteger(r) + P256_N, bytesInteger(s), 33);
  const sPlusN = rawSignature(bytesInteger(r), bytesInteger(s) + P256_N, 33);
  const cases: [string, Uint8Array][] = [
    ['ASN.1 DER', derFromRawSignature(raw)],
    ['truncated to 63 bytes', raw.subarray(0, 63)],
    ['65 bytes with a leading 0x00', new Uint8Array([0, ...raw])],
    ['r and s zero-extended to 33 bytes', new Uint8Array([...widened(r), ...widened(s)])],
    ['r+n in 33 bytes', rPlusN],
    ['s+n in 33 bytes', sPlusN],
  ];
  for (const [label, bytes] of cases) {
    await assertRefused(verify(`${signingInput}.${b64url(bytes)}`), 'bad_signature', label);
  }
});

test('TOK-07 payload edited after signing keeps failing the signature', async () => {
  const { authority, verify } = await tokenFixture();
  const claims = baselineClaims();
  const token = await signCapabilityToken(claims as never, authority.signer);
  await verify(token);
  const edits: [string, Record<string, unknown>][] = [
    ['scp widened', { ...claims, scp: ['svc-a.read', 'svc-a.write'] }],
    ['aud changed', { ...claims, aud: 'svc-c' }],
    ['exp + 1 day', { ...claims, exp: (claims.exp as number) + 86_400 }],
    ['sub changed', { ...claims, sub: 'svc-other' }],
  ];
  for (const [label, edited] of edits) {
    await assertRefused(verify(withPayload(token, edited)), 'bad_signature', label);
  }
});

test('TOK-08 compact-form violations', async () => {
  const { authority, verify } = await tokenFixture();
  const token = await signCapabilityToken(baselineClaims() as never, authority.signer);
  const [h, p, s] = token.split('.');
  const jweHeader = encodePart({ alg: 'RSA-OAEP', enc: 'A256GCM' });
  const cases: [string, string][] = [
    ['2 segments', `${h}.${p}`],
    ['4 segments', `${h}.${p}.${s}.${s}`],
    ['5 segments (JWE-shaped)', `${jweHeader}.${s}.${s.slice(0, 16)}.${p}.${s.slice(0, 22)}`],
    ['empty payload segment', `${h}..${s}`],
    ['empty header segment', `.${p}.${s}`],
    ['leading dot', `.${token}`],
    ['trailing dot', `${token}.`],
    ['space inside', `${h}.${p.slice(0, 10)} ${p.slice(10)}.${s}`],
    ['newline inside', `${h}.${p}\n.${s}`],
    ['plus', `${h}.${p}.${s.slice(0, -2)}+A`],
    ['slash', `${h}.${p.slice(0, 4)}/${p.slice(5)}.${s}`],
    ['star', `${h}*.${p}.${s}`],
    ['percent', `${h}.${p}.${s.slice(0, -3)}%3D`],
    ['padding', `${h}.${p}.${s}==`],
  ];
  for (const [label, bad] of cases) await assertRefused(verify(bad), 'token_malformed', label);
});

test('TOK-08 (advisory) a second encoding of the same signature bytes is refused', async () => {
  const { authority, verify } = await tokenFixture();
  const token = await signCapabilityToken(baselineClaims() as never, authority.signer);
  const [h, p, s] = token.split('.');
  // 64 signature bytes are 86 characters: the last one carries 4 unused bits. Setting one of
  // them decodes to the same bytes, so only a canonical-encoding check can tell the two apart.
  assert.equal(s.length, 86);
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const last = alphabet.indexOf(s.at(-1)!);
  const reencoded = `${h}.${p}.${s.slice(0, -1)}${alphabet[last ^ 1]}`;
  await assertRefused(verify(reencoded), 'token_malformed', 'non-zero trailing bits');
  // A spare character (length 4k+1) can encode nothing.
  assert.equal(`${s}AAA`.length % 4, 1);
  await assertRefused(verify(`${h}.${p}.${s}AAA`), 'token_malformed', 'spare character');
  // Control: the canonical token verifies.
  assert.equal((await verify(token)).identity.serviceId, baselineClaims().sub);
});

test('TOK-09 header or payload that is not a UTF-8 JSON object', async () => {
  const { keys, verify } = await tokenFixture();
  const notObjects = [{ raw: 'null' }, { raw: '[]' }, { raw: '"x"' }, { raw: '1' }, {
    raw: '{"alg":"ES256",',
  }, { bytes: new Uint8Array([0x7b, 0x22, 0xc3, 0x28, 0x22, 0x3a, 0x31, 0x7d]) }];
  for (const part of notObjects) {
    const label = JSON.stringify('raw' in part ? part.raw : 'invalid UTF-8');
    await assertRefused(
      verify(await signedToken(keys.k1.privateKey, baselineClaims(), part)),
      'token_malformed',
      `header ${label}`,
    );
    // The payload is signed correctly by k1, so the refusal comes from parsing it.
    await assertRefused(
      verify(await signedToken(keys.k1.privateKey, part)),
      'token_malformed',
      `payload ${label}`,
    );
  }
});

test('TOK-10 nested JWT (cty JWT) is refused', async () => {
  const { authority, keys, verify } = await tokenFixture();
  const inner = await signCapabilityToken(baselineClaims() as never, authority.signer);
  const withTyp = await signedToken(keys.k1.privateKey, { raw: inner }, {
    ...capabilityHeader(),
    cty: 'JWT',
  });
  await assertRefused(verify(withTyp), 'header_not_allowed');
  const asListed = await signedToken(keys.k1.privateKey, { raw: inner }, {
    alg: 'ES256',
    kid: 'k1',
    cty: 'JWT',
  });
  await assertRefused(verify(asListed), 'token_type_mismatch');
});

test('TOK-11 non-string or empty token', async () => {
  const { authority, verify } = await tokenFixture();
  const token = await signCapabilityToken(baselineClaims() as never, authority.signer);
  for (const value of [123, null, {}, [token], '', undefined]) {
    await assertRefused(verify(value), 'token_missing', JSON.stringify(value) ?? 'undefined');
  }
});

test('TOK-12 oversized tokens are refused fast and the next valid token passes', async () => {
  const { authority, keys, verify } = await tokenFixture();
  for (const size of [64 * 1024, 1024 * 1024]) {
    const claims = baselineClaims({ pad: 'x'.repeat(size) });
    const token = await signedToken(keys.k1.privateKey, claims);
    assert.ok(token.length > size);
    const started = Date.now();
    await assertRefused(verify(token), 'token_too_large', `${size} bytes`);
    assert.ok(Date.now() - started < 1000, 'refused within 1 s');
  }
  const valid = await signCapabilityToken(baselineClaims() as never, authority.signer);
  assert.equal((await verify(valid)).identity.serviceId, 'svc-caller');
});

test('TOK-13 cross-JWT confusion: proofs, caller assertions and client key ids', async () => {
  const { keys, verify } = await tokenFixture();
  const now = nowSeconds();
  const proof = await signedToken(
    keys.client.privateKey,
    { ath: b64url(new Uint8Array(32)), aud: 'svc-a', ab: 'svc-a.echo', iat: now, jti: 'p1' },
    { alg: 'ES256', typ: 'svc-pop+jwt', jwk: keys.client.publicJwk },
  );
  await assertRefused(verify(proof), 'token_type_mismatch', 'PoP proof');
  const assertion = await signedToken(keys.client.privateKey, {
    iss: 'svc-jwk',
    sub: 'svc-jwk',
    aud: TEST_ISSUER,
    htm: 'POST',
    htu: `${TEST_ISSUER}/.well-known/svc/capability-token`,
    bh: b64url(new Uint8Array(32)),
    rid: 'r1',
    iat: now,
    exp: now + 60,
    jti: 'a1',
  }, { alg: 'ES256', kid: 'jk1', typ: 'svc-client+jwt' });
  await assertRefused(verify(assertion), 'token_type_mismatch', 'caller assertion');
  const clientKid = await signedToken(
    keys.client.privateKey,
    baselineClaims(),
    capabilityHeader('jk1'),
  );
  await assertRefused(verify(clientKid), 'unknown_capability_key_id', 'client kid');
});

test('TOK-14 (verifier) a refused token yields nothing and stays refused', async () => {
  const { keys, verify } = await tokenFixture();
  const forged = await signedToken(keys.attacker.privateKey, baselineClaims());
  await assertRefused(verify(forged), 'bad_signature');
  // A refusal leaves nothing behind that a second presentation could use.
  await assertRefused(verify(forged), 'bad_signature', 'second presentation');
});

test('TOK-15 (verifier) each verification stands alone', async () => {
  const { authority, keys, verify } = await tokenFixture();
  const valid = await signCapabilityToken(baselineClaims() as never, authority.signer);
  const first = await verify(valid);
  await assertRefused(verify(await signedToken(keys.attacker.privateKey)), 'bad_signature');
  // The service adds confirmation to its identity after a proof: that must not leak into the
  // identity of another verification of the same token (served from the verified-token cache).
  first.identity.confirmation = { jkt: 'x'.repeat(43) };
  first.identity.scopes.push('svc-a.write');
  const second = await verify(valid);
  assert.notEqual(second.identity, first.identity);
  assert.equal(second.identity.confirmation, undefined);
  assert.deepEqual(second.identity.scopes, ['svc-a.read']);
  assert.deepEqual(first.identity.serviceId, 'svc-caller');
});
