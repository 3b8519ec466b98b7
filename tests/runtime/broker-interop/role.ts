// One role of the broker interop deployment, run as its own process on Node (tsx), Deno or
// Bun: `service` (interop.echo behind ingress), `plane` (the broker at /rpc, reaching the service
// over HTTP-batch and WebSocket) or `caller` (brokerSession over WebSocket and HTTP-batch).
// Servers listen on 127.0.0.1 at the port they are given, print `{"ready":url}` and stop after
// `INTEROP_LIFETIME_MS`; the caller prints `{"result":...}` and exits.
import { z } from 'zod';
import { brokerSession } from '../../../src/caller/broker-session.ts';
import { disposeAbilitySession } from '../../../src/caller/ability-session.ts';
import { svcErrorInfo } from '../../../src/core/errors.ts';
import { createControlPlane, JWKS_PATH } from '../../../src/plane/control-plane.ts';
import { httpService } from '../../../src/plane/endpoints.ts';
import { generateSigningKeyEntry } from '../../../src/plane/signing-keys.ts';
import { defineAbility } from '../../../src/service/ability.ts';
import { jwksFromUrl } from '../../../src/service/jwks-sources.ts';
import { abilityMethod } from '../../../src/service/method.ts';
import { createService } from '../../../src/service/service.ts';
import type { FetchTarget, ServedServer } from '../../../src/adapters/serve-target.ts';

const PLANE_ID = 'interop-plane';
const env = (name: string): string => {
  const value = (globalThis as { process?: { env: Record<string, string | undefined> } }).process
    ?.env[name];
  if (value === undefined) throw new Error(`missing ${name}`);
  return value;
};
const runtime = 'Deno' in globalThis ? 'deno' : 'Bun' in globalThis ? 'bun' : 'node';

/** A client WebSocket with headers: `ws` on Node and Deno, Bun's own `WebSocket` on Bun. */
async function socketFactory(headers: Record<string, string> = {}) {
  if (runtime === 'bun') {
    const Bun = globalThis.WebSocket as unknown as new (url: string, init: object) => WebSocket;
    return (url: string) => new Bun(url, { headers });
  }
  const { WebSocket: Ws } = await import('ws');
  return (url: string) => new Ws(url, { headers }) as unknown as WebSocket;
}

async function serve(target: FetchTarget, port: number): Promise<ServedServer> {
  if (runtime === 'deno') {
    return (await import('../../../src/adapters/deno.ts')).serveDeno(target, { port });
  }
  if (runtime === 'bun') {
    return (await import('../../../src/adapters/bun.ts')).serveBun(target, { port });
  }
  return (await import('../../../src/adapters/node.ts')).serveNode(target, { port });
}

const echo = defineAbility({
  id: 'interop.echo',
  exposure: 'published',
  scopes: ['interop.read'],
  rpc: { transports: ['http-batch', 'websocket'] },
  methods: {
    whoami: abilityMethod({ input: z.object({}), output: z.record(z.string(), z.unknown()) }),
    ticks: abilityMethod({
      input: z.object({ n: z.number().int() }),
      output: z.object({ i: z.number().int() }),
      stream: true,
    }),
  },
  handler: ({ identity, connInfo, requestId }) => ({
    whoami: () => ({
      runtime,
      subject: identity.subject ?? null,
      brokerServiceId: identity.brokerServiceId ?? null,
      connInfo: connInfo ?? null,
      requestId: requestId ?? null,
    }),
    async *ticks({ n }: { n: number }) {
      for (let i = 0; i < n; i++) yield { i, hidden: true };
    },
  }),
});

async function runServer(target: FetchTarget): Promise<void> {
  const server = await serve(target, Number(env('INTEROP_PORT')));
  console.log(JSON.stringify({ ready: server.url }));
  await new Promise((resolve) => setTimeout(resolve, Number(env('INTEROP_LIFETIME_MS'))));
  await server.close();
}

async function runCaller(): Promise<void> {
  const url = `${env('INTEROP_PLANE_URL')}/rpc`;
  const common = {
    url,
    targetServiceId: 'interop',
    abilityId: 'interop.echo',
    scopes: ['interop.read'],
    timeoutMs: 20_000,
  };
  type Api = {
    whoami(input: object): Record<string, unknown>;
    ticks(input: { n: number }): ReadableStream<{ i: number }>;
  };
  const socket = brokerSession<Api>({
    ...common,
    transport: 'websocket',
    requestId: `req-interop-${runtime}`,
    createWebSocket: await socketFactory({ Authorization: 'Bearer t-alice' }),
  });
  const batch = brokerSession<Api>({
    ...common,
    fetch: (request) => {
      const headers = new Headers(request.headers);
      headers.set('Authorization', 'Bearer t-alice');
      return fetch(new Request(request, { headers }));
    },
  });
  try {
    const overSocket = await socket.whoami({});
    const items: unknown[] = [];
    for await (const item of await socket.ticks({ n: 200 })) items.push(item);
    const overBatch = await batch.whoami({});
    const refused = await batch.ticks({ n: 1 }).then(() => null, (error) => svcErrorInfo(error));
    console.log(JSON.stringify({
      result: { caller: runtime, overSocket, items, overBatch, refused },
    }));
  } finally {
    disposeAbilitySession(socket);
    disposeAbilitySession(batch);
  }
}

const role = env('INTEROP_ROLE');
if (role === 'service') {
  await runServer(createService({
    id: 'interop',
    title: 'Interop',
    version: '1',
    auth: { jwks: jwksFromUrl(`${env('INTEROP_PLANE_URL')}${JWKS_PATH}`), issuer: PLANE_ID },
    ingress: { brokerServiceId: PLANE_ID },
    abilities: [echo],
    logger: false,
  }));
} else if (role === 'plane') {
  const plane = createControlPlane({
    id: PLANE_ID,
    signingKeys: [await generateSigningKeyEntry({ kid: 'interop-k1' })],
    services: [httpService({
      id: 'interop',
      url: env('INTEROP_SERVICE_URL'),
      createWebSocket: await socketFactory(),
      grants: [{ caller: PLANE_ID, scopes: ['interop.read'] }],
    })],
    rpc: {},
    invocationMiddleware: async (c, next) => {
      if (c.req.header('authorization') !== 'Bearer t-alice') {
        return c.json({ status: 401 }, 401, { 'WWW-Authenticate': 'Bearer' });
      }
      c.set('svcCaller' as never, { id: 'alice', kind: 'user', orgId: 'org-1' } as never);
      c.set('svcConnInfo' as never, {
        remote: { address: '127.0.0.1', addressType: 'IPv4', port: 1, transport: 'tcp' },
      } as never);
      await next();
    },
    log: false,
  });
  await runServer(plane);
} else {
  await runCaller();
}
const exit = (globalThis as { process?: { exit(code: number): void } }).process?.exit;
exit?.(0);
