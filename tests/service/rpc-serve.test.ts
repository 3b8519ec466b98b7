import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RpcTarget } from 'capnweb';
import { AbilityHandlerError, SvcConfigurationError, svcErrorInfo } from '../../src/core/errors.ts';
import { disposeAbilitySession } from '../../src/caller/ability-session.ts';
import {
  BATCH_SESSION_DISPOSES_NOTHING,
  DEFAULT_MAX_BATCH_BYTES,
  DEFAULT_MAX_SESSION_ENTRIES,
  serveRpc,
  WITHHELD_ERROR_MESSAGE,
} from '../../src/service/rpc-serve.ts';
import { httpBatchRpc } from '../../src/caller/transports/http-batch.ts';
import { MAX_QUEUED_WORK } from '../../src/core/next-task-queue.ts';
import { websocketRpc } from '../../src/caller/transports/websocket.ts';
import { SESSION_ENTRY_CHECK_INTERVAL } from '../../src/service/websocket-rpc-transport.ts';
import { withWebSocketUpgrader } from '../../src/service/websocket-upgrade.ts';
import { memoryWebSocketFactory } from '../../src/testing/mod.ts';
import {
  FAKE_TOKEN,
  fakeAbilitySession,
  fakeMainFactory,
  fakeRpcEndpoint,
  newFakeRecord,
} from '../support/fake-main.ts';
import { closedWithin, rawWebSocketSession } from '../support/raw-rpc-socket.ts';

const RPC_URL = 'https://fake.internal/rpc/fake.echo';

function post(body: BodyInit | null, headers: HeadersInit = {}): Request {
  return new Request(RPC_URL, { method: 'POST', body, headers });
}

async function problemOf(response: Response): Promise<Record<string, unknown>> {
  assert.equal(response.headers.get('content-type'), 'application/problem+json');
  return await response.json() as Record<string, unknown>;
}

/** A batch body that authenticates and calls `echo` with `argument` (already encoded). */
function echoBatch(encodedArgument: string): string {
  return [
    `["push",["pipeline",0,["authenticate"],[${JSON.stringify(FAKE_TOKEN)}]]]`,
    `["push",["pipeline",1,["echo"],[${encodedArgument}]]]`,
    '["pull",2]',
  ].join('\n');
}

/** A stream of `total` bytes of spaces in 64 KiB chunks that counts what was pulled. */
function countingBody(total: number): { stream: ReadableStream<Uint8Array>; pulled(): number } {
  const chunk = new Uint8Array(64 * 1024).fill(0x20);
  let pulled = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (pulled >= total) {
        controller.close();
        return;
      }
      pulled += chunk.byteLength;
      controller.enqueue(chunk);
    },
  });
  return { stream, pulled: () => pulled };
}

test('a raw HTTP batch authenticates and echoes in one response', async () => {
  const endpoint = fakeRpcEndpoint();
  const response = await endpoint.fetch(post(echoBatch('{"value":"raw"}')));
  assert.equal(response.status, 200);
  const lines = (await response.text()).split('\n').map((line) => JSON.parse(line));
  assert.deepEqual(lines.find((line) => line[0] === 'resolve'), ['resolve', 2, { value: 'raw' }]);
});

test('a served batch disposes its main and what its calls returned, once its response is out', async () => {
  const disposed: string[] = [];
  class Returned extends RpcTarget {
    ping(): string {
      return 'pong';
    }
    [Symbol.dispose](): void {
      disposed.push('returned');
    }
  }
  class Main extends RpcTarget {
    open(): Returned {
      return new Returned();
    }
    [Symbol.dispose](): void {
      disposed.push('main');
    }
  }
  const response = await serveRpc(
    post([
      '["push",["pipeline",0,["open"],[]]]',
      '["push",["pipeline",1,["ping"],[]]]',
      '["pull",2]',
    ].join('\n')),
    { transports: ['http-batch'], createMain: () => new Main() },
  );
  const lines = (await response.text()).split('\n').map((line) => JSON.parse(line));
  assert.deepEqual(lines.find((line) => line[0] === 'resolve'), ['resolve', 2, 'pong']);
  // The session ends on the task after the response: both are disposed by then, once each.
  for (let turn = 0; turn < 20 && disposed.length < 2; turn++) {
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  assert.deepEqual(disposed.sort(), ['main', 'returned']);
});

test('batches served one after another with no task in between still end their sessions', async () => {
  let disposed = 0;
  class Main extends RpcTarget {
    ping(): string {
      return 'pong';
    }
    [Symbol.dispose](): void {
      disposed++;
    }
  }
  const batches = 3 * MAX_QUEUED_WORK;
  // Nothing but promises between one batch and the next: no macrotask runs in this loop.
  for (let i = 0; i < batches; i++) {
    const response = await serveRpc(
      post('["push",["pipeline",0,["ping"],[]]]\n["pull",1]'),
      { transports: ['http-batch'], createMain: () => new Main() },
    );
    await response.text();
  }
  // The sessions waiting for the next task are bounded; all the others have ended.
  assert.ok(disposed >= batches - MAX_QUEUED_WORK, `${disposed} of ${batches} ended`);
});

test('a main that says its answered session has nothing to dispose is left to the collector', async () => {
  const disposed: string[] = [];
  const says = new Map<string, () => unknown>([
    ['nothing', () => true],
    ['something', () => false],
    ['a non-boolean', () => 'yes'],
    ['a throw', () => {
      throw new Error('cannot tell');
    }],
  ]);
  for (const [name, answer] of says) {
    class Main extends RpcTarget {
      ping(): string {
        return 'pong';
      }
      [BATCH_SESSION_DISPOSES_NOTHING](): unknown {
        return answer();
      }
      [Symbol.dispose](): void {
        disposed.push(name);
      }
    }
    const response = await serveRpc(
      post('["push",["pipeline",0,["ping"],[]]]\n["pull",1]'),
      { transports: ['http-batch'], createMain: () => new Main() },
    );
    assert.match(await response.text(), /"pong"/);
  }
  for (let turn = 0; turn < 200 && disposed.length < 3; turn++) {
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  // One more turn: a session wrongly ended with the others would be disposed by now too.
  await new Promise((resolve) => setTimeout(resolve, 10));
  // Only a main answering exactly `true` keeps its session from being ended.
  assert.deepEqual(disposed.sort(), ['a non-boolean', 'a throw', 'something']);
});

test('GET without an upgrade is 405 with an Allow header and a problem body', async () => {
  const endpoint = fakeRpcEndpoint();
  const response = await endpoint.fetch(new Request(RPC_URL));
  assert.equal(response.status, 405);
  assert.equal(response.headers.get('allow'), 'GET, POST');
  const problem = await problemOf(response);
  assert.equal(problem.status, 405);
  assert.equal(problem.code, 'internal');
  assert.equal(problem.reason, 'rpc_transport_not_enabled');
});

test('PUT is 405 even with both transports enabled', async () => {
  const endpoint = fakeRpcEndpoint();
  const response = await endpoint.fetch(new Request(RPC_URL, { method: 'PUT', body: 'x' }));
  assert.equal(response.status, 405);
  await response.body?.cancel();
});

test('POST is 405 when HTTP-batch is not enabled', async () => {
  const record = newFakeRecord();
  const endpoint = fakeRpcEndpoint(record, { transports: ['websocket'] });
  const response = await endpoint.fetch(post(echoBatch('{"value":"x"}')));
  assert.equal(response.status, 405);
  assert.equal(response.headers.get('allow'), 'GET');
  assert.match(String((await problemOf(response)).detail), /HTTP-batch/);
  assert.equal(record.sessions.length, 0);
});

test('an upgrade is 405 when WebSocket is not enabled', async () => {
  const endpoint = fakeRpcEndpoint(newFakeRecord(), { transports: ['http-batch'] });
  const response = await endpoint.fetch(
    new Request(RPC_URL, { headers: { Upgrade: 'websocket' } }),
  );
  assert.equal(response.status, 405);
  assert.equal(response.headers.get('allow'), 'POST');
  assert.match(String((await problemOf(response)).detail), /WebSocket/);
});

test('an upgrade is 426 with a clear problem when no upgrader is available', {
  skip: typeof (globalThis as { WebSocketPair?: unknown }).WebSocketPair === 'function'
    ? 'this runtime upgrades through WebSocketPair'
    : false,
}, async () => {
  const endpoint = fakeRpcEndpoint();
  const response = await endpoint.fetch(
    new Request(RPC_URL, { headers: { Upgrade: 'websocket' } }),
  );
  assert.equal(response.status, 426);
  // RFC 9110 section 15.5.22: a 426 names the protocol to upgrade to.
  assert.equal(response.headers.get('Upgrade'), 'websocket');
  const problem = await problemOf(response);
  assert.equal(problem.reason, 'websocket_upgrade_unavailable');
  assert.match(String(problem.detail), /complete handshake \(Connection: Upgrade\)/);
  assert.match(String(problem.detail), /serveNode/);
});

test('an explicit upgrader wins and receives the request and the runtime', async () => {
  const seen: unknown[] = [];
  const runtime = { marker: true };
  const response = await serveRpc(new Request(RPC_URL, { headers: { Upgrade: 'WebSocket' } }), {
    transports: ['websocket'],
    createMain: fakeMainFactory(newFakeRecord()),
    runtime,
    upgrader: {
      upgrade(request, givenRuntime) {
        seen.push(request.url, givenRuntime);
        return new Response(null, { status: 204 });
      },
    },
  });
  assert.equal(response.status, 204);
  assert.deepEqual(seen, [RPC_URL, runtime]);
});

test('a non-GET upgrade request is 405', async () => {
  const endpoint = fakeRpcEndpoint();
  const response = await endpoint.fetch(
    new Request(RPC_URL, { method: 'POST', body: '', headers: { Upgrade: 'websocket' } }),
  );
  assert.equal(response.status, 405);
  await response.body?.cancel();
});

test('DOS-05 a 40 MiB batch is refused with 413 without reading it all', async () => {
  const record = newFakeRecord();
  const endpoint = fakeRpcEndpoint(record);
  const body = countingBody(40 * 1024 * 1024);
  const response = await endpoint.fetch(
    new Request(RPC_URL, { method: 'POST', body: body.stream, duplex: 'half' } as RequestInit),
  );
  assert.equal(response.status, 413);
  const problem = await problemOf(response);
  assert.equal(problem.reason, 'rpc_batch_too_large');
  assert.ok(
    body.pulled() <= DEFAULT_MAX_BATCH_BYTES + 4 * 64 * 1024,
    `pulled ${body.pulled()} bytes`,
  );
  assert.equal(record.sessions.length, 0);
});

test('a batch body that fails mid-way (the client went away) is a 400, and no session starts', async () => {
  const record = newFakeRecord();
  const endpoint = fakeRpcEndpoint(record);
  let sent = false;
  const broken = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent) {
        controller.error(new TypeError('terminated: other side closed'));
        return;
      }
      sent = true;
      controller.enqueue(new TextEncoder().encode('["push",["pipeline",0,["authent'));
    },
  });
  const response = await endpoint.fetch(
    new Request(RPC_URL, { method: 'POST', body: broken, duplex: 'half' } as RequestInit),
  );
  assert.equal(response.status, 400);
  const problem = await problemOf(response);
  assert.equal(problem.reason, 'rpc_batch_unreadable');
  assert.equal(record.sessions.length, 0);
});

test('DOS-08 a batch body that stalls is a 408 after batchBodyTimeoutMs, its stream cancelled, and no session starts', async () => {
  const record = newFakeRecord();
  const endpoint = fakeRpcEndpoint(record, { batchBodyTimeoutMs: 100 });
  let cancelled = false;
  let sent = false;
  // Sends the start of a batch, then nothing more, as a client holding the connection would.
  const stalled = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent) return new Promise<void>(() => {});
      sent = true;
      controller.enqueue(new TextEncoder().encode('["push",["pipeline",0,["authent'));
    },
    cancel() {
      cancelled = true;
    },
  });
  const started = Date.now();
  const response = await endpoint.fetch(
    new Request(RPC_URL, { method: 'POST', body: stalled, duplex: 'half' } as RequestInit),
  );
  assert.equal(response.status, 408);
  // The rest of the body is never read: its connection cannot carry another request.
  assert.equal(response.headers.get('connection'), 'close');
  const problem = await problemOf(response);
  assert.equal(problem.reason, 'rpc_batch_timeout');
  assert.equal(problem.retryable, true, 'Errors r2: a 408 is retryable by default');
  assert.ok(Date.now() - started < 5_000, `answered after ${Date.now() - started} ms`);
  assert.equal(cancelled, true, 'the stalled body was released');
  assert.equal(record.sessions.length, 0);
});

test('a batch body timeout that is not a positive integer is refused before the body is read', async () => {
  for (const batchBodyTimeoutMs of [0, -1, 1.5, Number.NaN, '100']) {
    await assert.rejects(
      serveRpc(post('tiny'), {
        transports: ['http-batch'],
        createMain: fakeMainFactory(newFakeRecord()),
        batchBodyTimeoutMs: batchBodyTimeoutMs as number,
      }),
      (error: unknown) =>
        error instanceof SvcConfigurationError && /batchBodyTimeoutMs/.test(error.message),
      String(batchBodyTimeoutMs),
    );
  }
});

test('DOS-05 a declared Content-Length past the limit is refused unread', async () => {
  const response = await serveRpc(post('tiny', { 'Content-Length': String(40 * 1024 * 1024) }), {
    transports: ['http-batch'],
    createMain: fakeMainFactory(newFakeRecord()),
  });
  assert.equal(response.status, 413);
  await response.body?.cancel();
});

test('DOS-05 100 000 push lines are refused with 413', async () => {
  const line = '["push",["pipeline",0,["x"]]]';
  const body = Array.from({ length: 100_000 }, () => line).join('\n');
  assert.ok(body.length < DEFAULT_MAX_BATCH_BYTES, 'the lines fit the byte limit');
  const record = newFakeRecord();
  const response = await fakeRpcEndpoint(record).fetch(post(body));
  assert.equal(response.status, 413);
  assert.match(String((await problemOf(response)).detail), /messages/);
  assert.equal(record.sessions.length, 0);
});

test('maxBatchBytes tightens the body limit', async () => {
  const endpoint = fakeRpcEndpoint(newFakeRecord(), { maxBatchBytes: 64 });
  const response = await endpoint.fetch(post(echoBatch('{"value":"too long for 64 bytes"}')));
  assert.equal(response.status, 413);
  await response.body?.cancel();
});

test('an in-process batch past maxBatchBytes is refused 413 by its encoded length, unread by any handler', async () => {
  const record = newFakeRecord();
  // The batch's text is read as the string the caller built: its UTF-8 length is what counts.
  const endpoint = fakeRpcEndpoint(record, { maxBatchBytes: 600 });
  const session = fakeAbilitySession<{ echo(input: { value: string }): { value: string } }>(
    httpBatchRpc(endpoint.fetch),
  );
  assert.deepEqual(await session.echo({ value: 'fits' }), { value: 'fits' });
  // 190 characters of three bytes each: 570 bytes in the argument alone, past 600 with the rest
  // of the batch, which is well under 600 UTF-16 code units.
  const refused = await session.echo({ value: '€'.repeat(190) }).then(
    () => undefined,
    (error: unknown) => error,
  );
  assert.equal(svcErrorInfo(refused).status, 413);
  assert.equal(svcErrorInfo(refused).reason, 'rpc_batch_too_large');
  assert.deepEqual(record.calls, ['echo']);
  disposeAbilitySession(session);
});

test('DOS-04 an argument nested 300 levels deep aborts the session and the service stays healthy', async () => {
  const record = newFakeRecord();
  const endpoint = fakeRpcEndpoint(record);
  const nested = '{"a":'.repeat(300) + '1' + '}'.repeat(300);
  const response = await endpoint.fetch(post(echoBatch(nested)));
  assert.equal(response.status, 200);
  const lines = (await response.text()).split('\n').map((line) => JSON.parse(line));
  const abort = lines.find((line) => line[0] === 'abort');
  assert.ok(abort, `expected an abort message, got ${JSON.stringify(lines).slice(0, 200)}`);
  // Cap'n Web's own error carries no taxonomy code, so it leaves as the withheld internal error.
  assert.deepEqual(abort[1].slice(0, 3), ['error', 'SvcInternalError', WITHHELD_ERROR_MESSAGE]);
  assert.deepEqual(record.calls, []);

  const session = fakeAbilitySession<{ echo(input: { value: string }): { value: string } }>(
    httpBatchRpc(endpoint.fetch),
  );
  assert.deepEqual(await session.echo({ value: 'still healthy' }), { value: 'still healthy' });
});

test('DOS-04 a caller receives the depth refusal as an error', async () => {
  const endpoint = fakeRpcEndpoint(newFakeRecord(), { limits: { maxDepth: 8 } });
  const session = fakeAbilitySession<{ echo(input: unknown): unknown }>(
    httpBatchRpc(endpoint.fetch),
  );
  let deep: unknown = 1;
  for (let i = 0; i < 20; i++) deep = { a: deep };
  const refusal = await session.echo(deep).then(() => undefined, (error: unknown) => error);
  assert.equal((refusal as Error).message, WITHHELD_ERROR_MESSAGE);
  assert.deepEqual(svcErrorInfo(refusal), {
    code: 'internal',
    status: 500,
    retryable: false,
    reason: 'error_withheld',
  });
  assert.deepEqual(await session.echo({ shallow: true }), { shallow: true });
});

test('a malformed batch line aborts the session with a 200 batch carrying the abort', async () => {
  const response = await fakeRpcEndpoint().fetch(post('this is not json'));
  assert.equal(response.status, 200);
  const text = await response.text();
  assert.match(text, /^\["abort"/);
});

test('limits can be changed but not switched off', async () => {
  for (const limits of [{ maxDepth: 0 }, { maxMessageSize: Infinity }, { maxBigIntDigits: -1 }]) {
    await assert.rejects(
      serveRpc(post(echoBatch('1')), {
        transports: ['http-batch'],
        createMain: fakeMainFactory(newFakeRecord()),
        limits,
      }),
      (error: unknown) => svcErrorInfo(error).reason === 'invalid_rpc_limits',
    );
  }
});

test('an empty batch is answered with an empty 200 body', async () => {
  const response = await fakeRpcEndpoint().fetch(post(''));
  assert.equal(response.status, 200);
  assert.equal(await response.text(), '');
});

/**
 * Floods a fresh WebSocket session with `pushes` echo calls it never releases; returns the
 * close code, what the service sent and how many calls reached the ability.
 */
async function floodWithUnreleasedCalls(
  endpoint: ReturnType<typeof fakeRpcEndpoint>,
  record: ReturnType<typeof newFakeRecord>,
  pushes: number,
) {
  const { client, connection, received } = await rawWebSocketSession(endpoint);
  client.send(`["push",["pipeline",0,["authenticate"],[${JSON.stringify(FAKE_TOKEN)}]]]`);
  for (let i = 0; i < pushes && client.readyState === 1; i++) {
    client.send('["push",["pipeline",1,["echo"],[1]]]');
    // Let the service read now and then, so the flood stops once the session has ended.
    if (i % 1_000 === 999) await new Promise((resolve) => setTimeout(resolve, 0));
  }
  const code = await closedWithin(connection, 20_000);
  const echoes = () => record.calls.filter((call) => call === 'echo').length;
  const ranBeforeClose = echoes();
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(echoes(), ranBeforeClose, 'nothing reaches the ability after the abort');
  const abort = received.map((line) => JSON.parse(line)).find((line) => line[0] === 'abort');
  return { code, abort, echoes: ranBeforeClose };
}

test(
  'DOS-05 over WebSocket: pushing calls without releasing them ends the session at the entry limit',
  { timeout: 30_000 },
  async () => {
    const record = newFakeRecord();
    const endpoint = fakeRpcEndpoint(record, { maxSessionEntries: 100 });
    const { code, abort, echoes } = await floodWithUnreleasedCalls(endpoint, record, 2_000);
    assert.equal(code, 3000);
    assert.ok(abort, 'the peer is told why the session ended');
    assert.match(JSON.stringify(abort), /more than 100 calls and references/);
    // The limit is counted once per SESSION_ENTRY_CHECK_INTERVAL messages: the flood runs at
    // most that far past it.
    assert.ok(echoes >= 98, `${echoes} calls ran before the limit`);
    assert.ok(echoes <= 100 + SESSION_ENTRY_CHECK_INTERVAL, `${echoes} calls ran`);

    // The service stays healthy: a new session on the same endpoint still echoes.
    const again = await rawWebSocketSession(endpoint);
    again.client.send(`["push",["pipeline",0,["authenticate"],[${JSON.stringify(FAKE_TOKEN)}]]]`);
    again.client.send('["push",["pipeline",1,["echo"],["healthy"]]]');
    again.client.send('["pull",2]');
    const started = Date.now();
    while (!again.received.some((line) => line === '["resolve",2,"healthy"]')) {
      if (Date.now() - started > 5_000) throw new Error(`no echo: ${again.received.join(' | ')}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    again.client.close();
  },
);

test(
  'DOS-05 over WebSocket: by default a session holds at most DEFAULT_MAX_SESSION_ENTRIES',
  { timeout: 60_000 },
  async () => {
    const record = newFakeRecord();
    const pushes = DEFAULT_MAX_SESSION_ENTRIES + 4 * SESSION_ENTRY_CHECK_INTERVAL;
    const { code, echoes } = await floodWithUnreleasedCalls(
      fakeRpcEndpoint(record),
      record,
      pushes,
    );
    assert.equal(code, 3000);
    assert.ok(echoes >= DEFAULT_MAX_SESSION_ENTRIES - 2, `${echoes} calls ran`);
    assert.ok(echoes <= DEFAULT_MAX_SESSION_ENTRIES + SESSION_ENTRY_CHECK_INTERVAL);
  },
);

test(
  'a WebSocket session whose caller releases its results stays open far past the entry limit',
  { timeout: 30_000 },
  async () => {
    const record = newFakeRecord();
    const endpoint = fakeRpcEndpoint(record, { maxSessionEntries: 20 });
    const sockets = memoryWebSocketFactory(endpoint.fetch);
    const session = fakeAbilitySession<{ echo(input: unknown): unknown }>(
      websocketRpc('ws://fake.internal/rpc/fake.echo', {
        createWebSocket: sockets.createWebSocket,
      }),
    );
    try {
      for (let i = 0; i < 400; i++) assert.equal(await session.echo(i), i);
      // Bursts below the limit are fine too.
      const burst = await Promise.all(Array.from({ length: 10 }, (_, i) => session.echo(i)));
      assert.deepEqual(burst, Array.from({ length: 10 }, (_, i) => i));
      assert.equal(sockets.connections.length, 1);
      assert.equal(sockets.connections[0].state, 'open');
    } finally {
      disposeAbilitySession(session);
    }
  },
);

test('maxSessionEntries must be a positive integer', async () => {
  for (const maxSessionEntries of [0, -1, 1.5, Infinity]) {
    const endpoint = fakeRpcEndpoint(newFakeRecord(), { maxSessionEntries });
    await assert.rejects(
      endpoint.fetch(
        new Request(RPC_URL, { headers: { Upgrade: 'websocket' } }),
        withWebSocketUpgrader({}, {
          upgrade() {
            throw new Error('the upgrade must not start');
          },
        }),
      ),
      (error: unknown) => svcErrorInfo(error).reason === 'invalid_rpc_limits',
    );
  }
});

test(
  'a stream of small items far past the entry limit is not cut: stream writes in flight are the ' +
    "service's own doing",
  { timeout: 30_000 },
  async () => {
    const record = newFakeRecord();
    const endpoint = fakeRpcEndpoint(record, { maxSessionEntries: 100 });
    const sockets = memoryWebSocketFactory(endpoint.fetch);
    const session = fakeAbilitySession<{
      ticks(input: { n: number }): ReadableStream<{ i: number }>;
      echo(input: unknown): unknown;
    }>(
      websocketRpc('ws://fake.internal/rpc/fake.echo', {
        createWebSocket: sockets.createWebSocket,
      }),
    );
    try {
      const reader = (await session.ticks({ n: 3_000 })).getReader();
      assert.deepEqual((await reader.read()).value, { i: 0 });
      // While the reader pauses, the service's flow-control window (256 KiB) lets it write all
      // 3 000 items: each is an unanswered write of the service's session until read.
      await new Promise((resolve) => setTimeout(resolve, 200));
      let next = 1;
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        assert.deepEqual(value, { i: next++ });
      }
      assert.equal(next, 3_000);
      // The session outlives the stream.
      assert.equal(await session.echo('after the stream'), 'after the stream');
      assert.equal(sockets.connections[0].state, 'open');
    } finally {
      disposeAbilitySession(session);
    }
  },
);

test('every refusal of the RPC route carries the given requestId in its problem body', async () => {
  const record = newFakeRecord();
  const batchOnly = fakeRpcEndpoint(record, { transports: ['http-batch'], requestId: 'rid-1' });
  const socketOnly = fakeRpcEndpoint(record, { transports: ['websocket'], requestId: 'rid-2' });
  const tight = fakeRpcEndpoint(record, { maxBatchBytes: 8, requestId: 'rid-3' });
  const refusals: [Response, number, string][] = [
    [await batchOnly.fetch(new Request(RPC_URL)), 405, 'rid-1'],
    [
      await batchOnly.fetch(new Request(RPC_URL, { headers: { Upgrade: 'websocket' } })),
      405,
      'rid-1',
    ],
    [await socketOnly.fetch(post(echoBatch('{"value":"x"}'))), 405, 'rid-2'],
    [await tight.fetch(post(echoBatch('{"value":"x"}'))), 413, 'rid-3'],
  ];
  for (const [response, status, requestId] of refusals) {
    assert.equal(response.status, status);
    assert.equal((await problemOf(response)).requestId, requestId);
  }
  assert.equal(record.sessions.length, 0);
});

const MARKER = 'SECRET-rpc-serve-7f3a';

/** A driver value type Cap'n Web cannot serialise, whose string form holds the marker. */
class Decimal {
  toString(): string {
    return `${MARKER} 1234.56`;
  }
}

/** An ability whose results and failures exercise every kind of error a session can send. */
class LeakyAbility extends RpcTarget {
  unserialisable(): unknown {
    return { amount: new Decimal() };
  }
  errorInOutput(): unknown {
    return { detail: new Error(`${MARKER} in a value`) };
  }
  shaped(): never {
    throw new AbilityHandlerError('Quota exceeded', { status: 429, reason: 'quota' });
  }
  relayed(): never {
    // A taxonomy error rebuilt as a plain Error by an intermediate hop (Errors r6).
    throw Object.assign(new Error('Downstream busy'), {
      code: 'handler',
      status: 503,
      retryable: true,
      reason: 'busy',
    });
  }
}

class LeakyMain extends RpcTarget {
  authenticate(): LeakyAbility {
    return new LeakyAbility();
  }
}

const CALLS = ['unserialisable', 'errorInOutput', 'shaped', 'relayed'];

/** One batch line per call, after `authenticate`, each pulled. */
function leakyBatchLines(): string[] {
  const lines = ['["push",["pipeline",0,["authenticate"],[]]]'];
  CALLS.forEach((name, index) => {
    lines.push(`["push",["pipeline",1,[${JSON.stringify(name)}],[]]]`);
    lines.push(`["pull",${index + 2}]`);
  });
  return lines;
}

/** The error of each reply, by call name: [name, message, props]. */
function errorsByCall(replies: unknown[][]): Record<string, [string, string, unknown]> {
  const errors: Record<string, [string, string, unknown]> = {};
  CALLS.forEach((name, index) => {
    const reply = replies.find((line) => line[1] === index + 2);
    assert.ok(reply !== undefined, `a reply to ${name}`);
    if (reply[0] === 'reject') {
      const [, errorName, message, , props] = reply[2] as unknown[];
      errors[name] = [errorName as string, message as string, props];
    } else {
      // A resolved value: the replaced error sits inside it.
      const [, errorName, message, , props] = (reply[2] as { detail: unknown[] }).detail;
      errors[name] = [errorName as string, message as string, props];
    }
  });
  return errors;
}

function assertWithheldAndPassed(errors: Record<string, [string, string, unknown]>): void {
  const withheld = {
    code: 'internal',
    status: 500,
    retryable: false,
    reason: 'error_withheld',
  };
  assert.deepEqual(errors.unserialisable, ['SvcInternalError', WITHHELD_ERROR_MESSAGE, withheld]);
  assert.deepEqual(errors.errorInOutput, ['SvcInternalError', WITHHELD_ERROR_MESSAGE, withheld]);
  assert.deepEqual(errors.shaped, [
    'AbilityHandlerError',
    'Quota exceeded',
    { code: 'handler', status: 429, retryable: true, reason: 'quota' },
  ]);
  assert.deepEqual(errors.relayed, [
    'Error',
    'Downstream busy',
    { code: 'handler', status: 503, retryable: true, reason: 'busy' },
  ]);
}

test('Errors r5 backstop over HTTP-batch: an error without a taxonomy code is withheld and reported; taxonomy errors pass untouched', async () => {
  const replaced: Error[] = [];
  const endpoint = fakeRpcEndpoint(newFakeRecord(), {
    createMain: () => new LeakyMain(),
    onErrorReplaced: (error) => void replaced.push(error),
  });
  const response = await endpoint.fetch(post(leakyBatchLines().join('\n')));
  assert.equal(response.status, 200);
  const body = await response.text();
  assert.equal(body.includes(MARKER), false, `the marker leaked: ${body}`);
  assert.equal(body.includes('node_modules'), false);
  assertWithheldAndPassed(errorsByCall(body.split('\n').map((line) => JSON.parse(line))));
  // Both are withheld; the first is reported with the original, which stays in the process
  // (one report per session, so a result full of errors cannot flood the log).
  assert.equal(replaced.length, 1);
  assert.ok(replaced.every((error) => error.message.includes(MARKER)));
});

test('Errors r5 backstop over WebSocket: an error without a taxonomy code is withheld and reported; taxonomy errors pass untouched', async () => {
  const replaced: Error[] = [];
  const endpoint = fakeRpcEndpoint(newFakeRecord(), {
    createMain: () => new LeakyMain(),
    onErrorReplaced: (error) => void replaced.push(error),
  });
  const { client, received } = await rawWebSocketSession(endpoint);
  for (const line of leakyBatchLines()) client.send(line);
  const started = Date.now();
  while (received.length < CALLS.length) {
    if (Date.now() - started > 5_000) throw new Error(`replies missing: ${received.join(' | ')}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  client.close();
  const frames = received.join('\n');
  assert.equal(frames.includes(MARKER), false, `the marker leaked: ${frames}`);
  assertWithheldAndPassed(errorsByCall(received.map((line) => JSON.parse(line))));
  assert.equal(replaced.length, 1);
});

test('a result carrying a thousand error values (a handler echoing its input) is reported once, every one withheld', async () => {
  const replaced: Error[] = [];
  const endpoint = fakeRpcEndpoint(newFakeRecord(), {
    onErrorReplaced: (error) => void replaced.push(error),
  });
  const errors = Array.from(
    { length: 1000 },
    (_, i) => `["error","Error","CLIENT-TEXT-${i}"]`,
  ).join(',');
  const response = await endpoint.fetch(
    post([
      `["push",["pipeline",0,["authenticate"],[${JSON.stringify(FAKE_TOKEN)}]]]`,
      // Cap'n Web writes a literal array wrapped in one more array.
      `["push",["pipeline",1,["echo"],[{"value":[[${errors}]]}]]]`,
      '["pull",2]',
    ].join('\n')),
  );
  const body = await response.text();
  assert.equal(body.includes('CLIENT-TEXT-'), false, 'every error value is withheld');
  assert.equal((body.match(/error_withheld/g) ?? []).length, 1000);
  await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(replaced.length, 1);
});

/** Sends the late reply; set once the service has started the `late` call. */
let replyLate: (() => void) | undefined;

class LateAbility extends RpcTarget {
  late(): Promise<unknown> {
    return new Promise((resolve) => {
      replyLate = () => resolve({ detail: new Error('reply for nobody') });
    });
  }
}

class LateMain extends RpcTarget {
  authenticate(): LateAbility {
    return new LateAbility();
  }
}

test('a reply that fails once its WebSocket is gone reaches nobody and is not reported as a handler failure', async () => {
  const replaced: Error[] = [];
  const endpoint = fakeRpcEndpoint(newFakeRecord(), {
    createMain: () => new LateMain(),
    onErrorReplaced: (error) => void replaced.push(error),
  });
  const { client, connection } = await rawWebSocketSession(endpoint);
  client.send('["push",["pipeline",0,["authenticate"],[]]]');
  client.send('["push",["pipeline",1,["late"],[]]]');
  client.send('["pull",2]');
  // The reply is sent once the socket is gone, in that order however slowly each step runs.
  replyLate = undefined;
  const started = () => replyLate !== undefined;
  for (let i = 0; i < 500 && !started(); i++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.ok(started(), 'the service started the call');
  // A caller's socket closes with 1000 or 3000-4999 (1001 is the browser's own, when it leaves).
  client.close(1000, 'going away');
  assert.equal(await closedWithin(connection, 5_000), 1000);
  (replyLate as unknown as () => void)();
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.deepEqual(replaced, []);
});
