/**
 * The export count behind a WebSocket session's entry limit: the same number as Cap'n Web's
 * `getStats().exports` at every step (calls pushed and held, released, a stream in flight), read
 * without calling `getStats()`, which walks the imports table too.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RpcSession, type RpcStub, RpcTarget, type RpcTransport } from 'capnweb';
import {
  sessionExportCounter,
  sessionExportLimit,
} from '../../src/service/session-export-count.ts';

/** Two in-memory transports wired to each other: what one sends, the other receives. */
function transportPair(): [RpcTransport, RpcTransport] {
  const make = () => {
    const queue: string[] = [];
    let waiting: ((message: string) => void) | undefined;
    return {
      deliver(message: string) {
        const resolve = waiting;
        waiting = undefined;
        if (resolve) resolve(message);
        else queue.push(message);
      },
      receive(): Promise<string> {
        const next = queue.shift();
        if (next !== undefined) return Promise.resolve(next);
        return new Promise((resolve) => (waiting = resolve));
      },
    };
  };
  const left = make();
  const right = make();
  return [
    { send: (message) => right.deliver(message), receive: () => left.receive() },
    { send: (message) => left.deliver(message), receive: () => right.receive() },
  ];
}

class Widget extends RpcTarget {
  id(): number {
    return 7;
  }
}

class Counter extends RpcTarget {
  echo(value: number): number {
    return value;
  }

  /** New objects by reference: exports this side makes (negative ids), one call for all. */
  widgets(n: number): Widget[] {
    return Array.from({ length: n }, () => new Widget());
  }

  ticks(n: number): ReadableStream<number> {
    let i = 0;
    return new ReadableStream({
      pull(controller) {
        if (i < n) controller.enqueue(i++);
        else controller.close();
      },
    });
  }
}

function servedPair() {
  const [clientSide, serverSide] = transportPair();
  const server = new RpcSession(serverSide, new Counter());
  const client = new RpcSession<Counter>(clientSide);
  let statsCalls = 0;
  const watched = {
    getRemoteMain: () => server.getRemoteMain(),
    getStats: () => {
      statsCalls++;
      return server.getStats();
    },
  };
  const count = sessionExportCounter(watched);
  return {
    server,
    watched,
    main: client.getRemoteMain() as unknown as RpcStub<Counter>,
    count,
    statsCallsSince: () => {
      const before = statsCalls;
      return () => statsCalls - before;
    },
  };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

test('the export count equals getStats().exports as calls are held and released', async () => {
  const { server, main, count, statsCallsSince } = servedPair();
  const calls = statsCallsSince();
  assert.equal(count(), server.getStats().exports);
  // Calls never awaited are pushed and never pulled: each stays an export until released.
  const held = [main.echo(1), main.echo(2), main.echo(3)];
  await settle();
  const whileHeld = count();
  assert.equal(whileHeld, server.getStats().exports);
  assert.ok(whileHeld >= 4, `three held calls and the main export, got ${whileHeld}`);
  for (const call of held) call[Symbol.dispose]();
  await settle();
  assert.equal(count(), server.getStats().exports);
  assert.ok(count() < whileHeld, 'released calls leave the table');
  // Only the checks above called getStats(); the counter never did.
  assert.equal(calls(), 0);
  main[Symbol.dispose]();
});

test('the export count equals getStats().exports while a stream is in flight', async () => {
  const { server, main, count, statsCallsSince } = servedPair();
  const calls = statsCallsSince();
  const stream = await main.ticks(200);
  const reader = stream.getReader();
  await reader.read();
  const stats = server.getStats();
  // The serving side's writes in flight are imports; they are not counted as exports.
  assert.equal(count(), stats.exports);
  for (;;) if ((await reader.read()).done) break;
  await settle();
  assert.equal(count(), server.getStats().exports);
  assert.equal(calls(), 0);
  main[Symbol.dispose]();
});

test('the export limit check says "over" exactly when getStats().exports passes the limit', async () => {
  const { server, watched, main } = servedPair();
  const base = server.getStats().exports;
  const limit = base + 6;
  const exceeded = sessionExportLimit(watched, limit);
  const agrees = (step: string) =>
    assert.equal(
      exceeded(),
      server.getStats().exports > limit,
      `${step}: ${server.getStats().exports}`,
    );
  agrees('opened');
  // Held calls the peer pushed (appended entries) and objects this side exported by reference
  // (entries numbered downwards) both count, whichever grows the table.
  const held: { [Symbol.dispose](): void }[] = [];
  for (let i = 0; i < 4; i++) {
    held.push(main.echo(i));
    await settle();
    agrees(`held call ${i}`);
  }
  for (const call of held) call[Symbol.dispose]();
  await settle();
  agrees('calls released');
  // One call, eight objects: the table grows by one appended entry and eight of this side's.
  const widgets = main.widgets(8);
  const received = await widgets;
  assert.equal(received.length, 8);
  await settle();
  agrees('eight widgets held');
  assert.equal(exceeded(), true, 'past the limit now');
  for (const widget of received) widget[Symbol.dispose]();
  widgets[Symbol.dispose]();
  await settle();
  agrees('all released');
  assert.equal(exceeded(), false);
  // Many calls made and released since: the check still agrees, table holes and all.
  for (let i = 0; i < 50; i++) assert.equal(await main.echo(i), i);
  await settle();
  agrees('after fifty more calls');
  const more = [
    main.echo(1),
    main.echo(2),
    main.echo(3),
    main.echo(4),
    main.echo(5),
    main.echo(6),
    main.echo(7),
  ];
  await settle();
  agrees('seven held again');
  assert.equal(exceeded(), true);
  for (const call of more) call[Symbol.dispose]();
  main[Symbol.dispose]();
});
