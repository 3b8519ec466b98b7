// The service-binding socket behaves as a standard client WebSocket that connects through
// `binding.fetch`: connecting until the binding answers, open once a 101's socket is accepted,
// a refused or failed upgrade reported as a failed handshake (error, then close 1006), and a
// close while connecting cancelling the upgrade. The binding here is a fake whose 101 carries
// one end of an in-memory connection; the real binding is exercised in
// tests/runtime/workerd/service-bindings.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SvcConfigurationError, svcErrorInfo } from '../../src/core/errors.ts';
import { serviceBindingWebSocketFactory } from '../../src/adapters/workers.ts';
import { abilitySession, disposeAbilitySession } from '../../src/caller/ability-session.ts';
import type { ServiceBindingFetcher } from '../../src/caller/transports/http-batch.ts';
import { websocketRpc } from '../../src/caller/transports/websocket.ts';
import { type MemoryWebSocket, memoryWebSocketPair } from '../../src/testing/memory-websocket.ts';

const BOUND = { timeout: 10_000 };
const RPC_URL = 'wss://orders.internal/rpc/orders.catalog?request_id=r-1';

/** The end a Workers `101` carries: open once accepted, as `response.webSocket` is. */
type AcceptableEnd = MemoryWebSocket & { accept(): void; accepted: number };

/** A connection whose caller end can be accepted, and the service's end, already open. */
function acceptablePair(): { accepted: AcceptableEnd; service: MemoryWebSocket } {
  const [service, end] = memoryWebSocketPair('wss://orders.internal/rpc');
  service.open(false);
  const accepted = Object.assign(end, {
    accepted: 0,
    accept() {
      accepted.accepted++;
      end.open(false);
    },
  });
  return { accepted, service };
}

/** A `Response`-like `101` (no runtime outside Workers constructs one) carrying `webSocket`. */
function switchingProtocols(webSocket: unknown): Response {
  return { status: 101, webSocket, body: null } as unknown as Response;
}

/** A fake binding answering every upgrade with `answer`, recording the requests it received. */
function fakeBinding(answer: (request: Request) => Response | Promise<Response>) {
  const requests: Request[] = [];
  const binding: ServiceBindingFetcher = {
    fetch(request: Request) {
      requests.push(request);
      return Promise.resolve().then(() => answer(request));
    },
  };
  return { binding, requests };
}

/** Records `open`, `message:<data>`, `error` and `close:<code>:<reason>:<clean>` in order. */
function recordEvents(socket: WebSocket): string[] {
  const seen: string[] = [];
  socket.addEventListener('open', () => seen.push('open'));
  socket.addEventListener('message', (event) => seen.push(`message:${dataLabel(event.data)}`));
  socket.addEventListener('error', () => seen.push('error'));
  socket.addEventListener('close', (event) => {
    const close = event as CloseEvent;
    seen.push(`close:${close.code}:${close.reason}:${close.wasClean}`);
  });
  return seen;
}

function dataLabel(data: unknown): string {
  if (typeof data === 'string') return data;
  if (data instanceof ArrayBuffer) return `arraybuffer(${data.byteLength})`;
  if (data instanceof Blob) return `blob(${data.size})`;
  return typeof data;
}

function nextEvent(target: EventTarget, type: string): Promise<Event> {
  return new Promise((resolve) => target.addEventListener(type, resolve, { once: true }));
}

/** Resolves once `seen` holds `count` entries; fails the test after `ms`. */
async function untilSeen(seen: readonly string[], count: number, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (seen.length < count) {
    if (Date.now() > deadline) assert.fail(`saw only ${JSON.stringify(seen)}`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

test('a binding without a fetch method is refused when the factory is built', BOUND, () => {
  for (const binding of [undefined, null, 42, 'orders', {}, { fetch: 'no' }]) {
    assert.throws(
      () => serviceBindingWebSocketFactory(binding as unknown as ServiceBindingFetcher),
      (error: unknown) =>
        error instanceof SvcConfigurationError && /fetch method/.test(error.message),
      String(binding),
    );
  }
  const functionBinding = Object.assign(() => {}, { fetch: () => Promise.reject(new Error()) });
  assert.equal(typeof serviceBindingWebSocketFactory(functionBinding), 'function');
});

test('a URL a socket cannot open throws SyntaxError and sends nothing', BOUND, () => {
  const { binding, requests } = fakeBinding(() => switchingProtocols(undefined));
  const createWebSocket = serviceBindingWebSocketFactory(binding);
  for (const url of ['not a url', 'ftp://orders.internal/rpc', 'file:///etc/hosts']) {
    assert.throws(() => createWebSocket(url), { name: 'SyntaxError' }, url);
  }
  assert.equal(requests.length, 0);
});

test(
  'the upgrade goes to binding.fetch as GET with Upgrade: websocket, ws(s) as http(s)',
  BOUND,
  async () => {
    const { binding, requests } = fakeBinding(() => new Response(null, { status: 404 }));
    const createWebSocket = serviceBindingWebSocketFactory(binding);
    const secure = createWebSocket(RPC_URL);
    const plain = createWebSocket('ws://orders.internal/rpc/x');
    const http = createWebSocket('https://orders.internal/rpc/y');
    assert.equal(secure.url, RPC_URL);
    await Promise.all([
      nextEvent(secure, 'close'),
      nextEvent(plain, 'close'),
      nextEvent(http, 'close'),
    ]);
    assert.deepEqual(requests.map((request) => request.url), [
      'https://orders.internal/rpc/orders.catalog?request_id=r-1',
      'http://orders.internal/rpc/x',
      'https://orders.internal/rpc/y',
    ]);
    for (const request of requests) {
      assert.equal(request.method, 'GET');
      assert.equal(request.headers.get('upgrade'), 'websocket');
    }
  },
);

test(
  'connecting: the standard constants, send throws InvalidStateError, open comes first',
  BOUND,
  async () => {
    const { accepted, service } = acceptablePair();
    // The service speaks first, as soon as it accepted: its message must follow `open`.
    service.send('welcome');
    const { binding } = fakeBinding(() => switchingProtocols(accepted));
    const socket = serviceBindingWebSocketFactory(binding)(RPC_URL);
    const seen = recordEvents(socket);
    const constructor = socket.constructor as unknown as Record<string, number>;
    assert.deepEqual(
      [socket.CONNECTING, socket.OPEN, socket.CLOSING, socket.CLOSED],
      [0, 1, 2, 3],
    );
    assert.deepEqual(
      [constructor.CONNECTING, constructor.OPEN, constructor.CLOSING, constructor.CLOSED],
      [0, 1, 2, 3],
    );
    assert.equal(socket.readyState, 0);
    assert.equal(socket.binaryType, 'blob');
    assert.equal(socket.bufferedAmount, 0);
    assert.equal(socket.protocol, '');
    assert.equal(socket.extensions, '');
    assert.throws(() => socket.send('too early'), { name: 'InvalidStateError' });
    await nextEvent(socket, 'open');
    assert.equal(socket.readyState, 1);
    assert.equal(accepted.accepted, 1);
    await untilSeen(seen, 2);
    assert.deepEqual(seen, ['open', 'message:welcome']);
    socket.close();
  },
);

test(
  'open: messages both ways in order, binaryType honoured, close(code, reason) at both ends',
  BOUND,
  async () => {
    const { accepted, service } = acceptablePair();
    const atService: unknown[] = [];
    service.addEventListener('message', (event) => atService.push((event as MessageEvent).data));
    const serviceClosed = nextEvent(service, 'close');
    const { binding } = fakeBinding(() => switchingProtocols(accepted));
    const socket = serviceBindingWebSocketFactory(binding)(RPC_URL);
    const seen = recordEvents(socket);
    const handled: string[] = [];
    socket.onmessage = (event) => handled.push(dataLabel(event.data));
    await nextEvent(socket, 'open');

    socket.send('one');
    socket.send(new Uint8Array([1, 2, 3]));
    service.send('a');
    service.send(new Uint8Array([9, 9]));
    await untilSeen(seen, 3);
    socket.binaryType = 'arraybuffer';
    service.send(new Uint8Array([7]));
    await untilSeen(seen, 4);
    assert.deepEqual(seen, ['open', 'message:a', 'message:blob(2)', 'message:arraybuffer(1)']);
    assert.deepEqual(handled, ['a', 'blob(2)', 'arraybuffer(1)']);
    assert.equal(atService[0], 'one');
    assert.equal(atService.length, 2);

    socket.close(4000, 'done');
    assert.equal(socket.readyState, 2);
    // Sending once closing discards the data without throwing, as the standard says.
    socket.send('discarded');
    const close = await nextEvent(socket, 'close') as CloseEvent;
    assert.equal(socket.readyState, 3);
    assert.deepEqual([close.code, close.reason, close.wasClean], [4000, 'done', true]);
    const atServiceClose = await serviceClosed as CloseEvent;
    assert.deepEqual([atServiceClose.code, atServiceClose.reason], [4000, 'done']);
    assert.equal(atService.length, 2);
    assert.deepEqual(seen.at(-1), 'close:4000:done:true');
  },
);

test(
  'the service closing ends the socket with its code and reason; on* handlers see it',
  BOUND,
  async () => {
    const { accepted, service } = acceptablePair();
    const { binding } = fakeBinding(() => switchingProtocols(accepted));
    const socket = serviceBindingWebSocketFactory(binding)(RPC_URL);
    const order: string[] = [];
    socket.onopen = () => order.push('open');
    socket.onclose = (event) => order.push(`close:${event.code}:${event.reason}`);
    // A handler replaced before the event fires is the only one called.
    socket.onerror = () => order.push('stale error handler');
    socket.onerror = null;
    assert.equal(socket.onerror, null);
    await nextEvent(socket, 'open');
    service.close(1000, 'bye');
    await nextEvent(socket, 'close');
    assert.deepEqual(order, ['open', 'close:1000:bye']);
    assert.equal(socket.readyState, 3);
    socket.send('after the end');
    socket.close(1000);
  },
);

test(
  'a refused upgrade fails as a refused handshake: error, then close 1006, body released',
  BOUND,
  async () => {
    let cancelled = false;
    const refusal = () =>
      new Response(
        new ReadableStream({
          cancel() {
            cancelled = true;
          },
        }),
        { status: 401 },
      );
    const answers: Array<() => Response | Promise<Response>> = [
      refusal,
      () => switchingProtocols(undefined),
      () => switchingProtocols({ send() {} }),
      () => ({ status: 200, webSocket: acceptablePair().accepted }) as unknown as Response,
      () => Promise.reject(new TypeError('binding unreachable')),
      () => {
        throw new TypeError('thrown at once');
      },
    ];
    for (const [index, answer] of answers.entries()) {
      const { binding } = fakeBinding(answer);
      const socket = serviceBindingWebSocketFactory(binding)(RPC_URL);
      const seen = recordEvents(socket);
      let handlerError = 0;
      socket.onerror = () => handlerError++;
      await nextEvent(socket, 'close');
      assert.deepEqual(seen, ['error', 'close:1006::false'], `answer ${index}`);
      assert.equal(handlerError, 1);
      assert.equal(socket.readyState, 3);
    }
    assert.equal(cancelled, true);
  },
);

test(
  'a refused upgrade fails the session with its status and URL, a 404 not retryable',
  BOUND,
  async () => {
    const { binding, requests } = fakeBinding(() => new Response('no route', { status: 404 }));
    const session = abilitySession<{ lookup(input: { sku: string }): Promise<unknown> }>({
      abilityId: 'orders.catalog',
      callerServiceId: 'billing',
      targetServiceId: 'orders',
      scopes: ['orders.read'],
      requestToken: () => Promise.resolve('token'),
      transport: websocketRpc('https://orders.internal/rpc/orders.catalog', {
        createWebSocket: serviceBindingWebSocketFactory(binding),
      }),
    });
    try {
      const failure = await session.lookup({ sku: 'tea-01' }).then(
        () => assert.fail('the call went through'),
        (error: unknown) => error,
      );
      const info = svcErrorInfo(failure);
      assert.deepEqual(
        [info.code, info.status, info.retryable, info.reason],
        ['internal', 404, false, 'rpc_upgrade_refused'],
      );
      assert.match(
        String(failure),
        /wss:\/\/orders\.internal\/rpc\/orders\.catalog refused: HTTP 404/,
      );
      assert.equal(requests.length, 1);
      assert.match(requests[0].url, /^https:\/\/orders\.internal\/rpc\/orders\.catalog(\?|$)/);
    } finally {
      disposeAbilitySession(session);
    }
  },
);

test(
  'close while connecting cancels the upgrade; a socket arriving later is closed',
  BOUND,
  async () => {
    const { accepted, service } = acceptablePair();
    let answer: (response: Response) => void = () => {};
    const { binding, requests } = fakeBinding(() => new Promise((resolve) => answer = resolve));
    const socket = serviceBindingWebSocketFactory(binding)(RPC_URL);
    const seen = recordEvents(socket);
    assert.equal(requests.length, 1, 'the upgrade is sent at once');
    socket.close(1000, 'never mind');
    assert.equal(socket.readyState, 2);
    assert.equal(requests[0].signal.aborted, true);
    // Closing, not connecting: data is discarded without error, as the standard says.
    socket.send('late');
    await nextEvent(socket, 'close');
    assert.deepEqual(seen, ['error', 'close:1006::false']);

    const serviceClosed = nextEvent(service, 'close');
    answer(switchingProtocols(accepted));
    const close = await serviceClosed as CloseEvent;
    assert.equal(accepted.accepted, 1);
    assert.deepEqual([close.code, close.reason], [1000, 'closed while connecting']);
    assert.deepEqual(seen, ['error', 'close:1006::false'], 'no event after the failure');
    assert.equal(socket.readyState, 3);
  },
);

test('close refuses what a client socket cannot send, in every state', BOUND, async () => {
  const { binding } = fakeBinding(() => new Response(null, { status: 404 }));
  const socket = serviceBindingWebSocketFactory(binding)(RPC_URL);
  for (const code of [999, 1001, 1005, 1006, 2999, 5000, 1000.5]) {
    assert.throws(() => socket.close(code), { name: 'InvalidAccessError' }, String(code));
  }
  assert.throws(() => socket.close(1000, 'x'.repeat(124)), { name: 'SyntaxError' });
  assert.equal(socket.readyState, 0, 'a refused close changes nothing');
  await nextEvent(socket, 'close');
  assert.throws(() => socket.close(1001), { name: 'InvalidAccessError' });
});

test('an accepted socket that does not answer close frames itself is answered', BOUND, async () => {
  // A Worker whose compatibility date predates 2026-04-07 leaves the reply to the script.
  const calls: unknown[][] = [];
  const inner = Object.assign(new EventTarget(), {
    readyState: 0,
    protocol: 'orders.v1',
    extensions: 'permessage-deflate',
    bufferedAmount: 7,
    accept() {
      inner.readyState = 1;
    },
    send() {},
    close(...args: unknown[]) {
      calls.push(args);
      inner.readyState = 3;
    },
  });
  const { binding } = fakeBinding(() => switchingProtocols(inner));
  const socket = serviceBindingWebSocketFactory(binding)(RPC_URL);
  const seen = recordEvents(socket);
  await nextEvent(socket, 'open');
  assert.deepEqual(
    [socket.protocol, socket.extensions, socket.bufferedAmount],
    ['orders.v1', 'permessage-deflate', 7],
  );
  inner.dispatchEvent(new Event('error'));
  const close = Object.assign(new Event('close'), { code: 1001, reason: 'going', wasClean: true });
  inner.dispatchEvent(close);
  assert.deepEqual(calls, [[1001, 'going']]);
  assert.deepEqual(seen, ['open', 'error', 'close:1001:going:true']);
  // A second close event (a runtime repeating itself) is not reported twice.
  inner.dispatchEvent(close);
  assert.equal(seen.length, 3);
});
