import { test } from 'node:test';
import assert from 'node:assert/strict';
import { abilitySession } from '../../src/service/ability-session.ts';
import { httpBatchRpc } from '../../src/service/transports/http-batch.ts';
import { createFixture } from './fixture.ts';

test('States: an HTTP-batch session renews its token before expiry instead of sending a stale one', async () => {
  const fx = await createFixture();
  let requests = 0;
  const requestToken = async () => {
    requests++;
    // 8 s lifetime: the session stops reusing it 5 s before expiry, i.e. 2 to 3 s from now
    // (iat is whole seconds).
    const issued = await fx.plane.issueCapabilityToken({
      callerServiceId: 'svc-caller',
      targetServiceId: 'svc-a',
      scopes: ['svc-a.read'],
      callerAccess: 'service',
      ttlSeconds: 8,
    });
    return issued.token;
  };
  using session = abilitySession<
    { whoami(input: object): Promise<{ identity: { tokenId: string } }> }
  >({
    abilityId: 'svc-a.echo',
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    requestToken,
    transport: httpBatchRpc(fx.serviceFetch('svc-a')),
  });
  const first = await session.whoami({});
  const again = await session.whoami({});
  assert.equal(requests, 1, 'a fresh token is reused across batches');
  assert.equal(again.identity.tokenId, first.identity.tokenId);
  await new Promise((resolve) => setTimeout(resolve, 3100));
  const renewed = await session.whoami({});
  assert.equal(requests, 2, 'a token near expiry is renewed for the next batch');
  assert.notEqual(renewed.identity.tokenId, first.identity.tokenId);
});
