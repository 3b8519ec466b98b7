import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { decodeJwt } from 'jose';
import { SvcConfigurationError, svcErrorInfo } from '../../src/core/errors.ts';
import { createControlPlane } from '../../src/plane/control-plane.ts';
import { localService } from '../../src/plane/endpoints.ts';
import { capabilityTokenEntrypoint } from '../../src/plane/token-entrypoint.ts';
import { abilityMethod } from '../../src/service/method.ts';
import { defineAbility } from '../../src/service/ability.ts';
import { createService } from '../../src/service/service.ts';
import { abilitySession } from '../../src/service/ability-session.ts';
import { controlPlaneRpcTokenRequester } from '../../src/service/token-requesters.ts';
import { httpBatchRpc } from '../../src/service/transports/http-batch.ts';
import { testKeys } from '../support/keys.ts';

const ISSUER = 'https://plane.entrypoint.test';

const whoami = defineAbility({
  id: 'svc-a.echo',
  methods: {
    whoami: abilityMethod({
      input: z.object({}),
      output: z.object({ serviceId: z.string(), callerAccess: z.string() }),
      scopes: ['svc-a.read'],
    }),
  },
  handler: ({ identity }) => ({
    whoami: () => ({ serviceId: identity.serviceId, callerAccess: identity.callerAccess }),
  }),
});

async function deployment(seenContexts: unknown[] = []) {
  const keys = await testKeys();
  const plane = createControlPlane({
    id: 'svc-plane',
    issuer: ISSUER,
    signingKeys: [keys.k1.entry],
    services: (context: unknown) => {
      seenContexts.push(context);
      return [
        localService({
          id: 'svc-a',
          service,
          grants: [{ caller: 'svc-caller', scopes: ['svc-a.read'] }],
        }),
      ];
    },
    discoveryCache: false,
    log: false,
  });
  const service = createService({
    id: 'svc-a',
    title: 'Service A',
    version: '1.0.0',
    auth: { jwks: { keys: (await plane.jwks()).keys }, issuer: ISSUER },
    abilities: [whoami],
    logger: false,
  });
  return { plane, service };
}

async function refusal(promise: Promise<unknown>) {
  const error = await promise.then(
    () => assert.fail('expected a refusal'),
    (caught: unknown) => caught,
  );
  return svcErrorInfo(error);
}

test('controlPlaneRpcTokenRequester round-trips through the entrypoint to a working session', async () => {
  const { plane, service } = await deployment();
  const entrypoint = capabilityTokenEntrypoint(plane, { callerServiceId: 'svc-caller' });
  const requester = controlPlaneRpcTokenRequester({
    binding: entrypoint,
    callerServiceId: 'svc-caller',
  });
  const token = await requester({
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    abilityId: 'svc-a.echo',
    scopes: ['svc-a.read'],
  });
  const claims = decodeJwt(token);
  assert.equal(claims.sub, 'svc-caller');
  assert.equal(claims.aud, 'svc-a');
  assert.equal(claims.spa, 'service');
  assert.deepEqual(claims.scp, ['svc-a.read']);
  assert.equal(claims.cnf, undefined);

  using session = abilitySession<{ whoami(input: object): { serviceId: string } }>({
    abilityId: 'svc-a.echo',
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    requestToken: requester,
    transport: httpBatchRpc((request) => service.fetch(request)),
  });
  assert.deepEqual(await session.whoami({}), { serviceId: 'svc-caller', callerAccess: 'service' });
});

test('the entrypoint answers with the token endpoint body shape', async () => {
  const { plane } = await deployment();
  const entrypoint = capabilityTokenEntrypoint(plane, { callerServiceId: 'svc-caller' });
  const before = Date.now();
  const answer = await entrypoint.requestCapabilityToken({
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    ttlSeconds: 60,
  });
  assert.deepEqual(Object.keys(answer).sort(), [
    'expiresAt',
    'expiresIn',
    'scopes',
    'token',
    'tokenType',
  ]);
  assert.equal(answer.tokenType, 'svc-capability');
  assert.deepEqual(answer.scopes, ['svc-a.read']);
  assert.ok(answer.expiresIn > 0 && answer.expiresIn <= 60, `expiresIn ${answer.expiresIn}`);
  const expiresAt = Date.parse(answer.expiresAt);
  assert.ok(expiresAt >= before + 58_000 && expiresAt <= Date.now() + 61_000);
  assert.equal(decodeJwt(answer.token).exp, Math.floor(expiresAt / 1000));
});

test('a request naming another caller is refused with 403 caller_mismatch', async () => {
  const { plane } = await deployment();
  const entrypoint = capabilityTokenEntrypoint(plane, { callerServiceId: 'svc-caller' });
  for (const callerServiceId of ['svc-other', '', undefined]) {
    const info = await refusal(entrypoint.requestCapabilityToken({
      callerServiceId,
      targetServiceId: 'svc-a',
      scopes: ['svc-a.read'],
    } as never));
    assert.deepEqual(info, {
      code: 'capability_auth',
      status: 403,
      retryable: false,
      reason: 'caller_mismatch',
    });
  }
});

test('DEL (binding entrypoint) a subject is refused with 403 before anything is issued', async () => {
  const seen: unknown[] = [];
  const { plane } = await deployment(seen);
  const entrypoint = capabilityTokenEntrypoint(plane, { callerServiceId: 'svc-caller' });
  const info = await refusal(entrypoint.requestCapabilityToken({
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    subject: { id: 'user-1' },
  } as never));
  assert.equal(info.status, 403);
  assert.equal(info.reason, 'subject_not_allowed');
  assert.equal(seen.length, 0, 'the catalog was never consulted');
});

test('members beyond the accepted ones never reach the issuer', async () => {
  const { plane } = await deployment();
  const entrypoint = capabilityTokenEntrypoint(plane, { callerServiceId: 'svc-caller' });
  const answer = await entrypoint.requestCapabilityToken({
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    callerAccess: 'plane',
    confirmationJkt: 'A'.repeat(43),
    caller: { clientId: 'x', serviceId: 'svc-other' },
  } as never);
  const claims = decodeJwt(answer.token);
  assert.equal(claims.sub, 'svc-caller');
  assert.equal(claims.spa, 'service');
  assert.equal(claims.cnf, undefined);
});

test('malformed requests are refused with 422 invalid_token_request and issues', async () => {
  const { plane } = await deployment();
  const entrypoint = capabilityTokenEntrypoint(plane, { callerServiceId: 'svc-caller' });
  const cases: unknown[] = [
    null,
    'svc-a',
    { callerServiceId: 'svc-caller', targetServiceId: 'svc-a', scopes: [] },
    { callerServiceId: 'svc-caller', targetServiceId: '', scopes: ['svc-a.read'] },
    { callerServiceId: 'svc-caller', targetServiceId: 'svc-a', scopes: ['svc-a.read', 7] },
    {
      callerServiceId: 'svc-caller',
      targetServiceId: 'svc-a',
      scopes: ['svc-a.read'],
      ttlSeconds: 1.5,
    },
    {
      callerServiceId: 'svc-caller',
      targetServiceId: 'svc-a',
      scopes: ['svc-a.read'],
      abilityId: '',
    },
  ];
  for (const request of cases) {
    const error = await entrypoint.requestCapabilityToken(request as never).then(
      () => assert.fail(`accepted ${JSON.stringify(request)}`),
      (caught: { issues?: unknown[] }) => caught,
    );
    const info = svcErrorInfo(error);
    assert.equal(info.code, 'ability_validation', JSON.stringify(request));
    assert.equal(info.status, 422);
    assert.equal(info.reason, 'invalid_token_request');
    assert.ok(Array.isArray(error.issues) && error.issues.length > 0);
  }
});

test('the grant check runs: refusals keep their taxonomy through the requester', async () => {
  const { plane } = await deployment();
  const requester = controlPlaneRpcTokenRequester({
    binding: capabilityTokenEntrypoint(plane, { callerServiceId: 'svc-caller' }),
    callerServiceId: 'svc-caller',
  });
  const unknownScope = await refusal(requester({
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    abilityId: 'svc-a.echo',
    scopes: ['svc-a.write'],
  }));
  assert.deepEqual(unknownScope, {
    code: 'capability_auth',
    status: 403,
    retryable: false,
    reason: 'unknown_scope',
  });
  const ungranted = controlPlaneRpcTokenRequester({
    binding: capabilityTokenEntrypoint(plane, { callerServiceId: 'svc-other' }),
    callerServiceId: 'svc-other',
  });
  const denied = await refusal(ungranted({
    callerServiceId: 'svc-other',
    targetServiceId: 'svc-a',
    abilityId: 'svc-a.echo',
    scopes: ['svc-a.read'],
  }));
  assert.equal(denied.reason, 'grant_denied');
  assert.equal(denied.status, 403);
});

test('the configured context reaches services(context)', async () => {
  const seen: unknown[] = [];
  const { plane } = await deployment(seen);
  const env = { marker: 'entrypoint env' };
  const entrypoint = capabilityTokenEntrypoint(plane, {
    callerServiceId: 'svc-caller',
    context: env,
  });
  await entrypoint.requestCapabilityToken({
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
  });
  assert.ok(seen.includes(env));
});

test('capabilityTokenEntrypoint refuses a missing plane or caller id at construction', async () => {
  const { plane } = await deployment();
  for (
    const build of [
      () => capabilityTokenEntrypoint({} as never, { callerServiceId: 'svc-caller' }),
      () => capabilityTokenEntrypoint(plane, { callerServiceId: '' }),
      () => capabilityTokenEntrypoint(plane, undefined as never),
    ]
  ) {
    assert.throws(build, SvcConfigurationError);
  }
});
