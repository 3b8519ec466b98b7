import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { decodeJwt } from 'jose';
import {
  CapabilityAuthError,
  SvcConfigurationError,
  svcErrorInfo,
  SvcInternalError,
} from '../../src/core/errors.ts';
import type { SvcLogEvent } from '../../src/core/logging.ts';
import { createControlPlane } from '../../src/plane/control-plane.ts';
import { localService } from '../../src/plane/endpoints.ts';
import {
  capabilityTokenEntrypoint,
  type CapabilityTokenEntrypointAnswer,
  type CapabilityTokenEntrypointError,
  type CapabilityTokenEntrypointResponse,
  MAX_ENTRYPOINT_ERROR_MESSAGE_LENGTH,
  type TokenIssuingPlane,
} from '../../src/plane/token-entrypoint.ts';
import { abilityMethod } from '../../src/service/method.ts';
import { defineAbility } from '../../src/service/ability.ts';
import { createService } from '../../src/service/service.ts';
import { abilitySession } from '../../src/caller/ability-session.ts';
import { controlPlaneRpcTokenRequester } from '../../src/caller/token-requesters.ts';
import { httpBatchRpc } from '../../src/caller/transports/http-batch.ts';
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

/** The refusal an entrypoint answered: `{ error }` and nothing else, as plain data. */
function answeredRefusal(answer: CapabilityTokenEntrypointAnswer): CapabilityTokenEntrypointError {
  assert.deepEqual(Object.keys(answer), ['error'], 'a refusal carries no token member');
  assert.equal(Object.getPrototypeOf(answer.error), Object.prototype, 'plain data, not an Error');
  return answer.error as CapabilityTokenEntrypointError;
}

/** The token an entrypoint minted. */
function minted(answer: CapabilityTokenEntrypointAnswer): CapabilityTokenEntrypointResponse {
  assert.equal(answer.error, undefined, `refused: ${JSON.stringify(answer.error)}`);
  return answer as CapabilityTokenEntrypointResponse;
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
  const answer = minted(
    await entrypoint.requestCapabilityToken({
      callerServiceId: 'svc-caller',
      targetServiceId: 'svc-a',
      scopes: ['svc-a.read'],
      ttlSeconds: 60,
    }),
  );
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
    const error = answeredRefusal(
      await entrypoint.requestCapabilityToken({
        callerServiceId,
        targetServiceId: 'svc-a',
        scopes: ['svc-a.read'],
      } as never),
    );
    assert.deepEqual(error, {
      code: 'capability_auth',
      status: 403,
      retryable: false,
      reason: 'caller_mismatch',
      message: 'This entrypoint issues tokens for svc-caller only',
    });
  }
});

test('DEL (binding entrypoint) a subject is refused with 403 before anything is issued', async () => {
  const seen: unknown[] = [];
  const { plane } = await deployment(seen);
  const entrypoint = capabilityTokenEntrypoint(plane, { callerServiceId: 'svc-caller' });
  const info = answeredRefusal(
    await entrypoint.requestCapabilityToken({
      callerServiceId: 'svc-caller',
      targetServiceId: 'svc-a',
      scopes: ['svc-a.read'],
      subject: { id: 'user-1' },
    } as never),
  );
  assert.equal(info.code, 'capability_auth');
  assert.equal(info.status, 403);
  assert.equal(info.reason, 'subject_not_allowed');
  assert.equal(seen.length, 0, 'the catalog was never consulted');
});

test('members beyond the accepted ones never reach the issuer', async () => {
  const { plane } = await deployment();
  const entrypoint = capabilityTokenEntrypoint(plane, { callerServiceId: 'svc-caller' });
  const answer = minted(
    await entrypoint.requestCapabilityToken({
      callerServiceId: 'svc-caller',
      targetServiceId: 'svc-a',
      scopes: ['svc-a.read'],
      callerAccess: 'plane',
      confirmationJkt: 'A'.repeat(43),
      caller: { clientId: 'x', serviceId: 'svc-other' },
    } as never),
  );
  const claims = decodeJwt(answer.token);
  assert.equal(claims.sub, 'svc-caller');
  assert.equal(claims.spa, 'service');
  assert.equal(claims.cnf, undefined);
});

test('malformed requests are refused with 422 invalid_token_request naming the member', async () => {
  const { plane } = await deployment();
  const entrypoint = capabilityTokenEntrypoint(plane, { callerServiceId: 'svc-caller' });
  const base = { callerServiceId: 'svc-caller', targetServiceId: 'svc-a', scopes: ['svc-a.read'] };
  const cases: [unknown, RegExp][] = [
    [null, /expected an object|must be an object/],
    ['svc-a', /must be an object/],
    [{ ...base, scopes: [] }, /scopes: scopes must be a non-empty array/],
    [{ ...base, targetServiceId: '' }, /targetServiceId: targetServiceId must be/],
    [{ ...base, scopes: ['svc-a.read', 7] }, /scopes\.1: a scope must be a non-empty string/],
    [{ ...base, ttlSeconds: 1.5 }, /ttlSeconds: ttlSeconds must be a positive integer/],
    [{ ...base, abilityId: '' }, /abilityId: abilityId must be a non-empty string/],
  ];
  for (const [request, names] of cases) {
    const error = answeredRefusal(await entrypoint.requestCapabilityToken(request as never));
    assert.equal(error.code, 'ability_validation', JSON.stringify(request));
    assert.equal(error.status, 422);
    assert.equal(error.retryable, false);
    assert.equal(error.reason, 'invalid_token_request');
    assert.match(error.message, names, JSON.stringify(request));
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

/** A plane whose issuance fails with `failure`, for the entrypoint's handling of each kind. */
function failingPlane(failure: unknown): TokenIssuingPlane {
  return { issueCapabilityTokenForCaller: () => Promise.reject(failure) };
}

const VALID_REQUEST = {
  callerServiceId: 'svc-caller',
  targetServiceId: 'svc-a',
  scopes: ['svc-a.read'],
};

test('a plane refusal is answered as { error } data that survives structured cloning', async () => {
  const { plane } = await deployment();
  const entrypoint = capabilityTokenEntrypoint(plane, { callerServiceId: 'svc-other' });
  const answer = await entrypoint.requestCapabilityToken({
    ...VALID_REQUEST,
    callerServiceId: 'svc-other',
  });
  const error = answeredRefusal(answer);
  assert.deepEqual(
    { ...error, message: typeof error.message },
    {
      code: 'capability_auth',
      status: 403,
      retryable: false,
      reason: 'grant_denied',
      message: 'string',
    },
  );
  assert.ok(error.message.length > 0);
  // What a service binding does to an answer: a clone of plain data loses nothing.
  assert.deepEqual(structuredClone(answer), answer);
});

test('issuance failures keep their taxonomy in the answer, transient ones included', async () => {
  const failures: [unknown, Omit<CapabilityTokenEntrypointError, 'message'>][] = [
    [
      new CapabilityAuthError('Unknown target service "svc-x"', {
        status: 403,
        reason: 'unknown_target',
      }),
      { code: 'capability_auth', status: 403, retryable: false, reason: 'unknown_target' },
    ],
    [
      new SvcInternalError('Target service "svc-a" is unreachable', {
        reason: 'target_unreachable',
      }),
      { code: 'internal', status: 500, retryable: false, reason: 'target_unreachable' },
    ],
    [
      new SvcInternalError('busy', { reason: 'catalog_unavailable', status: 503 }),
      { code: 'internal', status: 503, retryable: true, reason: 'catalog_unavailable' },
    ],
  ];
  for (const [failure, expected] of failures) {
    const events: SvcLogEvent[] = [];
    const entrypoint = capabilityTokenEntrypoint(failingPlane(failure), {
      callerServiceId: 'svc-caller',
      log: (event) => events.push(event),
    });
    const error = answeredRefusal(await entrypoint.requestCapabilityToken(VALID_REQUEST));
    assert.deepEqual(error, { ...expected, message: (failure as Error).message });
    // As the token endpoint does, every answer the plane could not serve (5xx) is logged once.
    assert.deepEqual(
      events.map((event) => [event.event, event.status]),
      expected.status >= 500 ? [['svc.plane.request_failed', expected.status]] : [],
    );
  }
});

test('a refusal message is cut to its bound, and a refusal without one gets a default', async () => {
  const long = new CapabilityAuthError('x'.repeat(100_000), {
    status: 403,
    reason: 'grant_denied',
  });
  const bounded = answeredRefusal(
    await capabilityTokenEntrypoint(failingPlane(long), { callerServiceId: 'svc-caller' })
      .requestCapabilityToken(VALID_REQUEST),
  );
  assert.equal(bounded.message.length, MAX_ENTRYPOINT_ERROR_MESSAGE_LENGTH);
  const bare = { code: 'capability_auth', status: 403, reason: 'grant_denied' };
  const defaulted = answeredRefusal(
    await capabilityTokenEntrypoint(failingPlane(bare), { callerServiceId: 'svc-caller' })
      .requestCapabilityToken(VALID_REQUEST),
  );
  assert.equal(defaulted.message, 'Capability token request refused');
  assert.equal(defaulted.reason, 'grant_denied');
});

test('a bug or a configuration error answers an opaque internal error, logged for the operator', async () => {
  const bug = new TypeError('cannot read properties of undefined');
  const misconfigured = new SvcConfigurationError('services[0]: `binding` holds secret-ish text');
  for (const failure of [bug, misconfigured, 'a thrown string']) {
    const events: SvcLogEvent[] = [];
    const entrypoint = capabilityTokenEntrypoint(failingPlane(failure), {
      callerServiceId: 'svc-caller',
      log: (event) => events.push(event),
    });
    const answer = await entrypoint.requestCapabilityToken(VALID_REQUEST);
    const error = answeredRefusal(answer);
    assert.deepEqual(error, {
      code: 'internal',
      status: 500,
      retryable: false,
      message: 'Internal error',
    });
    assert.equal(JSON.stringify(answer).includes('secret-ish'), false, 'nothing of the cause');
    assert.equal(events.length, 1);
    const [event] = events;
    assert.equal(event.event, 'svc.plane.request_failed');
    assert.equal(event.level, 'error');
    assert.equal(event.method, 'RPC');
    assert.equal(event.path, 'requestCapabilityToken');
    assert.equal(event.status, 500);
    assert.equal(typeof event.requestId, 'string');
    const logged = event.error as { name: string; message: string };
    assert.equal(logged.message, failure instanceof Error ? failure.message : failure);
  }
  // `log: false` silences it, and an unknown option is refused.
  const quiet = capabilityTokenEntrypoint(failingPlane(bug), {
    callerServiceId: 'svc-caller',
    log: false,
  });
  assert.equal(answeredRefusal(await quiet.requestCapabilityToken(VALID_REQUEST)).status, 500);
  assert.throws(
    () =>
      capabilityTokenEntrypoint(failingPlane(bug), { callerServiceId: 'c', logger: 1 } as never),
    SvcConfigurationError,
  );
});
