// A service that cannot be reached, or a connection that drops, fails calls with a typed,
// retryable 503, as an unreachable plane does: a caller that retries only what is retryable
// retries a restarting service.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { svcErrorInfo } from '../../src/core/errors.ts';
import { disposeAbilitySession } from '../../src/caller/ability-session.ts';
import { httpBatchRpc } from '../../src/caller/transports/http-batch.ts';
import { websocketRpc } from '../../src/caller/transports/websocket.ts';
import { fakeAbilitySession, fakeRpcEndpoint, newFakeRecord } from '../support/fake-main.ts';

type Echo = { echo(input: { value: string }): Promise<unknown> };

const CONNECTION_REFUSED = () => Promise.reject(new TypeError('fetch failed: connection refused'));

/** A WebSocket that fails to connect, as a client socket to a closed port does. */
function refusedWebSocket(errorEvent: object = {}): WebSocket {
  const listeners = new Map<string, ((event: unknown) => void)[]>();
  const socket = {
    readyState: 0,
    send() {},
    close() {},
    addEventListener(type: string, listener: (event: unknown) => void) {
      listeners.set(type, [...(listeners.get(type) ?? []), listener]);
    },
  };
  setTimeout(() => {
    socket.readyState = 3;
    for (const listener of listeners.get('error') ?? []) listener(errorEvent);
    for (const listener of listeners.get('close') ?? []) listener({ code: 1006, reason: '' });
  }, 1);
  return socket as unknown as WebSocket;
}

function assertRetryableConnectionFailure(error: unknown, reason: string) {
  assert.deepEqual(
    { ...svcErrorInfo(error) },
    { code: 'internal', status: 503, retryable: true, reason },
    String(error),
  );
}

test('HTTP-batch: an unreachable service fails the call with a retryable 503 rpc_connection_failed', async () => {
  const session = fakeAbilitySession<Echo>(httpBatchRpc(CONNECTION_REFUSED));
  try {
    const error = await session.echo({ value: 'x' }).then(() => undefined, (caught) => caught);
    assertRetryableConnectionFailure(error, 'rpc_connection_failed');
  } finally {
    disposeAbilitySession(session);
  }
});

test('HTTP-batch: a refusal the service answered keeps its own status, not a connection failure', async () => {
  const endpoint = fakeRpcEndpoint(newFakeRecord(), { transports: ['websocket'] });
  const session = fakeAbilitySession<Echo>(httpBatchRpc(endpoint.fetch));
  try {
    const error = await session.echo({ value: 'x' }).then(() => undefined, (caught) => caught);
    assert.equal(svcErrorInfo(error).status, 405);
    assert.equal(svcErrorInfo(error).retryable, false);
  } finally {
    disposeAbilitySession(session);
  }
});

test('WebSocket: a connection that fails fails the call with a retryable 503 rpc_connection_lost', async () => {
  const session = fakeAbilitySession<Echo>(
    websocketRpc('wss://fake.internal/rpc/fake.echo', {
      createWebSocket: () => refusedWebSocket(),
    }),
  );
  try {
    const error = await session.echo({ value: 'x' }).then(() => undefined, (caught) => caught);
    assertRetryableConnectionFailure(error, 'rpc_connection_lost');
  } finally {
    disposeAbilitySession(session);
  }
});

for (
  const [runtime, errorEvent] of [
    ['a service binding', { status: 404 }],
    ['ws', { message: 'Unexpected server response: 404' }],
    ['Deno', { message: 'NetworkError: failed to connect to WebSocket: Invalid status code: 404' }],
    ['Bun', {
      error: new Error("WebSocket connection to 'x' failed: Expected 101 status code: 404"),
    }],
  ] as const
) {
  test(`WebSocket: an upgrade refused with 404 (as ${runtime} reports it) fails not retryable, naming the URL`, async () => {
    const session = fakeAbilitySession<Echo>(
      websocketRpc('wss://fake.internal/rpc/fake.echo', {
        createWebSocket: () => refusedWebSocket(errorEvent),
      }),
    );
    try {
      const error = await session.echo({ value: 'x' }).then(() => undefined, (caught) => caught);
      assert.deepEqual(
        { ...svcErrorInfo(error) },
        { code: 'internal', status: 404, retryable: false, reason: 'rpc_upgrade_refused' },
      );
      assert.match(String(error), /wss:\/\/fake\.internal\/rpc\/fake\.echo refused: HTTP 404/);
    } finally {
      disposeAbilitySession(session);
    }
  });
}

test('WebSocket: an upgrade refused with 503 stays retryable', async () => {
  const session = fakeAbilitySession<Echo>(
    websocketRpc('wss://fake.internal/rpc/fake.echo', {
      createWebSocket: () => refusedWebSocket({ status: 503 }),
    }),
  );
  try {
    const error = await session.echo({ value: 'x' }).then(() => undefined, (caught) => caught);
    assertRetryableConnectionFailure(error, 'rpc_upgrade_refused');
  } finally {
    disposeAbilitySession(session);
  }
});
