// Contract: States and transitions. A session is disposable, disposal is idempotent, and a
// disposed session is permanently closed: reuse fails the same way on every transport,
// stateless HTTP-batch included.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type AbilitySession, disposeAbilitySession } from '../../src/caller/ability-session.ts';
import { customRpcTransport } from '../../src/caller/transports/custom.ts';
import { cloudflareServiceBindingRpc } from '../../src/caller/transports/http-batch.ts';
import { WebSocketRpcTransport } from '../../src/service/websocket-rpc-transport.ts';
import { memoryWebSocketFactory } from '../../src/testing/mod.ts';
import { closedWithin, recordSent } from '../support/raw-rpc-socket.ts';
import { assertRefusal, createFixture, type Fixture } from './fixture.ts';

interface EchoApi {
  whoami(input: object): unknown;
  sleep(input: { ms: number }): unknown;
}

type EchoSession = AbilitySession<EchoApi>;

const DISPOSED = { code: 'internal', status: 500, retryable: false, reason: 'session_disposed' };

/** Checks the disposal rule on a fresh session; `traffic` counts what reached the service. */
async function checkDisposal(
  label: string,
  open: () => EchoSession,
  traffic: () => number,
): Promise<void> {
  const session = open();
  assert.ok(((await session.whoami({})) as { identity: object }).identity, label);
  const pending = session.sleep({ ms: 800 });
  const before = traffic();
  disposeAbilitySession(session);
  // A call in flight is settled by the disposal, not left hanging.
  await assertRefusal(pending, DISPOSED, `${label}: pending`);
  const first = await assertRefusal(session.whoami({}), DISPOSED, `${label}: reuse`);
  const second = await assertRefusal(session.whoami({}), DISPOSED, `${label}: reuse again`);
  assert.equal(second.message, first.message, label);
  // Idempotent, through every spelling.
  disposeAbilitySession(session);
  session[Symbol.dispose]();
  await session[Symbol.asyncDispose]();
  await assertRefusal(session.whoami({}), DISPOSED, `${label}: after repeated disposal`);
  assert.equal(traffic(), before, `${label}: nothing travels after disposal`);
}

async function planeToken(fx: Fixture): Promise<string> {
  return await fx.tokenFor('svc-a', ['svc-a.read']);
}

test('Session disposal: HTTP-batch (stateless) sessions close for good', async () => {
  const fx = await createFixture();
  const token = await planeToken(fx);
  const batch = fx.httpBatch('svc-a');
  await checkDisposal(
    'http-batch',
    () => fx.session<EchoApi>('svc-a.echo', { token, transport: batch.transport }),
    () => batch.exchanges.length,
  );
});

test('Session disposal: service-binding sessions close for good', async () => {
  const fx = await createFixture();
  const token = await planeToken(fx);
  let requests = 0;
  const binding = {
    fetch(request: Request) {
      requests++;
      return fx.services['svc-a'].fetch(request);
    },
  };
  await checkDisposal(
    'service binding',
    () =>
      fx.session<EchoApi>('svc-a.echo', {
        token,
        transport: cloudflareServiceBindingRpc(binding),
      }),
    () => requests,
  );
});

test('Session disposal: WebSocket sessions close their socket and never reopen', async () => {
  const fx = await createFixture();
  const token = await planeToken(fx);
  const socket = fx.webSocket('svc-a.echo');
  await checkDisposal(
    'websocket',
    () => fx.session<EchoApi>('svc-a.echo', { token, transport: socket.transport }),
    () => socket.connections.length + socket.sent.length,
  );
  assert.equal(socket.connections.length, 1);
  assert.equal(await closedWithin(socket.connections[0], 5_000), 1000);
  assert.equal(socket.connections[0].state, 'closed');
});

test('Session disposal: custom-transport sessions close for good', async () => {
  const fx = await createFixture();
  const token = await planeToken(fx);
  const sockets = memoryWebSocketFactory((request, env) =>
    fx.services['svc-a'].fetch(request, env)
  );
  const sent: unknown[] = [];
  const transport = customRpcTransport(() => {
    const socket = sockets.createWebSocket('wss://svc-a.fixture.test/rpc/svc-a.echo');
    recordSent(socket, sent);
    return new WebSocketRpcTransport(socket as never);
  });
  await checkDisposal(
    'custom',
    () => fx.session<EchoApi>('svc-a.echo', { token, transport }),
    () => sockets.connections.length + sent.length,
  );
});

test('Session disposal: the plane in-process session closes for good', async () => {
  const fx = await createFixture();
  await checkDisposal(
    'in-process',
    () =>
      fx.plane.abilitySession<EchoApi>({
        abilityId: 'svc-a.echo',
        targetServiceId: 'svc-a',
        scopes: ['svc-a.read'],
      }),
    () => fx.events.filter((event) => event.path === '/rpc/svc-a.echo').length,
  );
});

test('Session disposal: a session disposed before any call never opens anything', async () => {
  const fx = await createFixture();
  const socket = fx.webSocket('svc-a.echo');
  {
    using _session = fx.session<EchoApi>('svc-a.echo', { transport: socket.transport });
  }
  const session = fx.session<EchoApi>('svc-a.echo', { transport: socket.transport });
  disposeAbilitySession(session);
  await assertRefusal(session.whoami({}), DISPOSED);
  assert.equal(socket.connections.length, 0);
  assert.equal(fx.count('factories', 'svc-a.echo'), 0);
});
