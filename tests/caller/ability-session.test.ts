import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RpcSession } from 'capnweb';
import { decodeJwt } from 'jose';
import {
  CapabilityAuthError,
  SvcConfigurationError,
  svcErrorInfo,
  SvcInternalError,
  SvcTimeoutError,
} from '../../src/core/errors.ts';
import { SVC_TIMEOUT_GRACE_MS } from '../../src/core/deadline.ts';
import {
  type AbilitySession,
  abilitySession,
  type AbilitySessionOptions,
  disposeAbilitySession,
  type ProofSigner,
  RENEWAL_RETRY_MS,
  STALLED_TOKEN_REQUEST_MS,
  type TokenRequest,
  type TokenRequester,
} from '../../src/caller/ability-session.ts';
import { customRpcTransport } from '../../src/caller/transports/custom.ts';
import { httpBatchRpc } from '../../src/caller/transports/http-batch.ts';
import type { RpcTransportFactory } from '../../src/caller/transports/outbound-metadata.ts';
import { websocketRpc } from '../../src/caller/transports/websocket.ts';
import { controlPlaneHmacTokenRequester } from '../../src/caller/token-requesters.ts';
import { memoryWebSocketFactory } from '../../src/testing/mod.ts';
import {
  FAKE_BOUND_TOKEN,
  FAKE_TOKEN,
  FAKE_UNBOUND_JWT,
  FakeMain,
  fakeRpcEndpoint,
  newFakeRecord,
  renewableFakeJwt,
} from '../support/fake-main.ts';
import { MessagePortRpcTransport } from '../support/message-port-transport.ts';
import { closedWithin } from '../support/raw-rpc-socket.ts';
import { recordFiredTimers, steppableWallClock } from '../support/wall-clock.ts';

interface FakeApi {
  echo(input: { value: string }): { value: string };
  whoami(input: Record<string, never>): { transport: string };
  sleep(input: { ms: number }): { slept: number };
  fail(input: Record<string, never>): never;
  ticks(input: { n: number }): ReadableStream<{ i: number }>;
}

/** Serves the fake main on one end of a MessageChannel. */
function serveOverPort(port: MessagePort, record: ReturnType<typeof newFakeRecord>): void {
  const main = new FakeMain(record, { transport: 'websocket', request: new Request('http://x/') });
  new RpcSession(new MessagePortRpcTransport(port), main);
}

function optionsFor(
  transport: RpcTransportFactory,
  extra: Partial<AbilitySessionOptions> = {},
): AbilitySessionOptions {
  return {
    abilityId: 'fake.echo',
    callerServiceId: 'caller',
    targetServiceId: 'fake',
    scopes: ['echo'],
    requestToken: () => Promise.resolve(FAKE_TOKEN),
    transport,
    ...extra,
  };
}

/** The three transport kinds, each wired to a fresh fake service. */
function transports() {
  const batchRecord = newFakeRecord();
  const batchEndpoint = fakeRpcEndpoint(batchRecord);
  const wsRecord = newFakeRecord();
  const wsEndpoint = fakeRpcEndpoint(wsRecord);
  const sockets = memoryWebSocketFactory(wsEndpoint.fetch);
  const customRecord = newFakeRecord();
  const ports: MessagePort[] = [];
  const custom = customRpcTransport(() => {
    const channel = new MessageChannel();
    ports.push(channel.port1, channel.port2);
    serveOverPort(channel.port2, customRecord);
    return new MessagePortRpcTransport(channel.port1);
  });
  return {
    'http-batch': { transport: httpBatchRpc(batchEndpoint.fetch), record: batchRecord },
    websocket: {
      transport: websocketRpc('ws://fake.internal/rpc/fake.echo', {
        createWebSocket: sockets.createWebSocket,
      }),
      record: wsRecord,
      sockets,
    },
    custom: { transport: custom, record: customRecord, ports },
  };
}

const KINDS = ['http-batch', 'websocket', 'custom'] as const;

function closePorts(ports: MessagePort[] = []) {
  for (const port of ports) port.close();
}

for (const kind of KINDS) {
  test(`${kind}: a typed call returns the output and the session is not thenable`, async () => {
    const all = transports();
    const session = abilitySession<FakeApi>(optionsFor(all[kind].transport));
    try {
      assert.deepEqual(await session.echo({ value: kind }), { value: kind });
      assert.equal(await session, session);
      assert.equal((session as unknown as Record<string, unknown>).then, undefined);
      assert.equal((session as unknown as Record<string, unknown>).toJSON, undefined);
    } finally {
      disposeAbilitySession(session);
      closePorts((all.custom as { ports?: MessagePort[] }).ports);
    }
  });

  test(`${kind}: after disposal every call rejects with the same session_disposed error`, async () => {
    const all = transports();
    const session = abilitySession<FakeApi>(optionsFor(all[kind].transport));
    try {
      assert.deepEqual(await session.echo({ value: 'before' }), { value: 'before' });
      disposeAbilitySession(session);
      disposeAbilitySession(session);
      session[Symbol.dispose]();
      const first = await session.echo({ value: 'after' }).catch((error) => error);
      const second = await session.whoami({}).catch((error) => error);
      assert.ok(first instanceof SvcInternalError);
      assert.equal(first, second);
      assert.equal(first.reason, 'session_disposed');
      assert.match(first.message, /fake\.echo/);
      assert.deepEqual(svcErrorInfo(first), {
        code: 'internal',
        status: 500,
        retryable: false,
        reason: 'session_disposed',
      });
    } finally {
      closePorts((all.custom as { ports?: MessagePort[] }).ports);
    }
  });

  test(`${kind}: a call pending at disposal rejects with session_disposed`, async () => {
    const all = transports();
    const session = abilitySession<FakeApi>(optionsFor(all[kind].transport));
    try {
      const pending = session.sleep({ ms: 200 });
      await new Promise((resolve) => setTimeout(resolve, 20));
      disposeAbilitySession(session);
      await assert.rejects(pending, (error: unknown) => {
        assert.equal(svcErrorInfo(error).reason, 'session_disposed');
        return true;
      });
    } finally {
      closePorts((all.custom as { ports?: MessagePort[] }).ports);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  });

  test(`${kind}: a handler error keeps its own code, status, retryable and reason`, async () => {
    const all = transports();
    const session = abilitySession<FakeApi>(optionsFor(all[kind].transport));
    try {
      const error = await session.fail({}).catch((caught) => caught) as
        & Error
        & Record<string, unknown>;
      assert.ok(error instanceof Error);
      assert.equal(error.message, 'The fake ability failed on purpose');
      assert.deepEqual(
        {
          code: error.code,
          status: error.status,
          retryable: error.retryable,
          reason: error.reason,
        },
        { code: 'handler', status: 503, retryable: true, reason: 'fake_failure' },
      );
      assert.deepEqual(svcErrorInfo(error), {
        code: 'handler',
        status: 503,
        retryable: true,
        reason: 'fake_failure',
      });
      assert.deepEqual(await session.echo({ value: 'after failure' }), { value: 'after failure' });
    } finally {
      disposeAbilitySession(session);
      closePorts((all.custom as { ports?: MessagePort[] }).ports);
    }
  });

  test(`${kind}: timeoutMs 0 fails every call immediately without asking for a token`, async () => {
    const all = transports();
    let tokenRequests = 0;
    const session = abilitySession<FakeApi>(optionsFor(all[kind].transport, {
      timeoutMs: 0,
      requestToken: () => {
        tokenRequests++;
        return Promise.resolve(FAKE_TOKEN);
      },
    }));
    try {
      for (let i = 0; i < 2; i++) {
        await assert.rejects(session.echo({ value: 'x' }), (error: unknown) => {
          assert.ok(error instanceof SvcTimeoutError);
          assert.equal(svcErrorInfo(error).code, 'timeout');
          return true;
        });
      }
      assert.equal(tokenRequests, 0);
      assert.equal(all[kind].record.calls.length, 0);
    } finally {
      disposeAbilitySession(session);
      closePorts((all.custom as { ports?: MessagePort[] }).ports);
    }
  });

  test(`${kind}: the local wait is the budget plus the grace, and the session survives it`, async () => {
    const all = transports();
    // Room for the token and the connection inside the budget on a busy machine (≥10× what they
    // take): a call whose budget is spent before it is sent fails at once, not after the grace.
    const budget = 400;
    const session = abilitySession<FakeApi>(optionsFor(all[kind].transport, { timeoutMs: budget }));
    const timers = recordFiredTimers();
    try {
      const started = Date.now();
      const sleepMs = budget + SVC_TIMEOUT_GRACE_MS + 300;
      let firedAtRefusal: number[] = [];
      const error = await session.sleep({ ms: sleepMs }).catch((e) => {
        firedAtRefusal = [...timers.delays];
        return e;
      });
      const waited = Date.now() - started;
      assert.ok(error instanceof SvcTimeoutError, String(error));
      assert.ok(waited >= budget + SVC_TIMEOUT_GRACE_MS - 5, `waited ${waited} ms`);
      // Not waited for the peer: its sleep timer had not fired when the call was refused (read
      // from the timers, not the clock, so a busy machine's late timers cannot blur the two).
      assert.ok(
        Math.max(0, ...firedAtRefusal) <= budget + SVC_TIMEOUT_GRACE_MS,
        `timers fired before the refusal: ${firedAtRefusal.join(', ')}`,
      );
      assert.deepEqual(await session.echo({ value: 'alive' }), { value: 'alive' });
    } finally {
      timers.restore();
      disposeAbilitySession(session);
      closePorts((all.custom as { ports?: MessagePort[] }).ports);
      await new Promise((resolve) => setTimeout(resolve, 400));
    }
  });

  test(`${kind}: an unbound token costs no signature`, async () => {
    const all = transports();
    let proofs = 0;
    const prover: ProofSigner = () => {
      proofs++;
      return Promise.resolve('proof');
    };
    const requester: TokenRequester = Object.assign(() => Promise.resolve(FAKE_UNBOUND_JWT), {
      proveTokenPossession: prover,
    });
    const session = abilitySession<FakeApi>(optionsFor(all[kind].transport, {
      requestToken: requester,
      proveTokenPossession: prover,
    }));
    try {
      await session.echo({ value: 'unbound' });
      await session.echo({ value: 'again' });
      assert.equal(proofs, 0);
      assert.equal(all[kind].record.authenticated[0].token, FAKE_UNBOUND_JWT);
      assert.equal(all[kind].record.authenticated[0].proof, undefined);
    } finally {
      disposeAbilitySession(session);
      closePorts((all.custom as { ports?: MessagePort[] }).ports);
    }
  });

  test(`${kind}: a bound token is proved once per session with the requester's prover`, async () => {
    const all = transports();
    const inputs: unknown[] = [];
    const requester: TokenRequester = Object.assign(() => Promise.resolve(FAKE_BOUND_TOKEN), {
      proveTokenPossession: (input: Parameters<ProofSigner>[0]) => {
        inputs.push(input);
        return Promise.resolve('signed-proof');
      },
    });
    const session = abilitySession<FakeApi>(optionsFor(all[kind].transport, {
      requestToken: requester,
    }));
    try {
      await session.echo({ value: 'one' });
      await session.echo({ value: 'two' });
      assert.deepEqual(inputs, [{
        token: FAKE_BOUND_TOKEN,
        targetServiceId: 'fake',
        abilityId: 'fake.echo',
      }]);
      for (const seen of all[kind].record.authenticated) {
        assert.deepEqual(seen, { token: FAKE_BOUND_TOKEN, proof: 'signed-proof' });
      }
    } finally {
      disposeAbilitySession(session);
      closePorts((all.custom as { ports?: MessagePort[] }).ports);
    }
  });
}

test('an explicit proveTokenPossession wins over the requester prover', async () => {
  const all = transports();
  const used: string[] = [];
  const requester: TokenRequester = Object.assign(() => Promise.resolve(FAKE_BOUND_TOKEN), {
    proveTokenPossession: () => {
      used.push('requester');
      return Promise.resolve('requester-proof');
    },
  });
  const session = abilitySession<FakeApi>(optionsFor(all['http-batch'].transport, {
    requestToken: requester,
    proveTokenPossession: () => {
      used.push('explicit');
      return Promise.resolve('explicit-proof');
    },
  }));
  await session.echo({ value: 'x' });
  assert.deepEqual(used, ['explicit']);
  assert.equal(all['http-batch'].record.authenticated[0].proof, 'explicit-proof');
});

test('a bound token without any prover fails locally with a capability error', async () => {
  const endpoint = fakeRpcEndpoint();
  const session = abilitySession<FakeApi>(optionsFor(httpBatchRpc(endpoint.fetch), {
    requestToken: () => Promise.resolve(FAKE_BOUND_TOKEN),
  }));
  await assert.rejects(session.echo({ value: 'x' }), (error: unknown) => {
    assert.ok(error instanceof CapabilityAuthError);
    assert.equal(svcErrorInfo(error).reason, 'proof_signer_missing');
    return true;
  });
  assert.equal(endpoint.requests.length, 0);
});

test('a refused token arrives as a capability_auth error', async () => {
  const endpoint = fakeRpcEndpoint();
  const session = abilitySession<FakeApi>(optionsFor(httpBatchRpc(endpoint.fetch), {
    requestToken: () => Promise.resolve('not-the-token'),
  }));
  const error = await session.echo({ value: 'x' }).catch((caught) => caught);
  assert.equal(error.code, 'capability_auth');
  assert.deepEqual(svcErrorInfo(error), {
    code: 'capability_auth',
    status: 401,
    retryable: false,
    reason: 'token_invalid',
  });
});

test('a failed token request fails the call and the next call asks again', async () => {
  const endpoint = fakeRpcEndpoint();
  let attempts = 0;
  const session = abilitySession<FakeApi>(optionsFor(httpBatchRpc(endpoint.fetch), {
    requestToken: () => {
      attempts++;
      return attempts === 1 ? Promise.reject(new Error('plane down')) : Promise.resolve(FAKE_TOKEN);
    },
  }));
  await assert.rejects(session.echo({ value: 'x' }), /plane down/);
  assert.deepEqual(await session.echo({ value: 'y' }), { value: 'y' });
  assert.equal(attempts, 2);
});

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A token request that never answers (a plane that accepted the connection and went silent). */
const stalled = () => new Promise<string>(() => {});

test('a token request that stalls fails the waiting call at its budget and the next call asks again', async () => {
  const endpoint = fakeRpcEndpoint();
  let requests = 0;
  const budget = 50;
  const session = abilitySession<FakeApi>(optionsFor(httpBatchRpc(endpoint.fetch), {
    timeoutMs: budget,
    requestToken: () => ++requests === 1 ? stalled() : Promise.resolve(FAKE_TOKEN),
  }));
  const timers = recordFiredTimers();
  try {
    const started = Date.now();
    let firedAtRefusal: number[] = [];
    await assert.rejects(
      session.echo({ value: 'first' }).finally(() => (firedAtRefusal = [...timers.delays])),
      SvcTimeoutError,
    );
    const waited = Date.now() - started;
    // No peer verdict to wait for: the call gives up at its budget, not budget plus grace. Which
    // timer refused it is read from the timers that had fired, not from the clock.
    assert.ok(waited >= budget - 5, `waited ${waited}`);
    assert.ok(
      Math.max(0, ...firedAtRefusal) <= budget,
      `timers fired before the refusal: ${firedAtRefusal.join(', ')}`,
    );
    assert.deepEqual(await session.echo({ value: 'second' }), { value: 'second' });
    assert.equal(requests, 2, 'the second call asked the requester again');
    assert.deepEqual(await session.echo({ value: 'third' }), { value: 'third' });
    assert.equal(requests, 2, 'and its token serves later calls');
  } finally {
    timers.restore();
    disposeAbilitySession(session);
  }
});

test('a token request every waiting call gave up on is aborted through its signal; an answered one is not', async () => {
  const endpoint = fakeRpcEndpoint();
  const requests: TokenRequest[] = [];
  const session = abilitySession<FakeApi>(optionsFor(httpBatchRpc(endpoint.fetch), {
    timeoutMs: 50,
    requestToken: (request) => {
      requests.push(request);
      return requests.length <= 2 ? stalled() : Promise.resolve(FAKE_TOKEN);
    },
  }));
  try {
    // Two calls wait on one request: giving up on it takes both. The second starts 20 ms later
    // on a wall clock the test holds, so it joins the request however late a busy machine runs
    // it, and its budget timer is set after the first's (timers fire in that order).
    const realNow = Date.now;
    const startedAt = realNow();
    let first: Promise<unknown>;
    let second: Promise<unknown>;
    try {
      Date.now = () => startedAt;
      first = session.echo({ value: 'first' });
      Date.now = () => startedAt + 20;
      second = session.echo({ value: 'second' });
    } finally {
      Date.now = realNow;
    }
    await assert.rejects(first, SvcTimeoutError);
    assert.ok(requests[0].signal instanceof AbortSignal);
    assert.equal(requests[0].signal.aborted, false, 'a call still waits on it');
    await assert.rejects(second, SvcTimeoutError);
    assert.equal(requests[0].signal.aborted, true);
    // The next call asks again; this request stalls too and its call gives up.
    await assert.rejects(session.echo({ value: 'third' }), SvcTimeoutError);
    assert.equal(requests.length, 2);
    assert.equal(requests[1].signal!.aborted, true);
    assert.deepEqual(await session.echo({ value: 'fourth' }), { value: 'fourth' });
    assert.equal(requests[2].signal!.aborted, false, 'its answer was used');
  } finally {
    disposeAbilitySession(session);
  }
});

test('disposing a session aborts its unanswered token request with the disposal', async () => {
  const endpoint = fakeRpcEndpoint();
  const requests: TokenRequest[] = [];
  const session = abilitySession<FakeApi>(optionsFor(httpBatchRpc(endpoint.fetch), {
    requestToken: (request) => {
      requests.push(request);
      return stalled();
    },
  }));
  const call = session.echo({ value: 'never' });
  await delay(5);
  disposeAbilitySession(session);
  const disposal = await call.then(() => assert.fail('resolved'), (error) => error);
  assert.equal(svcErrorInfo(disposal).reason, 'session_disposed');
  assert.equal(requests[0].signal!.aborted, true);
  assert.equal(requests[0].signal!.reason, disposal);
});

test('a background renewal nobody waits on is not aborted while the token in hand serves calls', async () => {
  const endpoint = fakeRpcEndpoint();
  const requests: TokenRequest[] = [];
  const clock = steppableWallClock();
  const nowSeconds = Math.floor(Date.now() / 1000);
  const session = abilitySession<FakeApi>(optionsFor(httpBatchRpc(endpoint.fetch), {
    timeoutMs: 1_000,
    requestToken: (request) => {
      requests.push(request);
      return requests.length === 1
        ? Promise.resolve(renewableFakeJwt({ iat: nowSeconds, exp: nowSeconds + 60 }))
        : stalled();
    },
  }));
  try {
    assert.deepEqual(await session.echo({ value: 'a' }), { value: 'a' });
    clock.advance(57_000); // inside the renewal margin, before expiry
    assert.deepEqual(await session.echo({ value: 'b' }), { value: 'b' });
    assert.equal(requests.length, 2, 'the renewal started in the background');
    assert.deepEqual(await session.echo({ value: 'c' }), { value: 'c' });
    assert.equal(requests[1].signal!.aborted, false);
  } finally {
    clock.restore();
    disposeAbilitySession(session);
  }
});

test('a session with a shipped requester recovers from a plane that never answers its token request', async () => {
  const endpoint = fakeRpcEndpoint();
  let fetches = 0;
  const abortedFetches: number[] = [];
  const requester = controlPlaneHmacTokenRequester({
    clientId: 'hc1',
    clientSecret: 'an-hmac-client-secret-of-enough-length',
    controlPlaneUrl: 'https://plane.test',
    fetch: (request) => {
      const attempt = ++fetches;
      if (attempt > 1) {
        const token = renewableFakeJwt({ sub: 'caller', aud: 'fake', scp: ['echo'] });
        return Promise.resolve(Response.json({ token, expiresIn: 300 }));
      }
      return new Promise((_, reject) => {
        request.signal.addEventListener('abort', () => {
          abortedFetches.push(attempt);
          reject(request.signal.reason);
        });
      });
    },
  });
  const session = abilitySession<FakeApi>(optionsFor(httpBatchRpc(endpoint.fetch), {
    // Long enough that the second call (a token fetch, then the batch) never runs out on a
    // loaded machine; the first call's fetch never answers, so it runs out whatever the budget.
    timeoutMs: 400,
    requestToken: requester,
  }));
  try {
    await assert.rejects(session.echo({ value: 'first' }), SvcTimeoutError);
    assert.deepEqual(abortedFetches, [1]);
    // The requester shares one fetch between sessions; the one given up on is not shared again.
    assert.deepEqual(await session.echo({ value: 'second' }), { value: 'second' });
    assert.equal(fetches, 2);
  } finally {
    disposeAbilitySession(session);
  }
});

test('without a budget, a token request unanswered for STALLED_TOKEN_REQUEST_MS is asked again, and every waiting call gets the answer', async () => {
  const endpoint = fakeRpcEndpoint();
  let requests = 0;
  const session = abilitySession<FakeApi>(optionsFor(httpBatchRpc(endpoint.fetch), {
    requestToken: () => ++requests === 1 ? stalled() : Promise.resolve(FAKE_TOKEN),
  }));
  const clock = steppableWallClock();
  try {
    const held = session.echo({ value: 'held' });
    await delay(5);
    // Shared while it may still answer...
    const alsoHeld = session.echo({ value: 'also held' });
    await delay(5);
    assert.equal(requests, 1);
    // ...not once it has gone unanswered for STALLED_TOKEN_REQUEST_MS.
    clock.advance(STALLED_TOKEN_REQUEST_MS);
    assert.deepEqual(await session.echo({ value: 'later' }), { value: 'later' });
    assert.equal(requests, 2);
    // The calls that waited on the stalled request take the new answer too.
    assert.deepEqual(await Promise.all([held, alsoHeld]), [
      { value: 'held' },
      { value: 'also held' },
    ]);
  } finally {
    clock.restore();
    disposeAbilitySession(session);
  }
});

test('a token the service refuses (401) is not presented again: the next call asks for another, naming it', async () => {
  for (const [kind, { transport, record }] of Object.entries(transports())) {
    if (kind === 'custom') continue;
    const seen: TokenRequest[] = [];
    const session = abilitySession<FakeApi>(optionsFor(transport, {
      // A token that never expires by its claims, but that the service no longer accepts (its
      // key was removed, say), then a good one.
      requestToken: (request) => {
        seen.push(request);
        return Promise.resolve(seen.length === 1 ? 'revoked-token' : FAKE_TOKEN);
      },
    }));
    try {
      const refused = await session.echo({ value: 'refused' }).catch((error: unknown) => error);
      assert.deepEqual(
        { code: svcErrorInfo(refused).code, status: svcErrorInfo(refused).status },
        { code: 'capability_auth', status: 401 },
        kind,
      );
      assert.deepEqual(await session.echo({ value: 'recovered' }), { value: 'recovered' }, kind);
      assert.equal(seen.length, 2, kind);
      assert.equal(seen[0].refusedToken, undefined, kind);
      assert.equal(seen[1].refusedToken, 'revoked-token', kind);
      assert.deepEqual(await session.echo({ value: 'steady' }), { value: 'steady' }, kind);
      assert.equal(seen.length, 2, `${kind}: the good token serves later calls`);
      assert.ok(record.authenticated.every(({ token }) => token === FAKE_TOKEN), kind);
    } finally {
      disposeAbilitySession(session);
    }
  }
});

test('calls waiting for a token together share one request while it answers within their budgets', async () => {
  const endpoint = fakeRpcEndpoint();
  let requests = 0;
  const session = abilitySession<FakeApi>(optionsFor(httpBatchRpc(endpoint.fetch), {
    timeoutMs: 1_000,
    requestToken: async () => {
      requests++;
      await delay(100);
      return FAKE_TOKEN;
    },
  }));
  try {
    const first = [session.echo({ value: 'a' }), session.echo({ value: 'b' })];
    await delay(40);
    const later = session.echo({ value: 'c' });
    assert.deepEqual(await Promise.all([...first, later]), [
      { value: 'a' },
      { value: 'b' },
      { value: 'c' },
    ]);
    assert.equal(requests, 1);
  } finally {
    disposeAbilitySession(session);
  }
});

test('a token that arrives after its caller gave up is kept for the next call', async () => {
  const endpoint = fakeRpcEndpoint();
  let requests = 0;
  const session = abilitySession<FakeApi>(optionsFor(httpBatchRpc(endpoint.fetch), {
    timeoutMs: 50,
    requestToken: async () => {
      requests++;
      await delay(150);
      return FAKE_TOKEN;
    },
  }));
  try {
    await assert.rejects(session.echo({ value: 'too soon' }), SvcTimeoutError);
    await delay(200);
    assert.deepEqual(await session.echo({ value: 'later' }), { value: 'later' });
    assert.equal(requests, 1, 'the late token served the next call without a new request');
  } finally {
    disposeAbilitySession(session);
  }
});

test('a call waits for a renewal only once the token in hand has expired', async () => {
  const record = newFakeRecord();
  const endpoint = fakeRpcEndpoint(record);
  // A token that expires within 2 s, so due for renewal at once; its renewal answers only
  // 200 ms after it expired.
  const firstExp = Math.floor(Date.now() / 1000) + 2;
  let requests = 0;
  const session = abilitySession<FakeApi>(optionsFor(httpBatchRpc(endpoint.fetch), {
    timeoutMs: 5_000,
    requestToken: async () => {
      if (++requests === 1) return renewableFakeJwt({ exp: firstExp, jti: 'first' });
      await delay(firstExp * 1000 + 200 - Date.now());
      return renewableFakeJwt({ exp: firstExp + 60, jti: 'renewed' });
    },
  }));
  try {
    await session.echo({ value: 'first token' });
    // Due for renewal: the call starts it and still goes out at once with the valid token.
    const started = Date.now();
    await session.echo({ value: 'renewing' });
    // The renewal answers over a second from now: ≥10× what a call that goes out at once takes.
    assert.ok(Date.now() - started < 1_000, `waited ${Date.now() - started} ms`);
    assert.equal(requests, 2);
    while (Date.now() < firstExp * 1000) await delay(20);
    // Expired: the call waits for the renewal under way.
    assert.deepEqual(await session.echo({ value: 'expired' }), { value: 'expired' });
    assert.ok(Date.now() >= firstExp * 1000 + 150, 'it waited for the renewal');
    assert.equal(requests, 2, 'no second renewal');
    assert.deepEqual(
      record.authenticated.map(({ token }) => decodeJwt(token).jti),
      ['first', 'first', 'renewed'],
    );
  } finally {
    disposeAbilitySession(session);
  }
});

test('a renewal that does not answer within a call budget is asked again while the token is valid', async () => {
  const record = newFakeRecord();
  const endpoint = fakeRpcEndpoint(record);
  // The wall clock is held and moved by the test: the renewal is pending past one budget, and the
  // token in hand still valid, however slowly a busy machine runs the calls.
  const realNow = Date.now;
  let heldAt = realNow();
  Date.now = () => heldAt;
  // A token valid for 3 s or more but due for renewal at once; a renewal that never answers;
  // then a long-lived token.
  const now = Math.floor(Date.now() / 1000);
  const answers = [
    () => Promise.resolve(renewableFakeJwt({ exp: now + 4, jti: 'first' })),
    stalled,
    () => Promise.resolve(renewableFakeJwt({ exp: now + 60, jti: 'last' })),
  ];
  let requests = 0;
  const budget = 1_000;
  const session = abilitySession<FakeApi>(optionsFor(httpBatchRpc(endpoint.fetch), {
    timeoutMs: budget,
    requestToken: () => answers[Math.min(requests++, answers.length - 1)](),
  }));
  try {
    await session.echo({ value: 'first token' });
    await session.echo({ value: 'starts the renewal' });
    assert.equal(requests, 2);
    heldAt += budget + 50;
    await session.echo({ value: 'renewal stalled' });
    assert.equal(requests, 3, 'the renewal pending past one budget was asked again');
    await delay(20);
    await session.echo({ value: 'renewed' });
    assert.deepEqual(
      record.authenticated.map(({ token }) => decodeJwt(token).jti),
      ['first', 'first', 'first', 'last'],
      'no call failed or waited for a token meanwhile',
    );
  } finally {
    Date.now = realNow;
    disposeAbilitySession(session);
  }
});

test('websocket: one socket per session, authenticate once, metadata in the query', async () => {
  const all = transports();
  const session = abilitySession<FakeApi>(optionsFor(all.websocket.transport, {
    requestId: 'req-ws',
    timeoutMs: 5_000,
    idempotencyKey: 'key-1',
    connInfo: '{"address":"198.51.100.7"}',
  }));
  try {
    const results = await Promise.all([session.echo({ value: 'a' }), session.whoami({})]);
    assert.deepEqual(results, [{ value: 'a' }, { transport: 'websocket' }]);
    assert.deepEqual(await session.echo({ value: 'later' }), { value: 'later' });
    assert.equal(all.websocket.sockets.connections.length, 1);
    assert.equal(all.websocket.record.authenticated.length, 1);
    const url = new URL(all.websocket.sockets.connections[0].url);
    assert.equal(url.protocol, 'ws:');
    assert.equal(url.searchParams.get('request_id'), 'req-ws');
    assert.equal(url.searchParams.get('idempotency_key'), 'key-1');
    assert.equal(url.searchParams.get('conn_info'), '{"address":"198.51.100.7"}');
    const budget = Number(url.searchParams.get('timeout'));
    assert.ok(budget > 0 && budget <= 5_000);
    assert.ok(!all.websocket.sockets.connections[0].url.includes(FAKE_TOKEN));
    assert.equal(all.websocket.record.sessions[0].query.request_id, 'req-ws');
  } finally {
    disposeAbilitySession(session);
  }
  // Disposal starts the closing handshake with 1000 at once; both ends then report it.
  assert.equal(all.websocket.sockets.connections[0].state, 'closing');
  assert.equal(await closedWithin(all.websocket.sockets.connections[0], 5_000), 1000);
});

test('websocket: a streaming method delivers a ReadableStream', async () => {
  const all = transports();
  const session = abilitySession<FakeApi>(optionsFor(all.websocket.transport));
  try {
    const stream = await session.ticks({ n: 50 });
    const items: number[] = [];
    for await (const item of stream as unknown as AsyncIterable<{ i: number }>) items.push(item.i);
    assert.deepEqual(items, Array.from({ length: 50 }, (_, i) => i));
  } finally {
    disposeAbilitySession(session);
  }
});

test('custom: a MessagePort pair carries a stream', async () => {
  const all = transports();
  const session = abilitySession<FakeApi>(optionsFor(all.custom.transport));
  try {
    const reader = (await session.ticks({ n: 20 })).getReader();
    let count = 0;
    for (;;) {
      const { done } = await reader.read();
      if (done) break;
      count++;
    }
    assert.equal(count, 20);
  } finally {
    disposeAbilitySession(session);
    closePorts(all.custom.ports);
  }
});

test('using disposes the session at the end of the block', async () => {
  const endpoint = fakeRpcEndpoint();
  let escaped: AbilitySession<FakeApi> | undefined;
  {
    using session = abilitySession<FakeApi>(optionsFor(httpBatchRpc(endpoint.fetch)));
    escaped = session;
    assert.deepEqual(await session.echo({ value: 'in block' }), { value: 'in block' });
  }
  await assert.rejects(escaped.echo({ value: 'x' }), /disposed/);
});

test('Symbol.asyncDispose disposes too', async () => {
  const endpoint = fakeRpcEndpoint();
  const session = abilitySession<FakeApi>(optionsFor(httpBatchRpc(endpoint.fetch)));
  await session[Symbol.asyncDispose]();
  await assert.rejects(session.echo({ value: 'x' }), (error: unknown) => {
    return svcErrorInfo(error).reason === 'session_disposed';
  });
  assert.equal(endpoint.requests.length, 0);
});

test('a custom transport instance carries one session; a second open is refused', async () => {
  const channel = new MessageChannel();
  serveOverPort(channel.port2, newFakeRecord());
  const transport = customRpcTransport(new MessagePortRpcTransport(channel.port1));
  const first = abilitySession<FakeApi>(optionsFor(transport));
  const second = abilitySession<FakeApi>(optionsFor(transport));
  try {
    assert.deepEqual(await first.echo({ value: 'first' }), { value: 'first' });
    await assert.rejects(second.echo({ value: 'second' }), SvcConfigurationError);
  } finally {
    disposeAbilitySession(first);
    disposeAbilitySession(second);
    channel.port1.close();
    channel.port2.close();
  }
});

test('invalid session options are refused at creation', () => {
  const transport = httpBatchRpc(fakeRpcEndpoint().fetch);
  for (
    const bad of [
      { abilityId: '' },
      { timeoutMs: -1 },
      { timeoutMs: Number.NaN },
      { scopes: 'echo' as unknown as string[] },
      { transport: {} as RpcTransportFactory },
    ]
  ) {
    assert.throws(() => abilitySession(optionsFor(transport, bad)), SvcConfigurationError);
  }
});

test('an empty scopes list is refused at creation, before any token request', () => {
  const endpoint = fakeRpcEndpoint();
  let tokenRequests = 0;
  assert.throws(
    () =>
      abilitySession({
        ...optionsFor(httpBatchRpc(endpoint.fetch)),
        scopes: [],
        requestToken: () => {
          tokenRequests++;
          return Promise.resolve(FAKE_TOKEN);
        },
      }),
    (error: unknown) =>
      error instanceof SvcConfigurationError && svcErrorInfo(error).reason === 'scopes_required' &&
      /at least one scope/.test(error.message),
  );
  assert.equal(tokenRequests, 0);
  assert.equal(endpoint.requests.length, 0);
});

test("names Cap'n Web stubs reserve are refused instead of silently calling the stub", async () => {
  const endpoint = fakeRpcEndpoint();
  const session = abilitySession(optionsFor(httpBatchRpc(endpoint.fetch)));
  for (const name of ['dup', 'map', 'onRpcBroken']) {
    await assert.rejects(session[name]({}), (error: unknown) => {
      assert.ok(error instanceof SvcConfigurationError);
      assert.match(error.message, new RegExp(name));
      return true;
    });
  }
  assert.equal(endpoint.requests.length, 0);
});

test('a failed background renewal is not retried by every call: it waits for Retry-After, or a second', async () => {
  const cases: [number | undefined, number][] = [[30_000, 30_000], [undefined, RENEWAL_RETRY_MS]];
  for (const [retryAfterMs, pausedMs] of cases) {
    const endpoint = fakeRpcEndpoint();
    let requests = 0;
    const clock = steppableWallClock();
    const nowSeconds = Math.floor(Date.now() / 1000);
    const shedding = Object.assign(new Error('Too Many Requests'), {
      code: 'internal',
      status: 429,
      retryable: true,
      ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
    });
    const session = abilitySession<FakeApi>(optionsFor(httpBatchRpc(endpoint.fetch), {
      requestToken: () =>
        ++requests === 1
          ? Promise.resolve(renewableFakeJwt({ iat: nowSeconds, exp: nowSeconds + 3600 }))
          : Promise.reject(shedding),
    }));
    try {
      await session.echo({ value: 'first' });
      clock.advance(3_596_000); // inside the renewal margin, the token still valid
      for (let i = 0; i < 20; i++) {
        assert.deepEqual(await session.echo({ value: 'x' }), { value: 'x' });
      }
      assert.equal(requests, 2, `one renewal attempt for 20 calls (${retryAfterMs})`);
      clock.advance(pausedMs + 1);
      // Past a long pause the token has expired and this call fails with the plane's refusal;
      // either way, it asks again.
      await session.echo({ value: 'again' }).catch(() => {});
      assert.equal(requests, 3, 'asked again once the pause is over');
    } finally {
      clock.restore();
      disposeAbilitySession(session);
    }
  }
});
