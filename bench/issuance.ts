/**
 * Issuance benchmarks: tokens per second through the control plane against raw WebCrypto
 * ES256 signatures of the same bytes, with the same key, in the same run.
 *
 * The plane runs its full grant check on every mint against an in-process service, with the
 * default discovery cache (so catalog resolution is a cache read, as in production). The
 * token-endpoint benchmarks measure client and server together, in process through
 * `plane.fetch`: per token the caller builds the body, a fresh request id and its signature
 * (HMAC, or an ES256 assertion for a JWK client), the plane authenticates, checks the grant and
 * signs, and the caller reads the response. Each caller signs every request itself, with its
 * key imported once, exactly as the shipped requesters do on a cache miss; the requesters' token
 * cache is what a benchmark of issuance must not measure, so it is left out rather than defeated.
 *
 * Each token-endpoint benchmark also measures its no-logic floor in the same run: the HTTP
 * objects and crypto calls of the same exchange (signatures; for an HMAC caller also the body
 * hashes and MACs, through the hash library directly) with nothing of ours between them. Where the
 * runtime's own request, response and crypto objects are slow, that floor, not our code, bounds
 * the ratio, and the table shows both.
 */
import { hmac } from '@noble/hashes/hmac.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { z } from 'zod';
import { generateRequestId } from '../src/core/request-id.ts';
import { hmacServiceClientAuth } from '../src/plane/caller-auth-hmac.ts';
import { jwkServiceClientAuth } from '../src/plane/caller-auth-jwk.ts';
import { CAPABILITY_TOKEN_PATH, createControlPlane } from '../src/plane/control-plane.ts';
import { localService } from '../src/plane/endpoints.ts';
import {
  generateSigningKeyEntry,
  loadSigningAuthority,
  type SigningKeyEntry,
} from '../src/plane/signing-keys.ts';
import { defineAbility } from '../src/service/ability.ts';
import { abilityMethod } from '../src/service/method.ts';
import { createService } from '../src/service/service.ts';
import {
  encodedRequestBodyHash,
  hmacSignedString,
  importCallerSigningKey,
  importHmacClientSecret,
  JWK_CALLER_AUTH_SCHEME,
  requestPathWithQuery,
  signHmacTokenRequest,
  signJwkTokenRequestAssertion,
} from '../src/caller/token-request-signing.ts';
import { compareConcurrent, compareThroughput, type RoundRunner } from './measure.ts';
import type { Benchmark } from './run.ts';

const ES256 = { name: 'ECDSA', hash: 'SHA-256' } as const;
const ISSUER = 'https://plane.bench';
const PLANE_URL = 'https://plane.bench';
const TOKEN_URL = new URL(CAPABILITY_TOKEN_PATH, PLANE_URL);
const TARGET_ID = 'bench-target';
const ABILITY_ID = 'bench-target.echo';
const SCOPES = ['bench-target.read', 'bench-target.write'];
const HMAC_SECRET = 'bench-hmac-secret-0123456789abcdef0123456789';
const encoder = new TextEncoder();
// These paths cross many functions (HTTP objects, caller authentication, the grant check): the
// first few thousand requests run mostly unoptimized code, so both sides warm up longer than the
// default before the measured rounds, which are also longer.
const STEADY_STATE = { warmupMs: 1500, budgetMs: 2000 };

const echoAbility = defineAbility({
  id: ABILITY_ID,
  exposure: 'published',
  methods: {
    read: abilityMethod({ input: z.object({}), output: z.object({}), scopes: [SCOPES[0]] }),
    write: abilityMethod({ input: z.object({}), output: z.object({}), scopes: [SCOPES[1]] }),
  },
  handler: () => ({ read: () => ({}), write: () => ({}) }),
});

/** A fresh P-256 key pair as JWKs (the JWK client's key). */
async function generateClientKey(kid: string) {
  const pair = await crypto.subtle.generateKey(
    { name: 'ECDSA', namedCurve: 'P-256' },
    true,
    ['sign', 'verify'],
  ) as CryptoKeyPair;
  const jwk = await crypto.subtle.exportKey('jwk', pair.privateKey);
  const publicJwk = { kty: 'EC', crv: 'P-256', x: jwk.x, y: jwk.y, kid };
  return { kid, publicJwk, privateJwk: { ...publicJwk, d: jwk.d } as JsonWebKey };
}

/** The plane, its signing key entry and the JWK client's key; built once per run. */
async function benchDeployment() {
  const signingKey: SigningKeyEntry = await generateSigningKeyEntry({ kid: 'bench-issuer' });
  const clientKey = await generateClientKey('bench-jwk-1');
  const plane = createControlPlane({
    id: 'bench-plane',
    issuer: ISSUER,
    signingKeys: [signingKey],
    authenticateCaller: [
      hmacServiceClientAuth({
        clients: { 'bench-hmac': { serviceId: 'bench-caller', secret: HMAC_SECRET } },
        log: false,
      }),
      jwkServiceClientAuth({
        clients: { 'bench-jwk': { serviceId: 'bench-caller', keys: [clientKey.publicJwk] } },
        log: false,
      }),
    ],
    services: [
      localService({
        id: TARGET_ID,
        service: createService({
          id: TARGET_ID,
          title: 'Bench target',
          version: '1.0.0',
          auth: { jwks: { keys: [] }, issuer: ISSUER },
          abilities: [echoAbility],
          logger: false,
        }),
        grants: [{ caller: 'bench-caller', scopes: SCOPES }],
      }),
    ],
    log: false,
  });
  await plane.ready();
  return { plane, signingKey, clientKey };
}

let deployment: ReturnType<typeof benchDeployment> | undefined;

function sharedDeployment() {
  deployment ??= benchDeployment();
  return deployment;
}

/**
 * The primitive: raw ES256 signatures over the signing input of a token this plane issued,
 * with the plane's own key imported separately.
 */
async function rawSigner(signingKey: SigningKeyEntry, token: string): Promise<RoundRunner> {
  const { signer } = await loadSigningAuthority([signingKey]);
  const bytes = encoder.encode(token.slice(0, token.lastIndexOf('.')));
  return async (count) => {
    for (let i = 0; i < count; i++) await crypto.subtle.sign(ES256, signer.privateKey, bytes);
  };
}

function requestBody(): string {
  return JSON.stringify({
    callerServiceId: 'bench-caller',
    targetServiceId: TARGET_ID,
    abilityId: ABILITY_ID,
    scopes: SCOPES,
  });
}

/** Posts one signed token request to the plane and checks that a token came back. */
async function postTokenRequest(
  fetchPlane: (request: Request) => Promise<Response>,
  body: string,
  headers: Record<string, string>,
): Promise<string> {
  const response = await fetchPlane(
    new Request(TOKEN_URL, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...headers },
      body,
    }),
  );
  const answer = await response.json() as { token?: string; detail?: string };
  if (response.status !== 200 || typeof answer.token !== 'string') {
    throw new Error(`token request refused: ${response.status} ${answer.detail ?? ''}`);
  }
  return answer.token;
}

/**
 * What a token-endpoint round trip costs with no logic of ours at all: the HTTP objects (the
 * client's request with the same body and headers, the server reading it, the server's response
 * with the same body, the client reading it) and the crypto calls the flow cannot avoid, in
 * the same order. Its ratio to the primitive is the ceiling any implementation can reach on this
 * runtime; the benchmark reports it beside ours.
 */
function endpointFloor(
  exchange: { body: string; headers: Record<string, string>; responseBody: string },
  cryptoCalls: () => Promise<unknown>,
  signToken: () => Promise<unknown>,
): RoundRunner {
  return async (count) => {
    for (let i = 0; i < count; i++) {
      const request = new Request(TOKEN_URL, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', ...exchange.headers },
        body: exchange.body,
      });
      await request.arrayBuffer();
      await cryptoCalls();
      await signToken();
      const response = new Response(exchange.responseBody, {
        status: 200,
        headers: { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' },
      });
      await response.json();
    }
  };
}

/** One exchange with the plane, recorded: the body and headers sent and the body received. */
async function recordExchange(
  fetchPlane: (request: Request) => Promise<Response>,
  body: string,
  headers: Record<string, string>,
) {
  const response = await fetchPlane(
    new Request(TOKEN_URL, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...headers },
      body,
    }),
  );
  const responseBody = await response.text();
  const token = (JSON.parse(responseBody) as { token: string }).token;
  return { body, headers, responseBody, token };
}

/** The string a recorded HMAC token request signed, rebuilt from its body and headers. */
function recordedHmacSignedString(exchange: { body: string; headers: Record<string, string> }) {
  return hmacSignedString({
    method: 'POST',
    pathWithQuery: requestPathWithQuery(TOKEN_URL),
    bodyHash: encodedRequestBodyHash(exchange.body),
    clientId: 'bench-hmac',
    requestId: exchange.headers['X-Request-Id'] ?? '',
    timestamp: exchange.headers['X-Svc-Timestamp'] ?? '',
  });
}

/** Ours against the primitive, then the no-logic floor against the primitive, in one run. */
async function compareWithFloor(
  ours: RoundRunner,
  primitive: RoundRunner,
  floor: RoundRunner,
  opsPerRound: number,
) {
  const measured = await compareThroughput(ours, primitive, { opsPerRound, ...STEADY_STATE });
  const ceiling = await compareThroughput(floor, primitive, { opsPerRound, ...STEADY_STATE });
  return { ...measured, floor: ceiling.ratio };
}

/** The issuance benchmarks run by `npm run bench`. */
export const benchmarks: Benchmark[] = [
  {
    name: 'issue token (plane.issueCapabilityToken vs subtle.sign)',
    target: 0.85,
    async run() {
      const { plane, signingKey } = await sharedDeployment();
      const request = {
        callerServiceId: 'bench-caller',
        targetServiceId: TARGET_ID,
        abilityId: ABILITY_ID,
        scopes: SCOPES,
        callerAccess: 'service' as const,
      };
      const { token } = await plane.issueCapabilityToken(request);
      return await compareThroughput(
        async (count) => {
          for (let i = 0; i < count; i++) await plane.issueCapabilityToken(request);
        },
        await rawSigner(signingKey, token),
        { opsPerRound: 50, ...STEADY_STATE },
      );
    },
  },
  {
    name: 'issue token, c=32 (plane.issueCapabilityToken vs subtle.sign)',
    target: 0.9,
    async run() {
      const { plane, signingKey } = await sharedDeployment();
      const request = {
        callerServiceId: 'bench-caller',
        targetServiceId: TARGET_ID,
        abilityId: ABILITY_ID,
        scopes: SCOPES,
        callerAccess: 'service' as const,
      };
      const { token } = await plane.issueCapabilityToken(request);
      const { signer } = await loadSigningAuthority([signingKey]);
      const bytes = encoder.encode(token.slice(0, token.lastIndexOf('.')));
      return await compareConcurrent(
        async () => {
          await plane.issueCapabilityToken(request);
        },
        async () => {
          await crypto.subtle.sign(ES256, signer.privateKey, bytes);
        },
        32,
        { opsPerRound: 256, ...STEADY_STATE },
      );
    },
  },
  {
    name: 'token endpoint, HMAC caller, client + server (plane.fetch vs subtle.sign)',
    target: 0.4,
    async run() {
      const { plane, signingKey } = await sharedDeployment();
      const secret = await importHmacClientSecret(HMAC_SECRET);
      const signedHeaders = async (body: string) =>
        await signHmacTokenRequest({
          clientId: 'bench-hmac',
          clientSecret: secret,
          url: TOKEN_URL,
          body,
          requestId: generateRequestId(),
        });
      const requestToken = async () => {
        const body = requestBody();
        return await postTokenRequest(plane.fetch, body, await signedHeaders(body));
      };
      const body = requestBody();
      const exchange = await recordExchange(plane.fetch, body, await signedHeaders(body));
      const primitive = await rawSigner(signingKey, exchange.token);
      // The floor's hashing, through the hash library directly: the client hashes the body and
      // signs the string, the plane hashes the body again and recomputes the MAC.
      const secretBytes = encoder.encode(HMAC_SECRET);
      const signedString = encoder.encode(recordedHmacSignedString(exchange));
      const bodyBytes = encoder.encode(body);
      const hmacHashing = () => {
        sha256(bodyBytes);
        hmac(sha256, secretBytes, signedString);
        sha256(bodyBytes);
        hmac(sha256, secretBytes, signedString);
        return Promise.resolve();
      };
      return await compareWithFloor(
        async (count) => {
          for (let i = 0; i < count; i++) await requestToken();
        },
        primitive,
        endpointFloor(exchange, hmacHashing, () => primitive(1)),
        50,
      );
    },
  },
  {
    name: 'token endpoint, JWK caller, client + server (plane.fetch vs subtle.sign)',
    target: 0.25,
    async run() {
      const { plane, signingKey, clientKey } = await sharedDeployment();
      const { privateKey } = await importCallerSigningKey(clientKey.privateJwk);
      const assertionFor = async (body: string, requestId: string) =>
        await signJwkTokenRequestAssertion({
          clientId: 'bench-jwk',
          keyId: clientKey.kid,
          privateKey,
          audience: ISSUER,
          url: TOKEN_URL,
          body,
          requestId,
        });
      const headersFor = async (body: string) => {
        const requestId = generateRequestId();
        return {
          Authorization: `${JWK_CALLER_AUTH_SCHEME} ${await assertionFor(body, requestId)}`,
          'X-Request-Id': requestId,
        };
      };
      const requestToken = async () => {
        const body = requestBody();
        return await postTokenRequest(plane.fetch, body, await headersFor(body));
      };
      const body = requestBody();
      const exchange = await recordExchange(plane.fetch, body, await headersFor(body));
      const primitive = await rawSigner(signingKey, exchange.token);
      // The floor's crypto: the client signs an assertion of the same size, the plane verifies it.
      const assertion = exchange.headers.Authorization.slice(JWK_CALLER_AUTH_SCHEME.length + 1);
      const assertionInput = encoder.encode(assertion.slice(0, assertion.lastIndexOf('.')));
      const assertionSignature = await crypto.subtle.sign(ES256, privateKey, assertionInput);
      const clientPublicKey = await crypto.subtle.importKey(
        'jwk',
        clientKey.publicJwk,
        { name: 'ECDSA', namedCurve: 'P-256' },
        false,
        ['verify'],
      );
      const assertionCrypto = async () => {
        await crypto.subtle.sign(ES256, privateKey, assertionInput);
        await crypto.subtle.verify(ES256, clientPublicKey, assertionSignature, assertionInput);
      };
      return await compareWithFloor(
        async (count) => {
          for (let i = 0; i < count; i++) await requestToken();
        },
        primitive,
        endpointFloor(exchange, assertionCrypto, () => primitive(1)),
        25,
      );
    },
  },
];
