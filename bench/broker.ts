/**
 * Broker benchmarks: a brokered session (caller → plane's `/rpc` → service) against a direct
 * session with the same service, in the same run, over real loopback sockets (the runtime's
 * serving helper for both the plane and the service).
 *
 * Whether memory and sockets stay flat over many brokered calls and sessions is
 * `bench/broker-flatness.ts`'s check (it needs a forced GC, so it runs on its own).
 */
import { z } from 'zod';
import { abilitySession, disposeAbilitySession } from '../src/caller/ability-session.ts';
import { brokerSession } from '../src/caller/broker-session.ts';
import { httpBatchRpc } from '../src/caller/transports/http-batch.ts';
import type { RpcTransportFactory } from '../src/caller/transports/outbound-metadata.ts';
import { websocketRpc } from '../src/caller/transports/websocket.ts';
import type { FetchTarget, ServedServer } from '../src/adapters/serve-target.ts';
import { createControlPlane } from '../src/plane/control-plane.ts';
import { httpService } from '../src/plane/endpoints.ts';
import { generateSigningKeyEntry } from '../src/plane/signing-keys.ts';
import { defineAbility } from '../src/service/ability.ts';
import { abilityMethod } from '../src/service/method.ts';
import { createService } from '../src/service/service.ts';
import { compareThroughput } from './measure.ts';
import type { Benchmark } from './run.ts';

const PLANE_ID = 'bench-plane';
/** The echo ability's input. */
export const INPUT = { id: 'item-42', name: 'bench item', count: 42, tags: ['a', 'b'] };
type Item = typeof INPUT;
interface Api {
  echo(input: Item): Item;
  ticks(input: { n: number }): ReadableStream<{ i: number }>;
}

const itemSchema = z.object({
  id: z.string(),
  name: z.string(),
  count: z.number().int(),
  tags: z.array(z.string()),
});

const ability = defineAbility({
  id: 'bench.echo',
  exposure: 'published',
  scopes: ['bench.read'],
  rpc: { transports: ['http-batch', 'websocket'] },
  methods: {
    echo: abilityMethod({ input: itemSchema, output: itemSchema }),
    ticks: abilityMethod({
      input: z.object({ n: z.number().int() }),
      output: z.object({ i: z.number().int() }),
      stream: true,
    }),
  },
  handler: () => ({
    echo: (input: Item) => input,
    ticks: ({ n }: { n: number }) => {
      let i = 0;
      return new ReadableStream({
        pull(controller) {
          if (i < n) controller.enqueue({ i: i++ });
          else controller.close();
        },
      });
    },
  }),
});

interface Loopback {
  serve(target: FetchTarget): Promise<ServedServer>;
  createWebSocket?: (url: string) => WebSocket;
}

async function loopback(): Promise<Loopback> {
  const runtime = globalThis as { Bun?: unknown; Deno?: unknown };
  if (runtime.Bun !== undefined) {
    const { serveBun } = await import('../src/adapters/bun.ts');
    return { serve: (target) => serveBun(target) };
  }
  if (runtime.Deno !== undefined) {
    const { serveDeno, denoWebSocketFactory } = await import('../src/adapters/deno.ts');
    return { serve: (target) => serveDeno(target), createWebSocket: denoWebSocketFactory() };
  }
  const { serveNode, nodeWebSocketFactory } = await import('../src/adapters/node.ts');
  return { serve: (target) => serveNode(target), createWebSocket: nodeWebSocketFactory() };
}

/** Sockets opened and sockets that closed. */
export interface SocketCount {
  opened: number;
  closed: number;
}

/**
 * A plane with the broker and the service, both served; direct and brokered sessions to them.
 * `legs` counts the plane's sockets to the service, `callerSockets` the brokered callers' sockets.
 */
export async function deployment() {
  const { serve, createWebSocket } = await loopback();
  const signingKey = await generateSigningKeyEntry({ kid: 'bench-broker' });
  const legs: SocketCount = { opened: 0, closed: 0 };
  const callerSockets: SocketCount = { opened: 0, closed: 0 };
  const dial = createWebSocket ?? ((url: string) => new WebSocket(url));
  const counting = (count: SocketCount) => (url: string) => {
    const socket = dial(url);
    count.opened++;
    socket.addEventListener('close', () => count.closed++);
    return socket;
  };
  const countingDial = counting(legs);
  const callerDial = counting(callerSockets);
  let serviceUrl = '';
  const plane = createControlPlane({
    id: PLANE_ID,
    signingKeys: [signingKey],
    services: () => [httpService({
      id: 'bench',
      url: serviceUrl,
      createWebSocket: countingDial,
      grants: [{ caller: 'bench-caller', scopes: ['bench.read'] }],
    })],
    rpc: {},
    invocationMiddleware: async (c, next) => {
      c.set('svcCaller' as never, { id: 'bench-caller', kind: 'service' } as never);
      await next();
    },
    log: false,
  });
  const service = createService({
    id: 'bench',
    title: 'Bench',
    version: '1',
    auth: { jwks: await plane.jwks(), issuer: PLANE_ID },
    abilities: [ability],
    logger: false,
  });
  const servedService = await serve(service);
  serviceUrl = servedService.url;
  const servedPlane = await serve(plane);
  const brokerUrl = `${servedPlane.url}/rpc`;
  const requestToken = async () =>
    (await plane.issueCapabilityToken({
      callerServiceId: 'bench-caller',
      callerAccess: 'service',
      targetServiceId: 'bench',
      scopes: ['bench.read'],
    })).token;
  const direct = (transport: RpcTransportFactory) =>
    abilitySession<Api>({
      abilityId: 'bench.echo',
      callerServiceId: 'bench-caller',
      targetServiceId: 'bench',
      scopes: ['bench.read'],
      requestToken,
      transport,
    });
  const serviceRoute = `${servedService.url}/rpc/bench.echo`;
  return {
    legs,
    callerSockets,
    directSocket: () =>
      direct(websocketRpc(serviceRoute, createWebSocket ? { createWebSocket } : {})),
    directBatch: () => direct(httpBatchRpc(serviceRoute)),
    brokered: (transport: 'websocket' | 'http-batch') =>
      brokerSession<Api>({
        url: brokerUrl,
        targetServiceId: 'bench',
        abilityId: 'bench.echo',
        scopes: ['bench.read'],
        transport,
        ...(transport === 'websocket' ? { createWebSocket: callerDial } : {}),
      }),
    async close() {
      await Promise.all([servedPlane.close(), servedService.close()]);
    },
  };
}

async function drain(stream: ReadableStream<{ i: number }>, expected: number): Promise<void> {
  let seen = 0;
  const reader = stream.getReader();
  while (!(await reader.read()).done) seen++;
  if (seen !== expected) throw new Error(`stream delivered ${seen} of ${expected} items`);
}

/** Throws unless `output` is the echo of {@link INPUT}. */
export function check(output: Item): void {
  if (output.count !== INPUT.count) throw new Error('echo returned the wrong value');
}

/** What {@link deployment} returns. */
export type Deployment = Awaited<ReturnType<typeof deployment>>;

async function unaryPair(fx: Deployment, transport: 'websocket' | 'http-batch') {
  const brokered = fx.brokered(transport);
  const direct = transport === 'websocket' ? fx.directSocket() : fx.directBatch();
  check(await brokered.echo(INPUT));
  check(await direct.echo(INPUT));
  return { brokered, direct };
}

type SessionPair = Awaited<ReturnType<typeof unaryPair>>;

/** Runs `measure` on a brokered and a direct session over `transport`, then closes everything. */
async function withSessionPair<T>(
  transport: 'websocket' | 'http-batch',
  measure: (pair: SessionPair) => Promise<T>,
): Promise<T> {
  const fx = await deployment();
  const pair = await unaryPair(fx, transport);
  try {
    return await measure(pair);
  } finally {
    disposeAbilitySession(pair.brokered);
    disposeAbilitySession(pair.direct);
    await fx.close();
  }
}

/** Unary calls one after another on each session of `pair`, interleaved. */
function unaryThroughput({ brokered, direct }: SessionPair, opsPerRound: number) {
  return compareThroughput(
    async (count) => {
      for (let i = 0; i < count; i++) check(await brokered.echo(INPUT));
    },
    async (count) => {
      for (let i = 0; i < count; i++) check(await direct.echo(INPUT));
    },
    { opsPerRound },
  );
}

/** The broker benchmarks run by `npm run bench`. */
export const benchmarks: Benchmark[] = [
  {
    name: 'brokered unary call over WebSocket (vs direct WebSocket session)',
    target: 0.6,
    run: () => withSessionPair('websocket', (pair) => unaryThroughput(pair, 100)),
  },
  {
    name: 'brokered streamed items over WebSocket (vs direct)',
    target: 0.7,
    run: () =>
      withSessionPair('websocket', ({ brokered, direct }) =>
        compareThroughput(
          async (count) => drain(await brokered.ticks({ n: count }), count),
          async (count) => drain(await direct.ticks({ n: count }), count),
          { opsPerRound: 2000 },
        )),
  },
  {
    name: 'brokered unary call over HTTP-batch (vs direct HTTP-batch)',
    target: 0.3,
    run: () => withSessionPair('http-batch', (pair) => unaryThroughput(pair, 50)),
  },
  {
    name: 'brokered WebSocket sessions opened, called once, closed (vs direct)',
    target: 0.3,
    async run() {
      const fx = await deployment();
      const brokeredSession = async () => {
        const session = fx.brokered('websocket');
        check(await session.echo(INPUT));
        disposeAbilitySession(session);
      };
      const directSession = async () => {
        const session = fx.directSocket();
        check(await session.echo(INPUT));
        disposeAbilitySession(session);
      };
      try {
        return await compareThroughput(
          async (count) => {
            for (let i = 0; i < count; i++) await brokeredSession();
          },
          async (count) => {
            for (let i = 0; i < count; i++) await directSession();
          },
          { opsPerRound: 10, budgetMs: 500 },
        );
      } finally {
        await fx.close();
      }
    },
  },
];
