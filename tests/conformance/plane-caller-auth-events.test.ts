// Contract "Events" for caller authentication: `svc.caller_auth.not_configured`,
// `svc.caller_auth.hmac_unauthorized` and `svc.caller_auth.jwk_unauthorized`, each one JSON
// object with `event`, `level`, `requestId` and a `reason` naming the failed check, delivered
// once per refusal with the request context as the log callback's second argument.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SvcLogEvent } from '../../src/core/logging.ts';
import { hmacServiceClientAuth } from '../../src/plane/caller-auth-hmac.ts';
import { jwkServiceClientAuth } from '../../src/plane/caller-auth-jwk.ts';
import {
  createPlaneDeployment,
  HMAC_SECRETS,
  hmacTokenRequest,
  ISS,
  jwkTokenRequest,
  type PlaneDeployment,
  TOKEN_URL,
  tokenBody,
} from './plane-fixture.ts';

const ALLOWED_FIELDS = new Set(['event', 'level', 'requestId', 'reason', 'clientId']);

/** Sends one request and returns the caller-auth events it caused, with their contexts. */
async function refusalEvents(fx: PlaneDeployment, request: Request) {
  const from = fx.events.length;
  const response = await fx.send(request);
  const indexes = fx.events.map((_, index) => index).slice(from).filter((index) =>
    fx.events[index].event.startsWith('svc.caller_auth.')
  );
  return {
    response,
    events: indexes.map((index) => fx.events[index]),
    contexts: indexes.map((index) => fx.eventContexts[index]),
  };
}

test('Caller-auth events: not_configured is logged once per refused request, with its reason', async () => {
  const fx = await createPlaneDeployment({ authenticateCaller: false });
  const { response, events } = await refusalEvents(fx, await hmacTokenRequest(tokenBody()));
  assert.equal(response.status, 401);
  assert.equal(events.length, 1);
  assert.equal(events[0].event, 'svc.caller_auth.not_configured');
  assert.equal(events[0].level, 'warn');
  // Contract "Events": the caller-auth events carry a `reason` naming the failed check.
  assert.equal(events[0].reason, 'no_caller_authentication');
  assert.equal(events[0].requestId, response.headers.get('X-Request-Id'));
});

test('Caller-auth events: hmac_unauthorized names the failed check', async () => {
  const fx = await createPlaneDeployment();
  const now = Math.floor(Date.now() / 1000);
  const cases: [string, Request, string | undefined][] = [
    [
      'authorization_missing',
      await hmacTokenRequest(tokenBody(), { headers: { Authorization: null } }),
      undefined,
    ],
    [
      'client_id_missing',
      await hmacTokenRequest(tokenBody(), { headers: { 'X-Svc-Client-Id': null } }),
      undefined,
    ],
    ['unknown_client', await hmacTokenRequest(tokenBody(), { clientId: 'hc9' }), undefined],
    [
      'timestamp_missing',
      await hmacTokenRequest(tokenBody(), { headers: { 'X-Svc-Timestamp': null } }),
      'hc1',
    ],
    [
      'timestamp_malformed',
      await hmacTokenRequest(tokenBody(), { headers: { 'X-Svc-Timestamp': 'yesterday' } }),
      'hc1',
    ],
    [
      'timestamp_out_of_window',
      await hmacTokenRequest(tokenBody(), { timestampSeconds: now - 75 }),
      'hc1',
    ],
    [
      'request_id_missing',
      await hmacTokenRequest(tokenBody(), { headers: { 'X-Request-Id': null } }),
      'hc1',
    ],
    [
      'signature_mismatch',
      await hmacTokenRequest(tokenBody(), { secret: 'not-the-secret' }),
      'hc1',
    ],
  ];
  for (const [reason, request, clientId] of cases) {
    const { response, events: all } = await refusalEvents(fx, request);
    assert.equal(response.status, 401, reason);
    // A request naming no scheme at all is reported to every configured scheme's own log.
    const events = all.filter((event) => event.event === 'svc.caller_auth.hmac_unauthorized');
    assert.equal(all.length, reason === 'authorization_missing' ? 2 : 1, reason);
    assert.equal(events.length, 1, reason);
    const [event] = events;
    assert.equal(event.event, 'svc.caller_auth.hmac_unauthorized', reason);
    assert.equal(event.level, 'warn');
    assert.equal(event.reason, reason);
    assert.equal(event.requestId, response.headers.get('X-Request-Id'), reason);
    assert.equal(event.clientId, clientId, reason);
    for (const field of Object.keys(event)) assert.ok(ALLOWED_FIELDS.has(field), field);
  }
});

test('Caller-auth events: jwk_unauthorized names the failed check', async () => {
  const fx = await createPlaneDeployment();
  const body = tokenBody({ callerServiceId: 'svc-jwk' });
  const now = Math.floor(Date.now() / 1000);
  const cases: [string, Request][] = [
    ['unknown_client', await jwkTokenRequest(body, { claims: { iss: 'jc9', sub: 'jc9' } })],
    ['unknown_key', await jwkTokenRequest(body, { header: { kid: 'jk9' } })],
    [
      'signature_mismatch',
      await jwkTokenRequest(body, { key: fx.keys.attacker, header: { kid: 'jk1' } }),
    ],
    ['audience_mismatch', await jwkTokenRequest(body, { claims: { aud: `${ISS}/other` } })],
    [
      'assertion_expired',
      await jwkTokenRequest(body, { claims: { iat: now - 400, exp: now - 100 } }),
    ],
    [
      'assertion_header_not_allowed',
      await jwkTokenRequest(body, { header: { jku: 'https://evil.test/jwks' } }),
    ],
    ['request_id_mismatch', await jwkTokenRequest(body, { send: { requestId: 'other-id' } })],
    [
      'body_hash_mismatch',
      await jwkTokenRequest(body, { send: { body: JSON.stringify(tokenBody()) } }),
    ],
  ];
  for (const [reason, request] of cases) {
    const { response, events } = await refusalEvents(fx, request);
    assert.equal(response.status, 401, reason);
    assert.equal(events.length, 1, reason);
    assert.equal(events[0].event, 'svc.caller_auth.jwk_unauthorized', reason);
    assert.equal(events[0].reason, reason);
    assert.equal(events[0].requestId, response.headers.get('X-Request-Id'), reason);
    for (const field of Object.keys(events[0])) assert.ok(ALLOWED_FIELDS.has(field), field);
  }
});

test('Caller-auth events: a malformed header is reported to the scheme it names', async () => {
  const fx = await createPlaneDeployment();
  const jwk = await refusalEvents(
    fx,
    await jwkTokenRequest(tokenBody(), { authorization: 'Svc-JWK' }),
  );
  assert.deepEqual(jwk.events.map((event) => [event.event, event.reason]), [
    ['svc.caller_auth.jwk_unauthorized', 'authorization_malformed'],
  ]);
  const hmac = await refusalEvents(
    fx,
    await hmacTokenRequest(tokenBody(), { headers: { Authorization: 'Svc-HMAC-SHA256 a b' } }),
  );
  assert.deepEqual(hmac.events.map((event) => [event.event, event.reason]), [
    ['svc.caller_auth.hmac_unauthorized', 'authorization_malformed'],
  ]);
});

test('Caller-auth events: the log callback receives the request context', async () => {
  const fx = await createPlaneDeployment();
  const env = { MARKER: 'request-env' };
  const request = await hmacTokenRequest(tokenBody(), { secret: 'not-the-secret' });
  const from = fx.events.length;
  await fx.send(request, env);
  const index = fx.events.findIndex((event, i) =>
    i >= from && event.event === 'svc.caller_auth.hmac_unauthorized'
  );
  const context = fx.eventContexts[index] as { env?: unknown; req?: { url?: string } };
  assert.equal(context?.env, env);
  assert.equal(context?.req?.url, TOKEN_URL);
  const unconfigured = await createPlaneDeployment({ authenticateCaller: false });
  await unconfigured.send(await hmacTokenRequest(tokenBody()), env);
  assert.equal((unconfigured.eventContexts.at(-1) as { env?: unknown })?.env, env);
});

test('Caller-auth events: an accepted token request emits none', async () => {
  const fx = await createPlaneDeployment();
  const hmac = await refusalEvents(fx, await hmacTokenRequest(tokenBody()));
  const jwk = await refusalEvents(
    fx,
    await jwkTokenRequest(tokenBody({ callerServiceId: 'svc-jwk' })),
  );
  assert.equal(hmac.response.status, 200);
  assert.equal(jwk.response.status, 200);
  assert.deepEqual([...hmac.events, ...jwk.events], []);
});

test("Caller-auth events: an authenticator's refusals go to its own log, and log: false silences them", async () => {
  const fx = await createPlaneDeployment();
  const own: SvcLogEvent[] = [];
  const authenticators = (log: ((event: SvcLogEvent) => void) | false) => [
    hmacServiceClientAuth({
      clients: { hc1: { serviceId: 'svc-caller', secret: HMAC_SECRETS.hc1 } },
      log,
    }),
    jwkServiceClientAuth({
      clients: { jc1: { serviceId: 'svc-jwk', keys: [fx.keys.K1.publicJwk] } },
      log,
    }),
  ];
  const refusedRequests = async () => [
    await hmacTokenRequest(tokenBody(), { secret: 'not-the-secret' }),
    await jwkTokenRequest(tokenBody({ callerServiceId: 'svc-jwk' }), { key: fx.keys.K2 }),
  ];
  const planeEvents = () => fx.events.filter((event) => event.event.startsWith('svc.caller_auth.'));

  const withOwnLog = fx.replica(['k1'], { authenticateCaller: authenticators((e) => own.push(e)) });
  for (const request of await refusedRequests()) {
    assert.equal((await withOwnLog.fetch(request)).status, 401);
  }
  assert.deepEqual(own.map((event) => event.event), [
    'svc.caller_auth.hmac_unauthorized',
    'svc.caller_auth.jwk_unauthorized',
  ]);
  assert.deepEqual(planeEvents(), [], "the plane's own log gets none of them");

  const silenced = fx.replica(['k1'], { authenticateCaller: authenticators(false) });
  for (const request of await refusedRequests()) {
    assert.equal((await silenced.fetch(request)).status, 401);
  }
  assert.equal(own.length, 2);
  assert.deepEqual(planeEvents(), []);
});
