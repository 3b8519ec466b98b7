import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createFixture, ISS } from './fixture.ts';

test('TOK-01 HMAC-issued token authenticates and whoami reports the identity', async () => {
  const fx = await createFixture();
  using session = fx.session('svc-a.echo');
  const report = await session.whoami({}) as { identity: Record<string, unknown> };
  assert.equal(report.identity.serviceId, 'svc-caller');
  assert.equal(report.identity.audience, 'svc-a');
  assert.deepEqual(report.identity.scopes, ['svc-a.read']);
  assert.equal(report.identity.callerAccess, 'service');
  assert.equal(report.identity.issuer, ISS);
  assert.equal('subject' in report.identity, false);
  assert.equal('confirmation' in report.identity, false);
  assert.equal('brokerServiceId' in report.identity, false);
});
