// Security checklist A8 (delegation and subject injection) against the real plane. DEL-01..04
// go through the token endpoint; DEL-05/06 use `plane.abilitySession` as the in-process stand-in
// for the broker and REST front doors, which are not built yet.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  createPlaneDeployment,
  decodeJws,
  harnessThumbprint,
  hmacTokenRequest,
  jwkTokenRequest,
  PLANE_ID,
  type PlaneDeployment,
  type ReadResponse,
  tokenBody,
} from './plane-fixture.ts';

type Report = { identity: Record<string, unknown> };

function assertSubjectRefused(response: ReadResponse, label: string): void {
  assert.equal(response.status, 403, label);
  assert.equal(response.body.reason, 'subject_not_allowed', label);
  assert.equal(response.body.token, undefined, label);
  assert.equal(response.headers.get('Cache-Control'), 'no-store', label);
  assert.equal(response.headers.get('Pragma'), 'no-cache', label);
}

/** Both caller paths with the same extra body members. */
async function viaBothPaths(fx: PlaneDeployment, extra: Record<string, unknown>) {
  return {
    hmac: await fx.send(await hmacTokenRequest({ ...tokenBody(), ...extra })),
    jwk: await fx.send(
      await jwkTokenRequest({ ...tokenBody({ callerServiceId: 'svc-jwk' }), ...extra }),
    ),
  };
}

test('DEL-01 a subject in a signed token request is refused on both caller paths', async () => {
  const fx = await createPlaneDeployment({ countSigningKeyLookups: true });
  const { hmac, jwk } = await viaBothPaths(fx, { subject: { id: 'victim' } });
  assertSubjectRefused(hmac, 'hmac');
  assertSubjectRefused(jwk, 'jwk');
  assert.equal(fx.counters.signingKeyLookups, 0);
});

test('DEL-02 every subject shape is refused', async () => {
  const fx = await createPlaneDeployment();
  for (const subject of [{}, [], 'victim', { id: 'victim', orgId: 'o', kind: 'user' }, null]) {
    const { hmac, jwk } = await viaBothPaths(fx, { subject });
    assertSubjectRefused(hmac, `hmac ${JSON.stringify(subject)}`);
    assertSubjectRefused(jwk, `jwk ${JSON.stringify(subject)}`);
  }
});

test('DEL-03 claim-like fields beside the request never shape the token', async () => {
  const fx = await createPlaneDeployment();
  const attacker = await harnessThumbprint(fx.keys.attacker.publicJwk);
  const smuggled = {
    act: { sub: 'svc-x' },
    sub: 'victim',
    spa: 'plane',
    callerAccess: 'plane',
    spk: 'api_key',
    principalKind: 'api_key',
    spo: 'org-1',
    orgId: 'org-1',
    spb: PLANE_ID,
    brokerServiceId: PLANE_ID,
    cnf: { jkt: attacker },
    confirmation: { jkt: attacker },
  };
  const { hmac, jwk } = await viaBothPaths(fx, smuggled);
  for (
    const [label, response, service] of [
      ['hmac', hmac, 'svc-caller'],
      ['jwk', jwk, 'svc-jwk'],
    ] as const
  ) {
    if (response.status !== 200) {
      assert.ok(response.status >= 400 && response.status < 500, label);
      continue;
    }
    const { claims } = decodeJws(response.body.token);
    assert.equal(claims.spa, 'service', label);
    assert.equal(claims.sub, service, label);
    for (const name of ['act', 'spk', 'spo', 'spb']) assert.equal(name in claims, false, label);
  }
  if (hmac.status === 200) assert.equal('cnf' in decodeJws(hmac.body.token).claims, false);
  if (jwk.status === 200) {
    assert.deepEqual(decodeJws(jwk.body.token).claims.cnf, {
      jkt: await harnessThumbprint(fx.keys.K1.publicJwk),
    });
  }
});

test('DEL-04 look-alike subject names never yield a delegated token', async () => {
  const fx = await createPlaneDeployment();
  for (const name of ['Subject', 'subject ', 'subjects', 'SUBJECT']) {
    const { hmac, jwk } = await viaBothPaths(fx, { [name]: { id: 'victim', kind: 'user' } });
    for (
      const [path, response, caller] of [
        ['hmac', hmac, 'svc-caller'],
        ['jwk', jwk, 'svc-jwk'],
      ] as const
    ) {
      const label = `${path} ${name}`;
      if (response.status === 200) {
        const { claims } = decodeJws(response.body.token);
        assert.equal(claims.sub, caller, label);
        assert.equal('act' in claims, false, label);
      } else {
        assert.ok(response.status >= 400 && response.status < 500, label);
      }
    }
  }
});

test('DEL-05 (in-process) a user caller with principalKind is delegated', async () => {
  const fx = await createPlaneDeployment();
  using session = fx.plane.abilitySession({
    abilityId: 'svc-a.echo',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    caller: { id: 'alice', kind: 'user', orgId: 'org-1', principalKind: 'api_key' },
  });
  const { identity } = await session.whoami({}) as Report;
  assert.deepEqual(identity.subject, { id: 'alice', orgId: 'org-1', kind: 'api_key' });
  assert.equal(identity.callerAccess, 'plane');
  const { claims } = decodeJws(fx.tokensAt('svc-a')[0]);
  assert.equal(identity.serviceId, (claims.act as { sub: string }).sub);
  assert.equal(identity.serviceId, PLANE_ID);
});

test('DEL-06 (in-process) a user caller without principalKind keeps the legacy shape', async () => {
  const fx = await createPlaneDeployment();
  using session = fx.plane.abilitySession({
    abilityId: 'svc-a.echo',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    caller: { id: 'bob', kind: 'user' },
  });
  const { identity } = await session.whoami({}) as Report;
  assert.deepEqual(identity.subject, { id: 'bob' });
  assert.equal('spk' in decodeJws(fx.tokensAt('svc-a')[0]).claims, false);
});

test('DEL-06 (REST) t-bob, without principalKind, is delegated with the legacy subject shape', async () => {
  const fx = await createPlaneDeployment();
  const response = await fx.rest('GET', '/whoami', { bearer: 't-bob' });
  assert.equal(response.status, 200);
  const { identity } = response.body as Report;
  assert.deepEqual(identity.subject, { id: 'bob' });
  assert.equal(identity.callerAccess, 'plane');
  assert.equal(identity.serviceId, PLANE_ID);
  const { claims } = decodeJws(fx.tokensAt('svc-a')[0]);
  assert.equal(claims.sub, 'bob');
  assert.deepEqual(claims.act, { sub: PLANE_ID });
  for (const name of ['spk', 'spo', 'spb']) assert.equal(name in claims, false, name);
});

test('DEL-05 (REST) t-alice is delegated with her principal kind and organisation', async () => {
  const fx = await createPlaneDeployment();
  const response = await fx.rest('GET', '/whoami', { bearer: 't-alice' });
  const { identity } = response.body as Report;
  assert.deepEqual(identity.subject, { id: 'alice', kind: 'api_key', orgId: 'org-1' });
  assert.equal(identity.callerAccess, 'plane');
});
