/**
 * REST facade benchmarks: a warm REST call through the plane (invocation middleware, catalog
 * authorization, a token minted for the caller, an HTTP-batch call to a `localService`, the
 * answer mapped back) against, in the same run and interleaved:
 *
 * - a direct authenticated HTTP-batch call to the same service with a cached token (what the
 *   plane's leg would cost were the plane free), at one call in flight and at 32;
 * - a plain Hono JSON route validating the same schema (what a hand-written REST endpoint costs).
 *
 * Plus the heap after 20 000 REST calls, against the heap after a warm-up.
 */
import type { MiddlewareHandler } from 'hono';
import { Hono } from 'hono';
import { z } from 'zod';
import { type CapabilityTokenClaims, signCapabilityToken } from '../src/core/capability-token.ts';
import { createControlPlane } from '../src/plane/control-plane.ts';
import { localService } from '../src/plane/endpoints.ts';
import { generateSigningKeyEntry, loadSigningAuthority } from '../src/plane/signing-keys.ts';
import { abilitySession } from '../src/caller/ability-session.ts';
import { httpBatchRpc } from '../src/caller/transports/http-batch.ts';
import { defineAbility } from '../src/service/ability.ts';
import { abilityMethod } from '../src/service/method.ts';
import { createService } from '../src/service/service.ts';
import { compareThroughput, type RoundRunner } from './measure.ts';
import type { Benchmark, BenchmarkResult } from './run.ts';

const ISSUER = 'https://plane.bench';
const PLANE_ID = 'bench-plane';
const SERVICE_ID = 'bench-svc';
const ABILITY_ID = 'bench-svc.items';

const itemSchema = z.object({
  id: z.string(),
  name: z.string(),
  count: z.number().int(),
  tags: z.array(z.string()),
});
type Item = z.infer<typeof itemSchema>;

const INPUT: Item = { id: 'item-42', name: 'bench item', count: 42, tags: ['a', 'b'] };
const BODY = JSON.stringify(INPUT);

const ability = defineAbility({
  id: ABILITY_ID,
  exposure: 'published',
  scopes: ['bench-svc.read'],
  methods: {
    echo: abilityMethod({
      input: itemSchema,
      output: itemSchema,
      rest: { method: 'post', path: '/items/echo' },
    }),
  },
  handler: () => ({ echo: (input: Item) => input }),
});

/** A bearer middleware as an application would write one: one known credential, one caller. */
const bearer: MiddlewareHandler = async (c, next) => {
  if (c.req.header('Authorization') !== 'Bearer bench-user') {
    return c.json({ error: 'unauthorized' }, 401, { 'WWW-Authenticate': 'Bearer' });
  }
  c.set('svcCaller' as never, { id: 'user-1', kind: 'user', principalKind: 'api_key' } as never);
  await next();
};

async function deployment() {
  const entry = await generateSigningKeyEntry({ kid: 'bench-rest' });
  const authority = await loadSigningAuthority([entry]);
  const service = createService({
    id: SERVICE_ID,
    title: 'Bench service',
    version: '1.0.0',
    auth: { jwks: authority.jwks, issuer: ISSUER },
    abilities: [ability],
    logger: false,
  });
  const plane = createControlPlane({
    id: PLANE_ID,
    issuer: ISSUER,
    signingKeys: [entry],
    services: [
      localService({
        id: SERVICE_ID,
        service,
        grants: [{ caller: PLANE_ID, scopes: ['bench-svc.read'] }],
      }),
    ],
    invocationMiddleware: bearer,
    log: false,
  });
  await plane.ready();
  const now = Math.floor(Date.now() / 1000);
  const claims: CapabilityTokenClaims = {
    iss: ISSUER,
    sub: 'bench-caller',
    aud: SERVICE_ID,
    scp: ['bench-svc.read'],
    spa: 'service',
    jti: crypto.randomUUID(),
    iat: now,
    nbf: now,
    exp: now + 600,
  };
  const token = await signCapabilityToken(claims, authority.signer);
  const direct = abilitySession<{ echo(input: Item): Item }>({
    abilityId: ABILITY_ID,
    callerServiceId: 'bench-caller',
    targetServiceId: SERVICE_ID,
    scopes: ['bench-svc.read'],
    requestToken: () => Promise.resolve(token),
    transport: httpBatchRpc((request) => service.fetch(request)),
  });
  const restCall = async (): Promise<void> => {
    const response = await plane.fetch(
      new Request('http://plane.bench/items/echo', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'Authorization': 'Bearer bench-user' },
        body: BODY,
      }),
    );
    check(response.status === 200 ? await response.json() as Item : undefined, response.status);
  };
  const directCall = async (): Promise<void> => check(await direct.echo(INPUT), 200);
  const hono = new Hono();
  hono.post('/items/echo', async (c) => {
    const parsed = itemSchema.safeParse(await c.req.json());
    if (!parsed.success) return c.json({ issues: parsed.error.issues }, 422);
    return c.json(parsed.data);
  });
  const honoCall = async (): Promise<void> => {
    const response = await hono.fetch(
      new Request('http://hono.bench/items/echo', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: BODY,
      }),
    );
    check(await response.json() as Item, response.status);
  };
  return { restCall, directCall, honoCall };
}

function check(output: Item | undefined, status: number): void {
  if (output?.count !== INPUT.count) throw new Error(`the call failed (status ${status})`);
}

/** `count` calls with `concurrency` in flight at a time. */
function concurrently(call: () => Promise<void>, concurrency: number): RoundRunner {
  return async (count) => {
    let started = 0;
    const worker = async () => {
      while (started < count) {
        started++;
        await call();
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  };
}

let shared: ReturnType<typeof deployment> | undefined;
const calls = () => (shared ??= deployment());

/** A heap sampler, and a collection before each sample where the runtime allows one. */
async function heapProbe(): Promise<(() => number) | undefined> {
  const runtime = globalThis as {
    Bun?: { gc(force: boolean): void };
    Deno?: { memoryUsage(): { heapUsed: number } };
    process?: { memoryUsage(): { heapUsed: number } };
    gc?: () => void;
  };
  if (runtime.Bun !== undefined) {
    const bun = runtime.Bun;
    return () => {
      bun.gc(true);
      return runtime.process!.memoryUsage().heapUsed;
    };
  }
  if (runtime.Deno !== undefined) {
    // Deno exposes a collection only when run with `--v8-flags=--expose-gc`.
    const deno = runtime.Deno;
    const collect = runtime.gc;
    return () => {
      collect?.();
      return deno.memoryUsage().heapUsed;
    };
  }
  if (runtime.process === undefined) return undefined;
  let collect = runtime.gc;
  if (collect === undefined) {
    const v8 = await import('node:v8');
    const vm = await import('node:vm');
    v8.setFlagsFromString('--expose-gc');
    collect = vm.runInNewContext('gc') as () => void;
  }
  return () => {
    collect!();
    return runtime.process!.memoryUsage().heapUsed;
  };
}

const HEAP_CALLS = 20_000;

async function heapAfterRestCalls(): Promise<BenchmarkResult> {
  const { restCall } = await calls();
  const sample = await heapProbe();
  if (sample === undefined) throw new Error('no heap measurement on this runtime');
  const run = concurrently(restCall, 32);
  await run(2000);
  const before = sample();
  const started = performance.now();
  const points: number[] = [];
  for (let done = 0; done < HEAP_CALLS; done += HEAP_CALLS / 4) {
    await run(HEAP_CALLS / 4);
    points.push(sample());
  }
  const seconds = (performance.now() - started) / 1000;
  const growth = points[points.length - 1] - before;
  const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(2)} MiB`;
  return {
    ours: HEAP_CALLS / seconds,
    primitive: HEAP_CALLS / seconds,
    ratio: 1,
    note: `heap after warm-up ${mib(before)}; after each 5 000 REST calls ` +
      `${points.map(mib).join(', ')}; growth ${mib(growth)} ` +
      `(${Math.round(growth / HEAP_CALLS)} bytes per call)`,
  };
}

/** The REST benchmarks run by `npm run bench`. */
export const benchmarks: Benchmark[] = [
  {
    name: 'REST call through the plane, c=1 (vs direct HTTP-batch call, cached token)',
    target: 0.5,
    async run() {
      const { restCall, directCall } = await calls();
      return await compareThroughput(concurrently(restCall, 1), concurrently(directCall, 1), {
        opsPerRound: 100,
      });
    },
  },
  {
    // No target: the direct session carries 32 concurrent calls in one HTTP batch, while each
    // REST request is its own HTTP request and its own batch.
    name: 'REST call through the plane, c=32 (vs direct HTTP-batch call, 32 calls per batch)',
    target: 0,
    async run() {
      const { restCall, directCall } = await calls();
      return await compareThroughput(concurrently(restCall, 32), concurrently(directCall, 32), {
        opsPerRound: 256,
      });
    },
  },
  {
    // Reported, no target: what the plane's path costs over a hand-written endpoint.
    name: 'REST call through the plane, c=1 (vs Hono JSON route validating the schema)',
    target: 0,
    async run() {
      const { restCall, honoCall } = await calls();
      return await compareThroughput(concurrently(restCall, 1), concurrently(honoCall, 1), {
        opsPerRound: 100,
      });
    },
  },
  {
    name: 'REST heap over 20 000 calls (c=32; ops/s shown, ratio not meaningful)',
    target: 0,
    run: heapAfterRestCalls,
  },
];
