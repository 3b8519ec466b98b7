/**
 * The real services behind the per-runtime WebSocket tests: `svc-zod` (zod schemas, plus one
 * method whose input is zod and output arktype) and `svc-ark` (arktype schemas), served by one
 * `fetch` target, and the checks every runtime runs against them over a real socket.
 *
 * Arktype schemas live at module scope: workerd forbids code generation after startup.
 * Streamed items carry an undeclared `extra` field that both libraries strip when parsing, so an
 * item without it is an item the wrapper validated.
 */
import assert from 'node:assert/strict';
import { type } from 'arktype';
import { z } from 'zod';
import { svcErrorInfo } from '../../src/core/errors.ts';
import { isAbilityValidationError } from '../../src/core/validation-issues.ts';
import { defineAbility } from '../../src/service/ability.ts';
import { abilitySession, disposeAbilitySession } from '../../src/caller/ability-session.ts';
import { abilityMethod } from '../../src/service/method.ts';
import { createService } from '../../src/service/service.ts';
import { websocketRpc } from '../../src/caller/transports/websocket.ts';
import { signedToken } from '../support/forge.ts';

/** The issuer the runtime services trust. */
export const RUNTIME_ISSUER = 'https://plane.runtime.test';

/** How many items the long stream carries (the issue's criterion). */
export const STREAM_ITEMS = 10_000;

const zodGreeting = z.object({ name: z.string().min(1) });
const zodReply = z.object({ greeting: z.string(), library: z.literal('zod') });
const zodTick = z.object({ i: z.number().int().nonnegative() });
const zodTicksInput = z.object({
  n: z.number().int().nonnegative(),
  poisonAt: z.number().optional(),
});

const arkGreeting = type({ name: 'string > 0' });
const arkReply = type({ greeting: 'string', library: "'arktype'" });
const arkTick = type({ '+': 'delete', i: 'number.integer >= 0' });
const arkTicksInput = type({ n: 'number.integer >= 0', 'poisonAt?': 'number' });
const arkMixedReply = type({ greeting: 'string', length: 'number.integer' });

/** Ticks 0..n-1, each with an undeclared field; `poisonAt` yields one invalid item there. */
async function* ticks({ n, poisonAt }: { n: number; poisonAt?: number }) {
  for (let i = 0; i < n; i++) {
    yield (i === poisonAt ? { i: -1, extra: 'x' } : { i, extra: 'x' }) as { i: number };
  }
}

const zodAbility = defineAbility({
  id: 'svc-zod.echo',
  scopes: ['svc-zod.read'],
  rpc: { transports: ['websocket'] },
  methods: {
    greet: abilityMethod({ input: zodGreeting, output: zodReply }),
    mixed: abilityMethod({ input: zodGreeting, output: arkMixedReply }),
    ticks: abilityMethod({ input: zodTicksInput, output: zodTick, stream: true }),
  },
  handler: ({ identity }) => ({
    greet: ({ name }) => ({ greeting: `hello ${name} from ${identity.serviceId}`, library: 'zod' }),
    mixed: ({ name }) => ({ greeting: `hello ${name}`, length: name.length }),
    ticks,
  }),
});

const arkAbility = defineAbility({
  id: 'svc-ark.echo',
  scopes: ['svc-ark.read'],
  rpc: { transports: ['websocket'] },
  methods: {
    greet: abilityMethod({ input: arkGreeting, output: arkReply }),
    ticks: abilityMethod({ input: arkTicksInput, output: arkTick, stream: true }),
  },
  handler: ({ identity }) => ({
    greet: ({ name }) => ({
      greeting: `hello ${name} from ${identity.serviceId}`,
      library: 'arktype' as const,
    }),
    ticks,
  }),
});

/** A fetch target serving both services: `/rpc/svc-ark.*` to svc-ark, the rest to svc-zod. */
export function runtimeServices(jwks: { keys: unknown[] }) {
  const auth = { jwks, issuer: RUNTIME_ISSUER };
  const zodService = createService({
    id: 'svc-zod',
    title: 'Zod service',
    version: '1.0.0',
    auth,
    abilities: [zodAbility],
    logger: false,
  });
  const arkService = createService({
    id: 'svc-ark',
    title: 'Arktype service',
    version: '1.0.0',
    auth,
    abilities: [arkAbility],
    logger: false,
  });
  return {
    fetch(request: Request, env?: unknown): Promise<Response> {
      const path = new URL(request.url).pathname;
      return path.startsWith('/rpc/svc-ark.')
        ? arkService.fetch(request, env)
        : zodService.fetch(request, env);
    },
  };
}

/** A fresh P-256 signing key: its public JWKS for the services and a token signer for callers. */
export async function runtimeSigningKey() {
  const pair = await crypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, [
    'sign',
    'verify',
  ]) as CryptoKeyPair;
  const exported = await crypto.subtle.exportKey('jwk', pair.publicKey);
  const publicJwk = {
    kty: exported.kty,
    crv: exported.crv,
    x: exported.x,
    y: exported.y,
    kid: 'k1',
  };
  return {
    jwks: { keys: [publicJwk] },
    /** A service-class token from `svc-caller` for `audience` with `<audience>.read`. */
    token(audience: string): Promise<string> {
      const now = Math.floor(Date.now() / 1000);
      return signedToken(pair.privateKey, {
        iss: RUNTIME_ISSUER,
        sub: 'svc-caller',
        aud: audience,
        scp: [`${audience}.read`],
        spa: 'service',
        jti: crypto.randomUUID(),
        iat: now - 5,
        nbf: now - 5,
        exp: now + 300,
      });
    },
  };
}

interface RuntimeApi {
  greet(input: { name: string }): { greeting: string; library: string };
  mixed(input: { name: string }): { greeting: string; length: number };
  ticks(input: { n: number; poisonAt?: number }): ReadableStream<{ i: number }>;
}

/** Reads a stream to its end, checking each item is exactly the next tick (no `extra` field). */
export async function readTicks(stream: ReadableStream<{ i: number }>): Promise<number> {
  const reader = stream.getReader();
  let expected = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return expected;
    assert.deepEqual(value, { i: expected });
    expected++;
  }
}

/**
 * Runs the issue's WebSocket criterion against one service at `baseUrl`: authenticate, unary
 * calls, an invalid input refused, 10 000 validated items, and a poisoned item failing its
 * stream with a 500 validation error. The socket factory defaults to the global `WebSocket`.
 */
export async function assertServiceOverWebSocket(
  baseUrl: string,
  serviceId: 'svc-zod' | 'svc-ark',
  token: (audience: string) => Promise<string>,
  createWebSocket?: (url: string) => WebSocket,
): Promise<void> {
  const abilityId = `${serviceId}.echo`;
  const session = abilitySession<RuntimeApi>({
    abilityId,
    callerServiceId: 'svc-caller',
    targetServiceId: serviceId,
    scopes: [`${serviceId}.read`],
    requestToken: () => token(serviceId),
    transport: websocketRpc(
      `${baseUrl}/rpc/${abilityId}`,
      createWebSocket !== undefined ? { createWebSocket } : {},
    ),
    requestId: `req-${serviceId}`,
  });
  try {
    const library = serviceId === 'svc-zod' ? 'zod' : 'arktype';
    assert.deepEqual(await session.greet({ name: 'ada' }), {
      greeting: 'hello ada from svc-caller',
      library,
    });
    if (serviceId === 'svc-zod') {
      assert.deepEqual(await session.mixed({ name: 'grace' }), {
        greeting: 'hello grace',
        length: 5,
      });
    }
    const invalid = await session.greet({ name: '' }).catch((error: unknown) => error);
    assert.equal(svcErrorInfo(invalid).code, 'ability_validation');
    assert.equal(svcErrorInfo(invalid).status, 422);
    // The caller reads the issues typed, whichever library wrote them.
    assert.ok(isAbilityValidationError(invalid));
    assert.deepEqual(invalid.issues.map((issue) => issue.path), [['name']]);
    assert.equal(typeof invalid.issues[0].message, 'string');
    assert.equal(await readTicks(await session.ticks({ n: STREAM_ITEMS })), STREAM_ITEMS);
    // The invalid item fails the stream. Items already in flight when the failure arrives may
    // be dropped with it (Cap'n Web errors the receiving stream at once), so only the prefix
    // that did arrive is checked.
    const poisoned = (await session.ticks({ n: 100, poisonAt: 50 })).getReader();
    let delivered = 0;
    const failure = await (async () => {
      for (;;) {
        const { done, value } = await poisoned.read();
        if (done) return undefined;
        assert.deepEqual(value, { i: delivered++ });
      }
    })().catch((error: unknown) => error);
    assert.ok(delivered <= 50, `${delivered} items before the invalid one`);
    assert.equal(svcErrorInfo(failure).code, 'ability_validation');
    assert.equal(svcErrorInfo(failure).status, 500);
    assert.ok(isAbilityValidationError(failure));
    assert.ok(failure.issues.length > 0);
    for (const issue of failure.issues) {
      assert.equal(issue.message, 'does not match the output schema');
    }
    // The same socket still answers after a failed stream.
    assert.equal((await session.greet({ name: 'again' })).library, library);
  } finally {
    disposeAbilitySession(session);
  }
}
