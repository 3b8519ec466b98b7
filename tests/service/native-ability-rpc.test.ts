// Native binding RPC in-process: `cloudflareNativeRpc` against a service's `connectAbility`
// handed over as the binding (on Workers it is a service binding to an entrypoint calling it).
// The same checks as the HTTP routes: token, ingress, access class, scopes; metadata as fields,
// filtered at the service; refusals as data; streams with flow control and cancellation.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { abilitySession, disposeAbilitySession } from '../../src/caller/ability-session.ts';
import { cloudflareNativeRpc } from '../../src/caller/transports/cloudflare-native.ts';
import { AbilityHandlerError, svcErrorInfo } from '../../src/core/errors.ts';
import { defineAbility } from '../../src/service/ability.ts';
import { abilityMethod } from '../../src/service/method.ts';
import type { ConnectAbilityRequest } from '../../src/service/native-ability-rpc.ts';
import { createService } from '../../src/service/service.ts';
import { createTestTokenIssuer } from '../../src/testing/test-token-issuer.ts';

const PLANE = 'plane-1';

interface Seen {
  connInfo?: unknown;
  idempotencyKey?: unknown;
  remaining?: number;
  requestId?: unknown;
  env?: unknown;
  produced: number;
  cancelled: boolean;
}

function nativeAbility(id: string, seen: Seen, transports: string[] = ['cloudflare-binding-rpc']) {
  return defineAbility({
    id,
    scopes: [`${id.split('.')[0]}.read`],
    rpc: { transports: transports as ['cloudflare-binding-rpc'] },
    methods: {
      whoami: abilityMethod({ input: z.object({}), output: z.record(z.string(), z.unknown()) }),
      fail: abilityMethod({ input: z.object({}), output: z.object({}) }),
      items: abilityMethod({
        input: z.object({ n: z.number().int() }),
        output: z.object({ i: z.number().int() }),
        stream: true,
      }),
    },
    handler: ({ identity, connInfo, idempotencyKey, remainingTimeoutMs, context }) => ({
      whoami() {
        seen.connInfo = connInfo;
        seen.idempotencyKey = idempotencyKey;
        seen.remaining = remainingTimeoutMs();
        seen.requestId = context.get('requestId' as never);
        seen.env = context.env;
        return {
          serviceId: identity.serviceId,
          callerAccess: identity.callerAccess,
          ...(identity.brokerServiceId !== undefined ? { broker: identity.brokerServiceId } : {}),
        };
      },
      fail(): Record<string, never> {
        throw new AbilityHandlerError('Quota exceeded', { status: 429, reason: 'quota' });
      },
      items({ n }: { n: number }) {
        let i = 0;
        return new ReadableStream({
          pull(controller) {
            if (i >= n) return controller.close();
            seen.produced++;
            controller.enqueue({ i: i++, hidden: 'stripped' } as { i: number });
          },
          cancel() {
            seen.cancelled = true;
          },
        }, { highWaterMark: 0 });
      },
    }),
  });
}

async function deployment(options: { ingress?: boolean; transports?: string[] } = {}) {
  const tokens = await createTestTokenIssuer();
  const seen: Seen = { produced: 0, cancelled: false };
  const service = createService({
    id: 'svc-n',
    title: 'Native',
    version: '1',
    auth: tokens.auth,
    abilities: [nativeAbility('svc-n.echo', seen, options.transports)],
    ...(options.ingress ? { ingress: { brokerServiceId: PLANE } } : {}),
    logger: false,
  });
  const calls: ConnectAbilityRequest[] = [];
  // How many connections ended: the caller's message stream to the service closed or broke.
  const ended = { count: 0 };
  const binding = {
    connectAbility(request: ConnectAbilityRequest) {
      calls.push(request);
      const { readable: messages, writable } = new TransformStream<Uint8Array, Uint8Array>();
      const count = () => {
        ended.count++;
      };
      request.messages.pipeTo(writable).then(count, count);
      return service.connectAbility({ ...request, messages }, { BINDING: true });
    },
  };
  return { tokens, seen, service, binding, calls, ended };
}

function session(
  deploy: Awaited<ReturnType<typeof deployment>>,
  extra: {
    spb?: string;
    timeoutMs?: number;
    idempotencyKey?: string;
    requestId?: string;
    connInfo?: string;
  } = {},
) {
  const { spb, ...rest } = extra;
  return abilitySession<{
    whoami(input: Record<string, never>): Record<string, unknown>;
    fail(input: Record<string, never>): unknown;
    items(input: { n: number }): ReadableStream<{ i: number }>;
  }>({
    abilityId: 'svc-n.echo',
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-n',
    scopes: ['svc-n.read'],
    requestToken: deploy.tokens.tokenRequester(spb !== undefined ? { spb } : {}),
    transport: cloudflareNativeRpc(deploy.binding),
    ...rest,
  });
}

test('cloudflareNativeRpc: a unary call and a 1 000-item validated stream over connectAbility', async () => {
  const deploy = await deployment();
  const s = session(deploy);
  try {
    assert.deepEqual(await s.whoami({}), { serviceId: 'svc-caller', callerAccess: 'service' });
    const reader = (await s.items({ n: 1000 })).getReader();
    for (let i = 0; i < 1000; i++) {
      const { value, done } = await reader.read();
      assert.equal(done, false);
      // The output schema stripped the undeclared member at the service.
      assert.deepEqual(value, { i });
    }
    assert.equal((await reader.read()).done, true);
    // Per call, as HTTP-batch: each call connected once, presenting the token.
    assert.equal(deploy.calls.length, 2);
    assert.ok(deploy.calls.every((call) => typeof call.token === 'string'));
  } finally {
    disposeAbilitySession(s);
  }
});

test('cloudflareNativeRpc: a handler failure arrives typed; an unknown ability and a disabled transport are refused as data', async () => {
  const deploy = await deployment();
  const s = session(deploy);
  try {
    const error = await s.fail({}).then(() => assert.fail('no failure'), (e: unknown) => e);
    assert.deepEqual(svcErrorInfo(error), {
      code: 'handler',
      status: 429,
      retryable: true,
      reason: 'quota',
    });
  } finally {
    disposeAbilitySession(s);
  }
  const pipe = new TransformStream<Uint8Array, Uint8Array>();
  const unknown = await deploy.service.connectAbility({
    abilityId: 'svc-n.nope',
    token: 'x',
    messages: pipe.readable,
  });
  assert.equal(unknown.error?.status, 404);
  assert.equal(unknown.error?.reason, 'unknown_ability');

  const httpOnly = await deployment({ transports: ['http-batch', 'websocket'] });
  const refused = session(httpOnly);
  try {
    const error = await refused.whoami({}).then(() => assert.fail('served'), (e: unknown) => e);
    assert.equal(svcErrorInfo(error).status, 405);
    assert.equal(svcErrorInfo(error).reason, 'rpc_transport_not_enabled');
  } finally {
    disposeAbilitySession(refused);
  }
});

test('cloudflareNativeRpc: an ingress service accepts only brokered tokens; connInfo reaches the handler only then', async () => {
  const deploy = await deployment({ ingress: true });
  const connInfo = JSON.stringify({
    remote: { address: '203.0.113.7', addressType: 'IPv4', port: 443, transport: 'tcp' },
  });
  const plain = session(deploy, { connInfo });
  try {
    const error = await plain.whoami({}).then(() => assert.fail('accepted'), (e: unknown) => e);
    assert.equal(svcErrorInfo(error).code, 'capability_auth');
    assert.equal(svcErrorInfo(error).reason, 'ingress_required');
    assert.equal(deploy.seen.connInfo, undefined);
  } finally {
    disposeAbilitySession(plain);
  }
  const brokered = session(deploy, { spb: PLANE, connInfo });
  try {
    assert.deepEqual(await brokered.whoami({}), {
      serviceId: 'svc-caller',
      callerAccess: 'service',
      broker: PLANE,
    });
    assert.deepEqual(deploy.seen.connInfo, {
      remote: { address: '203.0.113.7', addressType: 'IPv4', port: 443, transport: 'tcp' },
    });
  } finally {
    disposeAbilitySession(brokered);
  }
});

test('cloudflareNativeRpc: request id, budget and idempotency key travel as connectAbility fields; hostile values are dropped at the service', async () => {
  const deploy = await deployment();
  const good = session(deploy, {
    requestId: 'req-native-1',
    timeoutMs: 5000,
    idempotencyKey: 'key-1',
  });
  try {
    await good.whoami({});
    assert.equal(deploy.calls.at(-1)!.requestId, 'req-native-1');
    assert.equal(deploy.seen.requestId, 'req-native-1');
    assert.deepEqual(deploy.seen.env, { BINDING: true });
    assert.equal(deploy.calls.at(-1)!.idempotencyKey, 'key-1');
    assert.equal(deploy.seen.idempotencyKey, 'key-1');
    assert.ok(deploy.seen.remaining! > 0 && deploy.seen.remaining! <= 5000);
  } finally {
    disposeAbilitySession(good);
  }
  // A hostile binding caller sends the fields raw: the service filters them as on headers.
  const pipe = new TransformStream<Uint8Array, Uint8Array>();
  const token = await deploy.tokens.token({ aud: 'svc-n', scopes: ['svc-n.read'] });
  const answer = await deploy.service.connectAbility({
    abilityId: 'svc-n.echo',
    token,
    requestId: 'bad\r\nSet-Cookie: x=1',
    idempotencyKey: 'has space',
    timeoutMs: -5 as number,
    connInfo: '{"remote":{"address":"1.2.3.4\\r\\nX: y"}}',
    messages: pipe.readable,
  });
  assert.ok(answer.messages instanceof ReadableStream);
  const hostile = abilitySession<{ whoami(input: object): unknown }>({
    abilityId: 'svc-n.echo',
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-n',
    scopes: ['svc-n.read'],
    requestToken: async () => token,
    transport: cloudflareNativeRpc({
      connectAbility: (request) =>
        deploy.service.connectAbility({
          ...request,
          requestId: 'bad\r\nSet-Cookie: x=1',
          idempotencyKey: 'has space',
          timeoutMs: -5,
        }),
    }),
  });
  try {
    await hostile.whoami({});
    assert.equal(deploy.seen.idempotencyKey, undefined);
    // No budget reached the handler: only the service's own 10 s ceiling bounds it.
    assert.ok(deploy.seen.remaining! > 5000, String(deploy.seen.remaining));
    assert.doesNotMatch(String(deploy.seen.requestId), /[\r\n]/);
  } finally {
    disposeAbilitySession(hostile);
    await pipe.writable.close().catch(() => {});
    await answer.messages?.cancel().catch(() => {});
  }
});

test('cloudflareNativeRpc: a slow reader slows the producer; cancelling cancels the service stream', async () => {
  const deploy = await deployment();
  const s = session(deploy);
  try {
    const reader = (await s.items({ n: 100_000 })).getReader();
    await reader.read();
    await new Promise((resolve) => setTimeout(resolve, 100));
    // Flow control: the producer stalls, far short of what was asked for, while nobody reads.
    const stalledAt = deploy.seen.produced;
    assert.ok(stalledAt < 50_000, `produced ${stalledAt}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(deploy.seen.produced, stalledAt);
    await reader.cancel();
    for (let i = 0; i < 100 && !deploy.seen.cancelled; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assert.equal(deploy.seen.cancelled, true);
  } finally {
    disposeAbilitySession(s);
  }
});

/** Waits (bounded) until `check` holds; the connection ends on the event loop's own time. */
async function eventually(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1000 && !check(); i++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.ok(check(), what);
}

test('Deadline semantics: over a native binding the budget is per call, as over HTTP-batch', async () => {
  const deploy = await deployment();
  // A budget no in-process call comes near, even with every core busy.
  const budget = 3000;
  const s = session(deploy, { timeoutMs: budget });
  try {
    await s.whoami({});
    assert.ok(deploy.seen.remaining! > 0 && deploy.seen.remaining! <= budget);
    // Longer than the whole budget: a session-wide budget would have run out by now.
    await new Promise((resolve) => setTimeout(resolve, budget + 200));
    assert.deepEqual(await s.whoami({}), { serviceId: 'svc-caller', callerAccess: 'service' });
    assert.ok(deploy.seen.remaining! > 0 && deploy.seen.remaining! <= budget);
    // Each call connected with the budget left when it was made.
    assert.equal(deploy.calls.length, 2);
    for (const call of deploy.calls) assert.ok(call.timeoutMs! > 0 && call.timeoutMs! <= budget);
  } finally {
    disposeAbilitySession(s);
  }
});

test("cloudflareNativeRpc: calls made together share one connection; a unary call's connection ends once answered", async () => {
  const deploy = await deployment();
  const s = session(deploy);
  try {
    const answers = await Promise.all([s.whoami({}), s.whoami({}), s.whoami({})]);
    assert.equal(answers.length, 3);
    assert.equal(deploy.calls.length, 1);
    await eventually(() => deploy.ended.count === 1, 'the connection ended');
  } finally {
    disposeAbilitySession(s);
  }
});

test('cloudflareNativeRpc: a stream keeps its connection open until it ends; a cancelled one cancels the service stream', async () => {
  const deploy = await deployment();
  const s = session(deploy);
  try {
    const reader = (await s.items({ n: 20 })).getReader();
    assert.deepEqual((await reader.read()).value, { i: 0 });
    // The call is answered; the stream is still being read: the connection stays.
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(deploy.ended.count, 0);
    for (let i = 1; i < 20; i++) assert.deepEqual((await reader.read()).value, { i });
    assert.equal((await reader.read()).done, true);
    await eventually(() => deploy.ended.count === 1, "the ended stream's connection ended");
    // A cancelled stream cancels the service's stream; its connection ends with the session.
    const cancelled = (await s.items({ n: 100_000 })).getReader();
    await cancelled.read();
    await cancelled.cancel();
    await eventually(() => deploy.seen.cancelled, 'the service stream was cancelled');
    disposeAbilitySession(s);
    await eventually(() => deploy.ended.count === 2, "the cancelled stream's connection ended");
  } finally {
    disposeAbilitySession(s);
  }
});

test('cloudflareNativeRpc: disposing of the session ends a stream still being read, typed', async () => {
  const deploy = await deployment();
  const s = session(deploy);
  const reader = (await s.items({ n: 100_000 })).getReader();
  await reader.read();
  disposeAbilitySession(s);
  await eventually(() => deploy.ended.count === 1, 'the connection ended');
  const failure = await (async () => {
    for (;;) await reader.read();
  })().catch((error: unknown) => error);
  assert.equal(svcErrorInfo(failure).reason, 'session_disposed');
});

test('cloudflareNativeRpc: refuses a binding without connectAbility', () => {
  assert.throws(
    () => cloudflareNativeRpc({} as never),
    (error: unknown) =>
      svcErrorInfo(error).code === 'internal' && /connectAbility/.test(String(error)),
  );
});
