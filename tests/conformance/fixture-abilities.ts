// The fixture abilities of the security checklist (§1.2): svc-a's echo, other, internal and
// private abilities, and the whoami ability of svc-b / svc-c. Every handler factory creation and
// every method invocation is counted so refusals can prove no handler ran.
import { z } from 'zod';
import { AbilityHandlerError } from '../../src/core/errors.ts';
import { abilityMethod } from '../../src/service/method.ts';
import { defineAbility } from '../../src/service/ability.ts';
import type { HandlerFactoryInput } from '../../src/service/ability.ts';

/** Per-run counters: factory creations by ability id, invocations by `<ability>#<method>`. */
export interface FixtureStats {
  factories: Map<string, number>;
  calls: Map<string, number>;
  marker: string;
}

export function createFixtureStats(): FixtureStats {
  return { factories: new Map(), calls: new Map(), marker: `SECRET-${crypto.randomUUID()}` };
}

const bump = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);

const anyObject = z.record(z.string(), z.unknown());
const empty = z.object({}).strict();

/** What `whoami` reports: everything the factory received, made serialisable. */
function whoamiReport(input: HandlerFactoryInput) {
  return {
    identity: { ...input.identity, expiresAt: input.identity.expiresAt.toISOString() },
    connInfo: input.connInfo ?? null,
    idempotencyKey: input.idempotencyKey ?? null,
    remainingTimeoutMs: input.remainingTimeoutMs() ?? null,
    requestId: input.requestId ?? null,
  };
}

function counted<T>(
  stats: FixtureStats,
  abilityId: string,
  build: (input: HandlerFactoryInput) => T,
) {
  return (input: HandlerFactoryInput): T => {
    bump(stats.factories, abilityId);
    return build(input);
  };
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });

const item = z.object({
  id: z.string(),
  name: z.string(),
  note: z.string().optional(),
  tags: z.array(z.string()).optional(),
  count: z.number().optional(),
});

/** The fixture's transports: HTTP-batch and WebSocket, plus the native binding when asked. */
function fixtureTransports(
  native: boolean | undefined,
): ('http-batch' | 'websocket' | 'cloudflare-binding-rpc')[] {
  return native === true
    ? ['http-batch', 'websocket', 'cloudflare-binding-rpc']
    : ['http-batch', 'websocket'];
}

/**
 * svc-a.echo: the method set of the checklist fixture. `options.access` tightens the access
 * class (a redeploy that makes the ability service-only).
 */
export function echoAbility(
  stats: FixtureStats,
  serviceId = 'svc-a',
  options: { access?: 'plane' | 'service'; native?: boolean } = {},
) {
  const id = `${serviceId}.echo`;
  const call = (method: string) => bump(stats.calls, `${id}#${method}`);
  return defineAbility({
    id,
    title: 'Echo',
    exposure: 'published',
    access: options.access ?? 'plane',
    rpc: { transports: fixtureTransports(options.native) },
    methods: {
      whoami: abilityMethod({
        input: anyObject,
        output: anyObject,
        scopes: [`${serviceId}.read`],
        mcp: { name: `${serviceId}_whoami`, description: 'Echo the verified identity' },
        rest: { method: 'get', path: '/whoami' },
      }),
      write: abilityMethod({
        input: anyObject,
        output: z.object({ written: z.boolean() }),
        scopes: [`${serviceId}.write`],
      }),
      sleep: abilityMethod({
        input: z.object({ ms: z.number().int().nonnegative() }),
        output: z.object({ slept: z.number(), aborted: z.boolean() }),
        rest: { method: 'post', path: '/sleep' },
      }),
      fail: abilityMethod({
        input: z.object({ kind: z.string() }),
        output: anyObject,
        mcp: { name: `${serviceId}_fail`, description: 'Fail on purpose' },
        rest: { method: 'post', path: '/fail' },
      }),
      failShaped: abilityMethod({
        input: z.object({
          status: z.number().int(),
          retryable: z.boolean().optional(),
          reason: z.string(),
        }),
        output: anyObject,
        idempotent: true,
        mcp: { name: `${serviceId}_failShaped`, description: 'Fail with a chosen classification' },
        rest: { method: 'post', path: '/fail-shaped' },
      }),
      badOutput: abilityMethod({
        input: anyObject,
        output: z.object({ ok: z.literal(true) }),
        rest: { method: 'get', path: '/bad-output' },
      }),
      ticks: abilityMethod({
        input: z.object({
          n: z.number().int().nonnegative(),
          size: z.number().int().optional(),
          delayMs: z.number().int().nonnegative().optional(),
        }),
        output: z.object({ i: z.number().int(), pad: z.string().optional() }),
        stream: true,
        mcp: { name: `${serviceId}_ticks`, description: 'Stream n ticks' },
      }),
      failMidStream: abilityMethod({
        input: z.object({ after: z.number().int().nonnegative() }),
        output: z.object({ i: z.number().int() }),
        stream: true,
      }),
      'items.get': abilityMethod({
        input: z.object({ id: z.string() }),
        output: anyObject,
        rest: { method: 'get', path: '/items/{id}' },
      }),
      'items.update': abilityMethod({
        input: item,
        output: item,
        rest: { method: 'post', path: '/items/{id}', status: 201 },
      }),
      'items.search': abilityMethod({
        input: z.object({ q: z.string().optional() }),
        output: anyObject,
        rest: { method: 'query', path: '/items/search' },
      }),
      'items.replace': abilityMethod({
        input: item,
        output: item,
        rest: { method: 'put', path: '/items/{id}' },
      }),
      'items.patch': abilityMethod({
        input: z.object({ id: z.string(), name: z.string().optional() }),
        output: anyObject,
        rest: { method: 'patch', path: '/items/{id}' },
      }),
      'items.delete': abilityMethod({
        input: z.object({ id: z.string() }),
        output: z.object({ deleted: z.string() }),
        rest: { method: 'delete', path: '/items/{id}', status: 204 },
      }),
    },
    handler: counted(stats, id, (input) => ({
      whoami() {
        call('whoami');
        return whoamiReport(input);
      },
      write() {
        call('write');
        return { written: true };
      },
      async sleep({ ms }: { ms: number }) {
        call('sleep');
        const started = Date.now();
        await sleep(ms, input.signal);
        return { slept: Date.now() - started, aborted: input.signal.aborted };
      },
      fail({ kind }: { kind: string }): Record<string, unknown> {
        call('fail');
        const secret = `${stats.marker} postgres://u:p@db`;
        switch (kind) {
          case 'string':
            throw secret;
          case 'number':
            throw 42;
          case 'null':
            throw null;
          case 'undefined':
            throw undefined;
          case 'cause':
            throw new Error('outer', { cause: new Error(secret) });
          case 'aggregate':
            throw new AggregateError([new Error(secret)], secret);
          default:
            throw new Error(secret);
        }
      },
      failShaped(
        { status, retryable, reason }: { status: number; retryable?: boolean; reason: string },
      ): Record<string, unknown> {
        call('failShaped');
        throw new AbilityHandlerError(reason === 'quota' ? 'Quota exceeded' : 'Shaped failure', {
          status,
          reason,
          ...(retryable !== undefined ? { retryable } : {}),
        });
      },
      badOutput() {
        call('badOutput');
        return { ok: false, leaked: stats.marker } as unknown as { ok: true };
      },
      async *ticks({ n, size, delayMs }: { n: number; size?: number; delayMs?: number }) {
        call('ticks');
        const pad = size ? 'x'.repeat(size) : undefined;
        let i = 0;
        try {
          for (; i < n; i++) {
            if (delayMs) await new Promise((resolve) => setTimeout(resolve, delayMs));
            // Counted as produced when asked for: flow-control tests read how far it got.
            call('ticks.yielded');
            yield pad === undefined ? { i } : { i, pad };
          }
        } finally {
          // Counted when the stream ends early: the caller cancelled it instead of draining it.
          if (i < n) call('ticks.cancelled');
          // Reached at the end, or when the consumer cancelled the stream.
          call('ticks.ended');
        }
      },
      async *failMidStream({ after }: { after: number }) {
        call('failMidStream');
        for (let i = 0; i < after; i++) yield { i };
        throw new Error(`${stats.marker} mid-stream`);
      },
      'items.get'({ id }: { id: string }) {
        call('items.get');
        return { id };
      },
      'items.update'(value: z.infer<typeof item>) {
        call('items.update');
        return value;
      },
      'items.search'(value: { q?: string }) {
        call('items.search');
        return { query: value };
      },
      'items.replace'(value: z.infer<typeof item>) {
        call('items.replace');
        return value;
      },
      'items.patch'(value: { id: string; name?: string }) {
        call('items.patch');
        return { patched: value };
      },
      'items.delete'({ id }: { id: string }) {
        call('items.delete');
        return { deleted: id };
      },
    })),
  });
}

/** svc-a.other: a second plane-class ability (proof ability substitution). */
export function otherAbility(stats: FixtureStats) {
  return defineAbility({
    id: 'svc-a.other',
    exposure: 'published',
    methods: { ping: abilityMethod({ input: anyObject, output: z.object({ pong: z.boolean() }) }) },
    handler: counted(stats, 'svc-a.other', () => ({
      ping() {
        bump(stats.calls, 'svc-a.other#ping');
        return { pong: true };
      },
    })),
  });
}

/** svc-a.internal: service callers only. */
export function internalAbility(stats: FixtureStats) {
  return defineAbility({
    id: 'svc-a.internal',
    exposure: 'published',
    access: 'service',
    scopes: ['svc-a.internal'],
    methods: {
      whoami: abilityMethod({
        input: anyObject,
        output: anyObject,
        rest: { method: 'get', path: '/internal/whoami' },
        mcp: { name: 'svc-a_internal_whoami', description: 'Service callers only' },
      }),
    },
    handler: counted(stats, 'svc-a.internal', (input) => ({
      whoami() {
        bump(stats.calls, 'svc-a.internal#whoami');
        return whoamiReport(input);
      },
    })),
  });
}

/** svc-a.private: not published, though it carries REST and MCP metadata. */
export function privateAbility(stats: FixtureStats) {
  return defineAbility({
    id: 'svc-a.private',
    exposure: 'private',
    methods: {
      secret: abilityMethod({
        input: anyObject,
        output: anyObject,
        scopes: ['svc-a.read'],
        rest: { method: 'get', path: '/private/secret' },
        mcp: { name: 'svc-a_private_secret', description: 'Never listed' },
      }),
    },
    handler: counted(stats, 'svc-a.private', () => ({
      secret() {
        bump(stats.calls, 'svc-a.private#secret');
        return { secret: stats.marker };
      },
    })),
  });
}

/** `<service>.echo` with only `whoami`, for svc-b (ingress) and svc-c (second audience). */
export function whoamiOnlyAbility(
  stats: FixtureStats,
  serviceId: string,
  options: { native?: boolean } = {},
) {
  const id = `${serviceId}.echo`;
  return defineAbility({
    id,
    exposure: 'published',
    rpc: { transports: fixtureTransports(options.native) },
    methods: {
      whoami: abilityMethod({
        input: anyObject,
        output: anyObject,
        scopes: [`${serviceId}.read`],
        rest: { method: 'get', path: `/${serviceId}/whoami` },
      }),
    },
    handler: counted(stats, id, (input) => ({
      whoami() {
        bump(stats.calls, `${id}#whoami`);
        return whoamiReport(input);
      },
    })),
  });
}

export { empty };
