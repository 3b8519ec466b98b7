/**
 * The export count behind a WebSocket session's entry limit: the same number as Cap'n Web's
 * `getStats().exports` at every step (calls pushed and held, released, a stream in flight), read
 * without calling `getStats()`, which walks the imports table too.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RpcSession, type RpcStub, RpcTarget, type RpcTransport } from 'capnweb';
import { sessionExportCounter } from '../../src/service/session-export-count.ts';

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

class Counter extends RpcTarget {
  echo(value: number): number {
    return value;
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
