/**
 * What one count of a session's entries costs on the serving side of a stream, the moment the
 * flow-control window is full: Cap'n Web's `getStats()` (which walks the imports table, where
 * every write in flight sits) against the export count the WebSocket entry limit reads. Run
 * alone: `tsx bench/entry-count.ts`, `bun bench/entry-count.ts`, `deno run -A bench/entry-count.ts`.
 */
import { RpcSession, type RpcStub, RpcTarget, type RpcTransport } from 'capnweb';
import { sessionExportCounter } from '../src/service/session-export-count.ts';

/** Two in-memory transports wired to each other. */
function transportPair(): [RpcTransport, RpcTransport] {
  const end = () => {
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
  const left = end();
  const right = end();
  return [
    { send: (message) => right.deliver(message), receive: () => left.receive() },
    { send: (message) => left.deliver(message), receive: () => right.receive() },
  ];
}

class Ticks extends RpcTarget {
  ticks(n: number): ReadableStream<{ i: number }> {
    let i = 0;
    return new ReadableStream({
      pull(controller) {
        if (i < n) controller.enqueue({ i: i++ });
        else controller.close();
      },
    });
  }
}

function microseconds(work: () => unknown): string {
  for (let i = 0; i < 50; i++) work();
  const started = performance.now();
  for (let i = 0; i < 500; i++) work();
  return ((performance.now() - started) / 500 * 1000).toFixed(1);
}

const [clientEnd, serverEnd] = transportPair();
const server = new RpcSession(serverEnd, new Ticks());
const client = new RpcSession<Ticks>(clientEnd).getRemoteMain() as unknown as RpcStub<Ticks>;
const reader = (await client.ticks(1_000_000)).getReader();
// A slow reader: the serving side fills its window meanwhile.
for (let read = 0; read < 200; read++) {
  await reader.read();
  await new Promise((resolve) => setTimeout(resolve, 1));
}
const stats = server.getStats();
const countExports = sessionExportCounter(server);
console.log(
  `writes in flight (imports) ${stats.imports}, exports ${stats.exports}: ` +
    `getStats() ${microseconds(() => server.getStats())} µs per count, ` +
    `export count ${microseconds(countExports)} µs per count (= ${countExports()})`,
);
await reader.cancel();
client[Symbol.dispose]();
