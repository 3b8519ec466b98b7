// serveDeno's WebSocket message limit: `Deno.upgradeWebSocket` has no size option, so the adapter
// closes a connection with 1009 at its first message above MAX_WEBSOCKET_PAYLOAD_BYTES, before
// the session sees it, as Node (`ws`) and Bun do. Real sockets on 127.0.0.1 to the real service,
// unauthenticated, and the size check on its own with small limits.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WebSocket as WsWebSocket } from 'ws';
import { z } from 'zod';
import { MAX_WEBSOCKET_PAYLOAD_BYTES, serveDeno } from '../../../src/adapters/deno.ts';
import { messageExceeds } from '../../../src/adapters/websocket-message-limit.ts';
import { defineAbility } from '../../../src/service/ability.ts';
import { abilityMethod } from '../../../src/service/method.ts';
import { createService } from '../../../src/service/service.ts';
import {
  resolveWebSocketUpgrader,
  type WebSocketUpgrader,
  withWebSocketUpgrader,
} from '../../../src/service/websocket-upgrade.ts';
import { RUNTIME_ISSUER, runtimeSigningKey } from '../service-websocket-fixture.ts';

const BOUND = { timeout: 60_000 };

/** Longest the client waits for the server's answer to one large message. */
const ANSWER_BOUND_MS = 20_000;

const MIB = 1024 * 1024;

const RPC_PATH = '/rpc/svc-limit.echo';

/**
 * The real service behind `serveDeno`, with a listener added to each accepted socket just
 * before the session's own: `seen` records the size of every message the session is handed.
 */
async function limitedService() {
  const key = await runtimeSigningKey();
  const ability = defineAbility({
    id: 'svc-limit.echo',
    scopes: ['svc-limit.read'],
    rpc: { transports: ['websocket'] },
    methods: { ping: abilityMethod({ input: z.object({}), output: z.literal('pong') }) },
    handler: () => ({ ping: () => 'pong' as const }),
  });
  const service = createService({
    id: 'svc-limit',
    title: 'Message limit',
    version: '1.0.0',
    auth: { jwks: key.jwks, issuer: RUNTIME_ISSUER },
    abilities: [ability],
    logger: () => {},
  });
  const seen: number[] = [];
  const server = await serveDeno({
    fetch(request, env) {
      const upgrader = resolveWebSocketUpgrader(env) as WebSocketUpgrader;
      const recording: WebSocketUpgrader = {
        upgrade: (req, runtime, accept) =>
          upgrader.upgrade(req, runtime, (socket) => {
            socket.addEventListener('message', (event: MessageEvent) => {
              seen.push(typeof event.data === 'string' ? event.data.length : -1);
            });
            accept(socket);
          }),
      };
      return service.fetch(request, withWebSocketUpgrader(env, recording));
    },
  });
  return { server, seen };
}

/** How the server answered one message: its first message back, or its close. */
type Answer = { kind: 'message'; text: string } | { kind: 'close'; code: number; reason: string };

/** Sends `text` as the first message of a fresh, unauthenticated socket; waits for an answer. */
async function answerTo(url: string, text: string): Promise<Answer> {
  const socket = new WsWebSocket(`${url.replace('http', 'ws')}${RPC_PATH}`, {
    maxPayload: MIB,
    perMessageDeflate: false,
  });
  let bound: ReturnType<typeof setTimeout> | undefined;
  try {
    return await new Promise<Answer>((resolve, reject) => {
      socket.on('open', () => socket.send(text));
      socket.on('message', (data) => resolve({ kind: 'message', text: String(data) }));
      socket.on(
        'close',
        (code, reason) => resolve({ kind: 'close', code, reason: String(reason) }),
      );
      socket.on('error', () => {});
      bound = setTimeout(() => reject(new Error('no answer in time')), ANSWER_BOUND_MS);
    });
  } finally {
    clearTimeout(bound);
    socket.terminate();
  }
}

/** A Cap'n Web `push` of one string: `unit` repeated `count` times. */
function pushOf(unit: string, count: number): string {
  return `["push",${JSON.stringify(unit.repeat(count))}]`;
}

test(
  'serveDeno: an unauthenticated 33 MiB message is closed with 1009 and never reaches the session',
  BOUND,
  async () => {
    const { server, seen } = await limitedService();
    try {
      const answer = await answerTo(server.url, pushOf('a', 33 * MIB));
      assert.deepEqual(answer, { kind: 'close', code: 1009, reason: 'message too big' });
      assert.deepEqual(seen, []);
      // The server stays healthy: the next connection's message reaches its session.
      const next = await answerTo(server.url, 'not json');
      assert.equal(next.kind, 'message');
      assert.deepEqual(seen, ['not json'.length]);
    } finally {
      await server.close();
    }
  },
);

test(
  'serveDeno: text counts in UTF-8 bytes: 17 Mi two-byte characters (34 MiB) get 1009',
  BOUND,
  async () => {
    const { server, seen } = await limitedService();
    try {
      const text = pushOf('é', 17 * MIB);
      assert.ok(text.length < MAX_WEBSOCKET_PAYLOAD_BYTES, 'under the limit in UTF-16 units');
      const answer = await answerTo(server.url, text);
      assert.deepEqual(answer, { kind: 'close', code: 1009, reason: 'message too big' });
      assert.deepEqual(seen, []);
    } finally {
      await server.close();
    }
  },
);

test(
  'serveDeno: a hostile 31 MiB message is under the limit: the session gets it and aborts, no 1009',
  BOUND,
  async () => {
    const { server, seen } = await limitedService();
    try {
      const text = 'x'.repeat(31 * MIB);
      const answer = await answerTo(server.url, text);
      // Not Cap'n Web: the session's own answer is an abort, not the adapter's refusal.
      assert.equal(answer.kind, 'message');
      assert.match(answer.text, /^\["abort"/);
      assert.deepEqual(seen, [text.length]);
    } finally {
      await server.close();
    }
  },
);

test('the size check reads text as UTF-8 bytes and binary data by its byte length', () => {
  const limit = 12;
  // Length alone decides: more units than bytes allowed, or three bytes each still fitting.
  assert.equal(messageExceeds('a'.repeat(13), limit), true);
  assert.equal(messageExceeds('€'.repeat(4), limit), false);
  // Between the two bounds the units are counted.
  assert.equal(messageExceeds('a'.repeat(12), limit), false);
  assert.equal(messageExceeds('é'.repeat(6), limit), false);
  assert.equal(messageExceeds('é'.repeat(7), limit), true);
  assert.equal(messageExceeds('€'.repeat(5), limit), true);
  assert.equal(messageExceeds('😀'.repeat(3), limit), false);
  assert.equal(messageExceeds('😀'.repeat(3) + 'a', limit), true);
  assert.equal(messageExceeds(`${'a'.repeat(10)}é`, limit), false);
  assert.equal(messageExceeds(`${'a'.repeat(11)}é`, limit), true);
  for (const text of ['a'.repeat(12), 'é'.repeat(7), '€'.repeat(5), '😀'.repeat(3) + 'a']) {
    const bytes = new TextEncoder().encode(text).byteLength;
    assert.equal(messageExceeds(text, limit), bytes > limit, text);
  }
  assert.equal(messageExceeds(new ArrayBuffer(12), limit), false);
  assert.equal(messageExceeds(new ArrayBuffer(13), limit), true);
  assert.equal(messageExceeds(new Uint8Array(13).subarray(1), limit), false);
  assert.equal(messageExceeds(new Blob([new Uint8Array(13)]), limit), true);
});
