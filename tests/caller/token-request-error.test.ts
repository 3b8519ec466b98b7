// A refused token request rejects with CapabilityTokenRequestError, which both public entry
// points export, so a caller can tell it apart with `instanceof` and read its taxonomy fields.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as root from '../../mod.ts';
import * as caller from '../../src/caller/mod.ts';

const REQUEST = {
  callerServiceId: 'svc-caller',
  targetServiceId: 'svc-a',
  abilityId: 'svc-a.echo',
  scopes: ['svc-a.read'],
};

test('CapabilityTokenRequestError is exported from svcplane and svcplane/caller', () => {
  assert.equal(typeof root.CapabilityTokenRequestError, 'function');
  assert.equal(root.CapabilityTokenRequestError, caller.CapabilityTokenRequestError);
});

test('a grant refusal rejects with a CapabilityTokenRequestError carrying the plane reason', async () => {
  const requester = caller.controlPlaneHmacTokenRequester({
    clientId: 'hc1',
    clientSecret: 'hc1-secret',
    controlPlaneUrl: 'https://plane.example.test',
    fetch: () =>
      Promise.resolve(
        Response.json({
          type: 'urn:svcplane:problem:capability_auth',
          title: 'Forbidden',
          status: 403,
          detail: 'svc-caller is not granted svc-a.read',
          code: 'capability_auth',
          retryable: false,
          reason: 'scope_not_granted',
        }, { status: 403, headers: { 'content-type': 'application/problem+json' } }),
      ),
  });
  const error = await requester(REQUEST).then(() => assert.fail('granted'), (caught) => caught);
  assert.ok(error instanceof caller.CapabilityTokenRequestError, String(error));
  assert.equal(error.name, 'CapabilityTokenRequestError');
  assert.deepEqual({ ...root.svcErrorInfo(error) }, {
    code: 'capability_auth',
    status: 403,
    retryable: false,
    reason: 'scope_not_granted',
  });
  assert.equal(error.message, 'svc-caller is not granted svc-a.read');
});
