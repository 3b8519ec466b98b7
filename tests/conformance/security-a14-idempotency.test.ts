// Security checklist A14: idempotency keys ride the transport, are filtered on arrival (word
// characters, `-`, `=`, at most 255), reach the handler unchanged, and never cause deduplication.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createFixture } from './fixture.ts';
import { createPlaneDeployment } from './plane-fixture.ts';

interface Report {
  idempotencyKey: string | null;
}

const VALID_KEY = 'retry-2026_01=';

test('IDEM-01 a valid key reaches the handler by header (HTTP-batch) and query (WebSocket)', async () => {
  const fx = await createFixture();
  {
    const batch = fx.httpBatch('svc-a', { headers: { 'X-Svc-Idempotency-Key': VALID_KEY } });
    using session = fx.session('svc-a.echo', { transport: batch.transport });
    assert.equal(((await session.whoami({})) as Report).idempotencyKey, VALID_KEY);
  }
  {
    const socket = fx.webSocket('svc-a.echo', { query: { idempotency_key: VALID_KEY } });
    using session = fx.session('svc-a.echo', { transport: socket.transport });
    assert.equal(((await session.whoami({})) as Report).idempotencyKey, VALID_KEY);
  }
  {
    // The caller session's own option travels the same way.
    using session = fx.session('svc-a.echo', { idempotencyKey: VALID_KEY });
    assert.equal(((await session.whoami({})) as Report).idempotencyKey, VALID_KEY);
  }
});

test('IDEM-02 a 255-character key is forwarded, a 256-character key is absent', async () => {
  const fx = await createFixture();
  for (const [length, expected] of [[255, true], [256, false]] as const) {
    const key = 'k'.repeat(length);
    const batch = fx.httpBatch('svc-a', { headers: { 'X-Svc-Idempotency-Key': key } });
    using viaHeader = fx.session('svc-a.echo', { transport: batch.transport });
    const socket = fx.webSocket('svc-a.echo', { query: { idempotency_key: key } });
    using viaQuery = fx.session('svc-a.echo', { transport: socket.transport });
    for (const session of [viaHeader, viaQuery]) {
      const report = (await session.whoami({})) as Report;
      assert.equal(report.idempotencyKey, expected ? key : null, `length ${length}`);
    }
  }
});

test('IDEM-03 keys outside the character set are absent and the call still succeeds', async () => {
  const fx = await createFixture();
  // Header values must be ByteStrings without CR/LF, so those two travel only in the query.
  const headerable = ['a b', 'a:b', 'a/b', 'a.b', 'a,b', 'a;b', ''];
  for (const key of [...headerable, 'ключ', 'a\nb']) {
    const socket = fx.webSocket('svc-a.echo', { query: { idempotency_key: key } });
    using viaQuery = fx.session('svc-a.echo', { transport: socket.transport });
    assert.equal(((await viaQuery.whoami({})) as Report).idempotencyKey, null, `query ${key}`);
    // The hostile value really was on the wire.
    assert.equal(new URL(socket.connections[0].url).searchParams.get('idempotency_key'), key);
    if (headerable.includes(key)) {
      const batch = fx.httpBatch('svc-a', { headers: { 'X-Svc-Idempotency-Key': key } });
      using viaHeader = fx.session('svc-a.echo', { transport: batch.transport });
      assert.equal(((await viaHeader.whoami({})) as Report).idempotencyKey, null, `header ${key}`);
    }
  }
});

test('IDEM-04 through the plane session only a valid key reaches the service', async () => {
  const fx = await createFixture();
  const whoamiWith = async (idempotencyKey: string) => {
    using session = fx.plane.abilitySession<{ whoami(input: unknown): Report }>({
      abilityId: 'svc-a.echo',
      targetServiceId: 'svc-a',
      scopes: ['svc-a.read'],
      caller: { id: 'alice', kind: 'user' },
      idempotencyKey,
    });
    return (await session.whoami({})).idempotencyKey;
  };
  assert.equal(await whoamiWith(VALID_KEY), VALID_KEY);
  for (const invalid of ['a b', 'a:b', 'k'.repeat(256), 'ключ']) {
    assert.equal(await whoamiWith(invalid), null, invalid);
  }
});

test('IDEM-04 (REST) only a valid X-Svc-Idempotency-Key reaches the service', async () => {
  const fx = await createPlaneDeployment();
  const whoamiWith = async (key: string) => {
    const response = await fx.rest('GET', '/whoami', {
      bearer: 't-alice',
      headers: { 'X-Svc-Idempotency-Key': key },
    });
    assert.equal(response.status, 200, key);
    const sent = fx.rpcRequests('svc-a').at(-1)!.headers.get('X-Svc-Idempotency-Key');
    return [(response.body as Report).idempotencyKey, sent];
  };
  assert.deepEqual(await whoamiWith(VALID_KEY), [VALID_KEY, VALID_KEY]);
  assert.deepEqual(await whoamiWith('k'.repeat(255)), ['k'.repeat(255), 'k'.repeat(255)]);
  for (const invalid of ['a b', 'a:b', 'k'.repeat(256), 'a%20b', '=;', 'a\u00e9']) {
    assert.deepEqual(await whoamiWith(invalid), [null, null], invalid);
  }
});

test('IDEM-05 the same key on two calls runs the handler twice: nothing deduplicates', async () => {
  const fx = await createFixture();
  using session = fx.session('svc-a.echo', { idempotencyKey: VALID_KEY, scopes: ['svc-a.write'] });
  assert.deepEqual(await session.write({ n: 1 }), { written: true });
  assert.deepEqual(await session.write({ n: 1 }), { written: true });
  assert.equal(fx.count('calls', 'svc-a.echo#write'), 2);
  assert.equal(fx.count('factories', 'svc-a.echo'), 2);
});
