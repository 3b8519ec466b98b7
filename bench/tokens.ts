/**
 * Capability-token benchmarks: issuing and verifying against the raw WebCrypto ES256 operation
 * they wrap, on the same bytes and key, in the same run.
 */
import {
  capabilityKeySetFromImported,
  type CapabilityTokenClaims,
  importCapabilityKeys,
  readCapabilityJwks,
  signCapabilityToken,
  verifyCapabilityToken,
} from '../src/core/capability-token.ts';
import type { SigningAuthority } from '../src/plane/signing-keys.ts';
import { generateSigningKeyEntry, loadSigningAuthority } from '../src/plane/signing-keys.ts';
import type { Benchmark } from './run.ts';
import { compareThroughput } from './measure.ts';

const ES256 = { name: 'ECDSA', hash: 'SHA-256' } as const;
const ISSUER = 'https://plane.bench';
const AUDIENCE = 'svc-a';
const encoder = new TextEncoder();

function claims(jti: string): CapabilityTokenClaims {
  const now = Math.floor(Date.now() / 1000);
  return {
    iss: ISSUER,
    sub: 'svc-caller',
    aud: AUDIENCE,
    scp: ['svc-a.read', 'svc-a.write'],
    spa: 'service',
    jti,
    iat: now,
    nbf: now,
    exp: now + 600,
  };
}

function signatureBytes(token: string): Uint8Array<ArrayBuffer> {
  const segment = token.slice(token.lastIndexOf('.') + 1);
  const binary = atob(segment.replace(/-/g, '+').replace(/_/g, '/'));
  return Uint8Array.from(binary, (char) => char.charCodeAt(0));
}

function signingInputBytes(token: string): Uint8Array<ArrayBuffer> {
  return encoder.encode(token.slice(0, token.lastIndexOf('.')));
}

let authority: Promise<SigningAuthority> | undefined;

function benchAuthority(): Promise<SigningAuthority> {
  authority ??= generateSigningKeyEntry({ kid: 'bench-1' }).then((entry) =>
    loadSigningAuthority([entry])
  );
  return authority;
}

async function verificationKey(plane: SigningAuthority): Promise<CryptoKey> {
  const key = await plane.keySet.getKey(plane.signer.kid);
  if (key === undefined) throw new Error('bench key missing');
  return key;
}

const FRESH_POOL = 2000;

/** The token benchmarks run by `npm run bench`. */
export const benchmarks: Benchmark[] = [
  {
    name: 'issue token (signCapabilityToken vs subtle.sign)',
    target: 0.8,
    async run() {
      const plane = await benchAuthority();
      const input = claims(crypto.randomUUID());
      const bytes = signingInputBytes(await signCapabilityToken(input, plane.signer));
      return compareThroughput(
        async (count) => {
          for (let i = 0; i < count; i++) await signCapabilityToken(input, plane.signer);
        },
        async (count) => {
          for (let i = 0; i < count; i++) {
            await crypto.subtle.sign(ES256, plane.signer.privateKey, bytes);
          }
        },
        {},
      );
    },
  },
  {
    name: 'verify fresh token (verifyCapabilityToken vs subtle.verify)',
    target: 0.8,
    async run() {
      const plane = await benchAuthority();
      const key = await verificationKey(plane);
      const tokens = await Promise.all(
        Array.from(
          { length: FRESH_POOL },
          (_, i) => signCapabilityToken(claims(`fresh-${i}`), plane.signer),
        ),
      );
      const raw = tokens.map((token) => ({
        data: signingInputBytes(token),
        signature: signatureBytes(token),
      }));
      const imported = await importCapabilityKeys(readCapabilityJwks(plane.jwks));
      let keys = capabilityKeySetFromImported(imported);
      // Rounds walk through the pool; a new key set per round means an empty verified-token
      // cache, so every token verified in a round is unseen.
      let oursOffset = 0;
      let primitiveOffset = 0;
      return compareThroughput(
        async (count) => {
          const options = { keys, issuer: ISSUER, audience: AUDIENCE };
          for (let i = 0; i < count; i++) {
            await verifyCapabilityToken(tokens[(oursOffset + i) % FRESH_POOL], options);
          }
          oursOffset = (oursOffset + count) % FRESH_POOL;
        },
        async (count) => {
          for (let i = 0; i < count; i++) {
            const { data, signature } = raw[(primitiveOffset + i) % FRESH_POOL];
            if (!(await crypto.subtle.verify(ES256, key, signature, data))) throw new Error('bad');
          }
          primitiveOffset = (primitiveOffset + count) % FRESH_POOL;
        },
        {
          maxOpsPerRound: FRESH_POOL,
          beforeOursRound: () => {
            keys = capabilityKeySetFromImported(imported);
          },
        },
      );
    },
  },
  {
    name: 'verify seen token (verifyCapabilityToken cache vs subtle.verify)',
    target: 10,
    async run() {
      const plane = await benchAuthority();
      const key = await verificationKey(plane);
      const token = await signCapabilityToken(claims(crypto.randomUUID()), plane.signer);
      const data = signingInputBytes(token);
      const signature = signatureBytes(token);
      const options = { keys: plane.keySet, issuer: ISSUER, audience: AUDIENCE };
      await verifyCapabilityToken(token, options);
      return compareThroughput(
        async (count) => {
          for (let i = 0; i < count; i++) await verifyCapabilityToken(token, options);
        },
        async (count) => {
          for (let i = 0; i < count; i++) {
            if (!(await crypto.subtle.verify(ES256, key, signature, data))) throw new Error('bad');
          }
        },
        {},
      );
    },
  },
];
