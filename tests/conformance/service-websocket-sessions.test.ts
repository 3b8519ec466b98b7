// WebSocket sessions of a service: an upgrade is recognised the same way wherever the service
// looks (RFC 9110 §7.8: `Upgrade` is a case-insensitive list of protocols), and a long session
// keeps emitting its events to the logger without holding them on its upgrade request.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Context } from 'hono';
import type { SvcLogEvent } from '../../src/core/logging.ts';
import { svcLogEvents } from '../../src/service/log-events.ts';
import { websocketRpc } from '../../src/caller/transports/websocket.ts';
import { memoryWebSocketFactory } from '../../src/testing/mod.ts';
import { createFixture } from './fixture.ts';
import { echoAbility } from './fixture-abilities.ts';

interface EchoApi {
  whoami(input: object): Promise<{ idempotencyKey: string | null }>;
  ticks(input: { n: number }): Promise<AsyncIterable<unknown>>;
  fail(input: { kind: string }): Promise<unknown>;
}

for (const upgrade of ['websocket, foo', 'WebSocket', 'h2c, WEBSOCKET']) {
  test(`Upgrade: "${upgrade}" opens a WebSocket session that reads the query and streams`, async () => {
    const fx = await createFixture();
    const sockets = memoryWebSocketFactory((request, env) => {
      const headers = new Headers(request.headers);
      headers.set('Upgrade', upgrade);
      return fx.services['svc-a'].fetch(new Request(request.url, { headers }), env);
    });
    using session = fx.session<EchoApi>('svc-a.echo', {
      transport: websocketRpc('wss://svc-a.fixture.test/rpc/svc-a.echo', {
        createWebSocket: sockets.createWebSocket,
      }),
      idempotencyKey: 'key-1',
    });
    assert.equal((await session.whoami({})).idempotencyKey, 'key-1');
    const items: unknown[] = [];
    for await (const item of await session.ticks({ n: 3 })) items.push(item);
    assert.equal(items.length, 3);
    const upgrades = await Promise.all(sockets.connections.map((each) => each.response));
    assert.deepEqual(upgrades.map((response) => response.status), [200]);
  });
}

test('Events a long WebSocket session logs every handler failure and holds none on its upgrade', async () => {
  const fx = await createFixture();
  const failures = 300;
  let logged = 0;
  const upgrades: Context[] = [];
  fx.deploy('svc-a', [echoAbility(fx.stats)], {
    logger: {
      log(event: SvcLogEvent) {
        if (event.event === 'svc.ability.handler_failed') logged++;
      },
    },
    middleware: async (c, next) => {
      if (c.req.path.startsWith('/rpc/')) upgrades.push(c);
      await next();
    },
  });
  const ws = fx.webSocket('svc-a.echo');
  using session = fx.session<EchoApi>('svc-a.echo', { transport: ws.transport });
  const calls: Promise<unknown>[] = [];
  for (let i = 0; i < failures; i++) {
    calls.push(session.fail({ kind: 'error' }).then(() => 'resolved', () => 'rejected'));
  }
  assert.deepEqual(new Set(await Promise.all(calls)), new Set(['rejected']));
  assert.equal(logged, failures);
  assert.equal(upgrades.length, 1);
  const held = svcLogEvents(upgrades[0]).map((event) => event.event);
  assert.equal(held.includes('svc.ability.handler_failed'), false, held.join(', '));
});
