// Contract: Streaming rules 1, 2 and 4. Items travel as a native stream over the ongoing RPC
// session with flow control; HTTP-batch cannot carry one; batching is the handler's choice.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { isAbilityValidationError } from '../../src/core/validation-issues.ts';
import { defineAbility } from '../../src/service/ability.ts';
import { abilityMethod } from '../../src/service/method.ts';
import { assertRefusal, createFixture, type Fixture } from './fixture.ts';

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// The message verbs of Cap'n Web's protocol: nothing else may appear on the socket.
const CAPNWEB_VERBS = new Set([
  'push',
  'pull',
  'resolve',
  'reject',
  'release',
  'abort',
  'stream',
  'pipe',
]);

interface Production {
  produced: number;
  finished: boolean;
  abortedAtEnd?: boolean;
}

const tick = z.object({ i: z.number().int(), pad: z.string().optional() });

/** svc-c.streams: `big` yields up to 1000 items of 16 KiB; `batches` yields arrays of ticks. */
function deployStreams(fx: Fixture) {
  const production: Production = { produced: 0, finished: false };
  fx.deploy('svc-c', [
    defineAbility({
      id: 'svc-c.streams',
      rpc: { transports: ['http-batch', 'websocket'] },
      methods: {
        big: abilityMethod({ input: z.object({}), output: tick, stream: true }),
        batches: abilityMethod({
          input: z.object({ poison: z.boolean() }),
          output: z.array(tick).max(100),
          stream: true,
        }),
        ping: abilityMethod({ input: z.object({}), output: z.object({ pong: z.literal(true) }) }),
      },
      handler: ({ signal }) => ({
        async *big() {
          try {
            for (let i = 0; i < 1000; i++) {
              production.produced++;
              yield { i, pad: 'x'.repeat(16 * 1024) };
            }
          } finally {
            production.finished = true;
            production.abortedAtEnd = signal.aborted;
          }
        },
        async *batches({ poison }: { poison: boolean }) {
          for (let batch = 0; batch < 5; batch++) {
            const items: { i: number }[] = [];
            for (let i = 0; i < 100; i++) items.push({ i: batch * 100 + i });
            // A hostile handler bug: one element breaks the declared item type.
            if (poison && batch === 2) items[50] = { i: 'not a number' as unknown as number };
            yield items;
          }
        },
        ping: () => ({ pong: true as const }),
      }),
    }),
  ]);
  return { production, token: fx.tokenFor('svc-c', []) };
}

interface StreamsApi {
  big(input: object): Promise<ReadableStream<{ i: number }>>;
  batches(input: { poison: boolean }): Promise<ReadableStream<{ i: number }[]>>;
  ping(input: object): Promise<{ pong: true }>;
}

/** A WebSocket session to svc-c.streams with `token` (the caller disposes of it). */
async function streamsSession(fx: Fixture, token: Promise<string>) {
  return fx.session<StreamsApi>('svc-c.streams', {
    token: await token,
    transport: fx.webSocket('svc-c.streams').transport,
  });
}

test('Streaming r1: a streaming method returns a native ReadableStream over the session', async () => {
  const fx = await createFixture();
  const socket = fx.webSocket('svc-a.echo');
  using session = fx.session('svc-a.echo', { transport: socket.transport });
  const stream = (await session.ticks({ n: 50 })) as ReadableStream<{ i: number }>;
  assert.ok(stream instanceof ReadableStream);
  const items: number[] = [];
  for await (const item of stream as unknown as AsyncIterable<{ i: number }>) items.push(item.i);
  assert.deepEqual(items, Array.from({ length: 50 }, (_, i) => i));
  // One session carried it all, and every frame was a Cap'n Web message.
  assert.equal(socket.connections.length, 1);
  assert.ok(socket.frames.length > 50);
  for (const frame of socket.frames) {
    const message = JSON.parse(frame) as unknown[];
    assert.ok(Array.isArray(message) && CAPNWEB_VERBS.has(message[0] as string), frame);
  }
});

test('Streaming r1: flow control reaches the handler: an unread stream stops being produced', async () => {
  const fx = await createFixture();
  const { production, token } = deployStreams(fx);
  using session = await streamsSession(fx, token);
  const reader = (await session.big({})).getReader();
  await reader.read();
  await delay(300);
  const held = production.produced;
  assert.ok(held < 200, `produced ${held} of 1000 while nothing was read`);
  for (let i = 0; i < 300; i++) {
    assert.equal((await reader.read()).value?.i, i + 1);
    // Let the clock move between acknowledgements: Cap'n Web's flow controller divides by the
    // time between acks and turns its window into NaN when the clock stands still (workerd
    // advances it only across I/O and timers).
    await delay(1);
  }
  await delay(100);
  assert.ok(production.produced > held + 250, `produced ${production.produced} after reading`);
  assert.ok(production.produced < 1000);
  await reader.cancel('enough');
});

test('Streaming r1: cancelling the stream aborts the handler signal and ends its iterator', async () => {
  const fx = await createFixture();
  const { production, token } = deployStreams(fx);
  using session = await streamsSession(fx, token);
  const reader = (await session.big({})).getReader();
  assert.equal((await reader.read()).value?.i, 0);
  await reader.cancel('consumer went away');
  for (let i = 0; i < 40 && !production.finished; i++) await delay(25);
  assert.equal(production.finished, true);
  assert.equal(production.abortedAtEnd, true);
  assert.ok(production.produced < 1000);
  // The session outlives the stream.
  assert.deepEqual(await session.ping({}), { pong: true });
});

test('Streaming r2: over HTTP-batch a streaming method fails 405; unary methods keep working', async () => {
  const fx = await createFixture();
  const { production, token } = deployStreams(fx);
  const batch = fx.httpBatch('svc-c');
  using session = fx.session<StreamsApi>('svc-c.streams', {
    token: await token,
    transport: batch.transport,
  });
  await assertRefusal(session.big({}), {
    code: 'internal',
    status: 405,
    retryable: false,
    reason: 'stream_requires_session_transport',
  });
  assert.equal(production.produced, 0);
  assert.deepEqual(await session.ping({}), { pong: true });
  assert.ok(batch.exchanges.every((exchange) => exchange.response.status === 200));
});

test('Streaming r4: the handler batches items and declares the batch (an array) as the item', async () => {
  const fx = await createFixture();
  const { token } = deployStreams(fx);
  const discovered = fx.services['svc-c'].discovery().abilities[0].methods.batches;
  assert.equal(discovered.stream, true);
  assert.equal(discovered.outputSchema.type, 'array');
  using session = await streamsSession(fx, token);
  const received: number[] = [];
  let batches = 0;
  for await (
    const items of (await session.batches({ poison: false })) as unknown as AsyncIterable<
      { i: number }[]
    >
  ) {
    batches++;
    received.push(...items.map((item) => item.i));
  }
  assert.equal(batches, 5);
  assert.deepEqual(received, Array.from({ length: 500 }, (_, i) => i));
  // Each batch is validated as one item: one bad element fails its whole batch.
  const reader = (await session.batches({ poison: true })).getReader();
  assert.equal((await reader.read()).value?.length, 100);
  assert.equal((await reader.read()).value?.length, 100);
  const failed = await assertRefusal(reader.read(), { code: 'ability_validation', status: 500 });
  // The caller reads the streamed failure's issues typed: where, never the library's wording.
  assert.ok(isAbilityValidationError(failed));
  assert.deepEqual(failed.issues, [{
    message: 'does not match the output schema',
    path: [50, 'i'],
  }]);
});
