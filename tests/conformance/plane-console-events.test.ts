// Contract "Events", default sink, for the plane and its caller authenticators: without a `log`
// option each event is one JSON line on the console; `log: false` discards events.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { hmacServiceClientAuth } from '../../src/plane/caller-auth-hmac.ts';
import { jwkServiceClientAuth } from '../../src/plane/caller-auth-jwk.ts';
import { createControlPlane } from '../../src/plane/control-plane.ts';
import {
  createPlaneDeployment,
  HMAC_SECRETS,
  hmacTokenRequest,
  PLANE_ID,
  planeKeys,
  readResponse,
  tokenBody,
} from './plane-fixture.ts';

type ConsoleMethod = 'log' | 'warn' | 'error';

/** Runs `work` with console.log/warn/error captured, and restores them whatever happens. */
async function capturingConsole<T>(work: () => Promise<T>): Promise<[T, string[]]> {
  const lines: string[] = [];
  const original: Record<ConsoleMethod, (...args: unknown[]) => void> = {
    log: console.log,
    warn: console.warn,
    error: console.error,
  };
  const capture = (...args: unknown[]) => void lines.push(args.map(String).join(' '));
  try {
    for (const method of Object.keys(original) as ConsoleMethod[]) console[method] = capture;
    return [await work(), lines];
  } finally {
    Object.assign(console, original);
  }
}

test('Caller-auth events: without a log option a refusal is one JSON line on the console', async () => {
  const keys = await planeKeys();
  const fx = await createPlaneDeployment({
    authenticateCaller: [
      hmacServiceClientAuth({
        clients: { hc1: { serviceId: 'svc-caller', secret: HMAC_SECRETS.hc1 } },
      }),
      jwkServiceClientAuth({
        clients: { jc1: { serviceId: 'svc-jwk', keys: [keys.K1.publicJwk] } },
      }),
    ],
  });
  const request = await hmacTokenRequest(tokenBody(), { secret: 'not-the-secret' });
  const [response, lines] = await capturingConsole(() => fx.send(request));
  assert.equal(response.status, 401);
  assert.equal(lines.length, 1, lines.join('\n'));
  const event = JSON.parse(lines[0]);
  assert.equal(event.event, 'svc.caller_auth.hmac_unauthorized');
  assert.equal(event.level, 'warn');
  assert.equal(event.reason, 'signature_mismatch');
  assert.equal(event.requestId, response.headers.get('X-Request-Id'));
});

test('Caller-auth events: not_configured goes to the console by default, and nowhere with log: false', async () => {
  const keys = await planeKeys();
  const plane = (options: { log?: false }) =>
    createControlPlane({
      id: PLANE_ID,
      signingKeys: [{ kid: 'k1', secret: keys.k1.privateJwk }],
      services: [],
      ...options,
    });
  const send = async (options: { log?: false }) =>
    await readResponse(await plane(options).fetch(await hmacTokenRequest(tokenBody())));
  const [response, lines] = await capturingConsole(() => send({}));
  assert.equal(response.status, 401);
  assert.equal(lines.length, 1, lines.join('\n'));
  const event = JSON.parse(lines[0]);
  assert.equal(event.event, 'svc.caller_auth.not_configured');
  assert.equal(event.reason, 'no_caller_authentication');
  assert.equal(event.requestId, response.headers.get('X-Request-Id'));
  const [silenced, silent] = await capturingConsole(() => send({ log: false }));
  assert.equal(silenced.status, 401);
  assert.deepEqual(silent, []);
});
