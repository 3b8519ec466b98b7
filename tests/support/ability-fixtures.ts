/**
 * Shared pieces for the ability wrapper tests: identities, call contexts that record log
 * events, an abort-aware sleep, an assertion on taxonomy errors, and an `svc-a.echo`-shaped
 * ability (zod) that counts handler creations.
 */
import assert from 'node:assert/strict';
import { type } from 'arktype';
import { z } from 'zod';
import { AbilityHandlerError, type SvcErrorInfo, svcErrorInfo } from '../../src/core/errors.ts';
import type { VerifiedIdentity } from '../../src/core/identity.ts';
import type { SvcLogEvent } from '../../src/core/logging.ts';
import {
  type AbilityTransport,
  defineAbility,
  type HandlerFactoryInput,
} from '../../src/service/ability.ts';
import type { AbilityCallContext } from '../../src/service/ability-target.ts';
import { abilityMethod } from '../../src/service/method.ts';
import { requireScopes } from '../../src/service/scopes.ts';

// workerd permits code generation only at startup, where arktype compiles its validators, so
// arktype schemas are declared at module scope.
const itemSchema = type({ id: 'string', name: 'string' });

/** A verified identity with the given scopes. */
export function identityWith(scopes: string[]): VerifiedIdentity {
  return {
    serviceId: 'svc-caller',
    audience: 'svc-a',
    scopes,
    tokenId: 'token-1',
    issuer: 'https://plane.test',
    expiresAt: new Date(Date.now() + 120_000),
    callerAccess: 'service',
  };
}

/** A call context whose log events are collected in `events`. */
export function callContextWith(
  overrides: Partial<AbilityCallContext> = {},
): { call: AbilityCallContext; events: SvcLogEvent[] } {
  const events: SvcLogEvent[] = [];
  const call: AbilityCallContext = {
    identity: identityWith(['svc-a.read', 'svc-a.write']),
    context: { runtime: 'test' },
    transport: 'websocket',
    log: (event) => events.push(event),
    ...overrides,
  };
  return { call, events };
}

/** Waits `ms`, or rejects with the signal's reason as soon as it aborts (no timer left behind). */
export function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** Asserts that `promise` rejects with an error whose taxonomy info matches `expected`. */
export async function rejectsWithInfo(
  promise: Promise<unknown>,
  expected: Partial<SvcErrorInfo>,
): Promise<Error> {
  let caught: unknown;
  await assert.rejects(promise, (error) => {
    caught = error;
    return true;
  });
  assert.ok(caught instanceof Error, 'rejects with an Error');
  const info = svcErrorInfo(caught);
  for (const [key, value] of Object.entries(expected)) {
    assert.equal(info[key as keyof SvcErrorInfo], value, `${key} of ${caught.message}`);
  }
  return caught;
}

/** What a fixture ability records about its handler factory. */
export interface FactoryRecord {
  factoryCalls: number;
  inputs: HandlerFactoryInput[];
}

/** The kinds of throw `fail` produces. */
export const FAIL_KINDS = [
  'error',
  'string',
  'number',
  'null',
  'undefined',
  'aggregate',
  'cause',
  'type-error',
] as const;

/** A secret marker that must never reach a caller. */
export const SECRET = 'SECRET-7f3a postgres://u:p@db';

function failure(kind: (typeof FAIL_KINDS)[number]): unknown {
  switch (kind) {
    case 'error':
      return new Error(SECRET);
    case 'string':
      return SECRET;
    case 'number':
      return 42;
    case 'null':
      return null;
    case 'undefined':
      return undefined;
    case 'aggregate':
      return new AggregateError([new Error(SECRET)], SECRET);
    case 'cause':
      return new Error('outer', { cause: new AbilityHandlerError(SECRET, { status: 400 }) });
    case 'type-error':
      return new TypeError(SECRET);
  }
}

/**
 * The `svc-a.echo` ability of the fixture (zod schemas): `whoami`, `write`, `sleep`, `fail`,
 * `failShaped`, `badOutput`, `ticks` and `failMidStream` (streaming), `items.get` (REST). The factory is counted.
 */
export function echoAbility(transports: AbilityTransport[] = ['http-batch', 'websocket']) {
  const record: FactoryRecord = { factoryCalls: 0, inputs: [] };
  const ability = defineAbility({
    id: 'svc-a.echo',
    exposure: 'published',
    rpc: { transports },
    methods: {
      whoami: abilityMethod({
        input: z.object({}),
        output: z.object({
          serviceId: z.string(),
          scopes: z.array(z.string()),
          idempotencyKey: z.string().optional(),
          requestId: z.string().optional(),
          remainingTimeoutMs: z.number().optional(),
        }),
        scopes: ['svc-a.read'],
        mcp: { name: 'svc-a_whoami', description: 'Who is calling' },
      }),
      write: abilityMethod({
        input: z.object({ value: z.string().min(1) }),
        output: z.object({ written: z.string() }),
        scopes: ['svc-a.write'],
      }),
      sleep: abilityMethod({
        input: z.object({ ms: z.number().int().nonnegative() }),
        output: z.object({ slept: z.number() }),
      }),
      fail: abilityMethod({
        input: z.object({ kind: z.enum(FAIL_KINDS) }),
        output: z.object({}),
      }),
      failShaped: abilityMethod({
        input: z.object({
          status: z.number().int(),
          retryable: z.boolean().optional(),
          reason: z.string().optional(),
        }),
        output: z.object({}),
      }),
      badOutput: abilityMethod({ input: z.object({}), output: z.object({ count: z.number() }) }),
      ticks: abilityMethod({
        input: z.object({ n: z.number().int().nonnegative() }),
        output: z.object({ i: z.number() }),
        stream: true,
      }),
      failMidStream: abilityMethod({
        input: z.object({ after: z.number().int().nonnegative() }),
        output: z.object({ i: z.number() }),
        stream: true,
      }),
      'items.get': abilityMethod({
        input: z.object({ id: z.string() }),
        output: itemSchema,
        rest: { method: 'get', path: '/items/{id}' },
        idempotent: true,
      }),
    },
    handler: (input) => {
      record.factoryCalls += 1;
      record.inputs.push(input);
      return {
        whoami() {
          const identity = requireScopes(this, 'svc-a.read');
          const remaining = input.remainingTimeoutMs();
          return {
            serviceId: identity.serviceId,
            scopes: identity.scopes,
            ...(input.idempotencyKey !== undefined ? { idempotencyKey: input.idempotencyKey } : {}),
            ...(input.requestId !== undefined ? { requestId: input.requestId } : {}),
            ...(remaining !== undefined ? { remainingTimeoutMs: remaining } : {}),
          };
        },
        write({ value }) {
          return { written: value };
        },
        async sleep({ ms }) {
          await sleepUnlessAborted(ms, input.signal);
          return { slept: ms };
        },
        fail({ kind }) {
          throw failure(kind);
        },
        failShaped({ status, retryable, reason }) {
          throw new AbilityHandlerError('Quota exceeded', {
            status,
            ...(retryable !== undefined ? { retryable } : {}),
            ...(reason !== undefined ? { reason } : {}),
          });
        },
        badOutput() {
          return { count: SECRET } as unknown as { count: number };
        },
        async *ticks({ n }) {
          for (let i = 0; i < n; i++) yield { i };
        },
        async *failMidStream({ after }) {
          for (let i = 0; i < after; i++) yield { i };
          throw new Error(SECRET);
        },
        'items.get'({ id }) {
          return { id, name: `item ${id}` };
        },
      };
    },
  });
  return { ability, record };
}
