// Rotation r8 from the caller's side: once the service refuses the token on a call (its key left
// the JWKS), the session asks for a new one at once, over a WebSocket as over HTTP-batch, instead
// of presenting the refused token until its own renewal comes due.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { svcErrorInfo } from '../../src/core/errors.ts';
import type { TokenRequester } from '../../src/caller/ability-session.ts';
import { createPlaneDeployment, sleep } from './plane-fixture.ts';

type Echo = { whoami(input: object): Promise<unknown> };

for (const transport of ['websocket', 'http-batch'] as const) {
  test(`Rotation r8 (${transport}): after its key is removed, one call is refused and the session recovers with a new token`, async () => {
    const fx = await createPlaneDeployment();
    let requests = 0;
    const inner = fx.hmacRequester();
    const requester = Object.assign(async (request: Parameters<TokenRequester>[0]) => {
      requests++;
      return await inner(request);
    }, { proveTokenPossession: inner.proveTokenPossession });
    using session = fx.session<Echo>('svc-a.echo', {
      transport,
      requester: requester as TokenRequester,
    });
    await session.whoami({});
    await fx.redeploy(['k2']);
    await sleep(800); // past the service's JWKS cache
    const outcomes: string[] = [];
    for (let i = 0; i < 5; i++) {
      outcomes.push(
        await session.whoami({}).then(
          () => 'ok',
          (error) => `${svcErrorInfo(error).status} ${svcErrorInfo(error).reason}`,
        ),
      );
    }
    assert.deepEqual(outcomes, ['401 unknown_capability_key_id', 'ok', 'ok', 'ok', 'ok']);
    assert.equal(requests, 2, 'one new token, asked for once');
  });
}
