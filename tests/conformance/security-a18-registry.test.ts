// Security checklist A18 (discovery and registry) with harness fake services registered in the
// real plane's catalog: crafted discovery documents are accepted only under the identity their
// endpoint configuration gives them, and only when they are consistent.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { SvcConfigurationError } from '../../src/core/errors.ts';
import { cloudflareServiceBinding, httpService } from '../../src/plane/endpoints.ts';
import { defineAbility } from '../../src/service/ability.ts';
import { abilityMethod } from '../../src/service/method.ts';
import { createService } from '../../src/service/service.ts';
import {
  assertRefusal,
  createPlaneDeployment,
  discoveryDocumentOf,
  fakeService,
  hmacTokenRequest,
  ISS,
  PLANE_ID,
  type PlaneDeployment,
  tokenBody,
} from './plane-fixture.ts';

const FAKE = 'svc-fake';
const fakeRequest = tokenBody({ targetServiceId: FAKE, scopes: [`${FAKE}.read`] });

async function withFake(document: unknown) {
  const fake = fakeService(FAKE, document);
  const fx = await createPlaneDeployment({ extraServices: [fake.endpoint] });
  return { fx, fake };
}

async function assertOthersUnaffected(fx: PlaneDeployment): Promise<void> {
  assert.equal((await fx.send(await hmacTokenRequest(tokenBody()))).status, 200);
}

test('REG-00 (control) a fake service with a consistent document is accepted', async () => {
  const { fx, fake } = await withFake(await discoveryDocumentOf(FAKE));
  const response = await fx.send(await hmacTokenRequest(fakeRequest));
  assert.equal(response.status, 200);
  assert.deepEqual(fake.received, ['/.well-known/svc/service.json']);
});

test('REG-01 a discovery id other than the endpoint id is not accepted', async () => {
  for (const claimed of ['svc-imposter', 'svc-a']) {
    const document = { ...(await discoveryDocumentOf(claimed)) };
    const { fx } = await withFake(document);
    const response = await fx.send(await hmacTokenRequest(fakeRequest));
    assert.equal(response.status, 403, claimed);
    assert.equal(response.body.reason, 'unknown_target', claimed);
    assert.equal(response.body.token, undefined);
    using session = fx.plane.abilitySession({
      abilityId: `${FAKE}.echo`,
      targetServiceId: FAKE,
      scopes: [`${FAKE}.read`],
    });
    await assertRefusal(session.whoami({}), { status: 403, reason: 'unknown_target' });
    await assertOthersUnaffected(fx);
  }
});

test('REG-02 a capabilities.serviceId other than the endpoint id is not accepted', async () => {
  const base = await discoveryDocumentOf(FAKE);
  const { fx } = await withFake({
    ...base,
    capabilities: { serviceId: 'svc-imposter', scopes: { [`${FAKE}.read`]: {} } },
  });
  const response = await fx.send(await hmacTokenRequest(fakeRequest));
  assert.equal(response.status, 403);
  assert.equal(response.body.reason, 'unknown_target');
  await assertOthersUnaffected(fx);
  const consistent = await withFake({
    ...base,
    capabilities: { serviceId: FAKE, scopes: { [`${FAKE}.read`]: {} } },
  });
  assert.equal((await consistent.fx.send(await hmacTokenRequest(fakeRequest))).status, 200);
});

test('REG-03 a REST path variable that is not a top-level input field rejects the document', async () => {
  const base = await discoveryDocumentOf(FAKE) as {
    abilities: { methods: Record<string, Record<string, unknown>> }[];
  };
  const document = structuredClone(base);
  document.abilities[0].methods.whoami.rest = { method: 'get', path: '/items/{nope}', status: 200 };
  const { fx } = await withFake(document);
  const response = await fx.send(await hmacTokenRequest(fakeRequest));
  assert.equal(response.status, 403);
  assert.equal(response.body.reason, 'unknown_target');
  assert.equal(response.body.token, undefined);
  const [event] = fx.eventsNamed('svc.catalog.target_failed');
  assert.equal(event.target, FAKE);
  assert.match(String(event.detail), /nope/);
  await assertOthersUnaffected(fx);
  // The same document with a path that names no variable is accepted.
  const fixed = structuredClone(base);
  fixed.abilities[0].methods.whoami.rest = { method: 'get', path: '/items', status: 200 };
  const control = await withFake(fixed);
  assert.equal((await control.fx.send(await hmacTokenRequest(fakeRequest))).status, 200);
});

test('REG-04 a streaming method offered over HTTP-batch only refuses the service at setup', () => {
  assert.throws(
    () =>
      createService({
        id: 'svc-stream',
        title: 'Streaming over batch',
        version: '1.0.0',
        auth: { jwks: { keys: [] }, issuer: ISS },
        abilities: [
          defineAbility({
            id: 'svc-stream.ticks',
            rpc: { transports: ['http-batch'] },
            methods: {
              ticks: abilityMethod({
                input: z.object({ n: z.number() }),
                output: z.object({ i: z.number() }),
                stream: true,
              }),
            },
            handler: () => ({
              async *ticks() {
                yield { i: 0 };
              },
            }),
          }),
        ],
        logger: false,
      }),
    (error: unknown) => error instanceof SvcConfigurationError && /stream/i.test(error.message),
  );
});

/** Grants for the fake: the HMAC caller and the plane's own in-process sessions. */
const FAKE_GRANTS = [
  { caller: 'svc-caller', scopes: [`${FAKE}.read`] },
  { caller: PLANE_ID, scopes: [`${FAKE}.read`] },
];

/** The fake's document with its whoami ability served at `rpcPath` over `transports`. */
async function documentWithRpc(rpcPath: string, transports = ['http-batch', 'websocket']) {
  const document = structuredClone(await discoveryDocumentOf(FAKE)) as {
    abilities: { rpc: { path: string; transports: string[] } }[];
  };
  document.abilities[0].rpc = { path: rpcPath, transports };
  return document;
}

/** A plane session with the fake's ability is refused: the plane does not accept its document. */
async function assertSessionRefusesFake(fx: PlaneDeployment): Promise<void> {
  using session = fx.plane.abilitySession({
    abilityId: `${FAKE}.echo`,
    targetServiceId: FAKE,
    scopes: [`${FAKE}.read`],
  });
  await assertRefusal(session.whoami({}), {
    code: 'capability_auth',
    status: 403,
    reason: 'unknown_target',
  });
}

/**
 * The fake behind a gateway it shares with another service (`/svc-fake/` and `/svc-a/` on one
 * host), answering discovery with `document` and recording every other request it is sent.
 */
function fakeBehindSharedGateway(document: unknown) {
  const sent: string[] = [];
  const endpoint = httpService({
    id: FAKE,
    url: `https://gw.example/${FAKE}/`,
    grants: FAKE_GRANTS,
    fetch: (request) => {
      if (new URL(request.url).pathname === `/${FAKE}/.well-known/svc/service.json`) {
        return Promise.resolve(Response.json(document));
      }
      sent.push(request.url);
      return Promise.resolve(new Response('', { status: 503 }));
    },
  });
  return { endpoint, sent };
}

test('REG-06 an rpc.path leaving the service rejects the document: no token, nothing sent', async () => {
  const hostile = [
    '/../svc-a/rpc/svc-a.echo',
    '/%2e%2e/svc-a/rpc/svc-a.echo',
    '/\\evil.example/rpc/svc-fake.echo',
    '/.well-known/svc/service.json',
  ];
  for (const rpcPath of hostile) {
    const fake = fakeBehindSharedGateway(await documentWithRpc(rpcPath));
    const fx = await createPlaneDeployment({ extraServices: [fake.endpoint] });
    const response = await fx.send(await hmacTokenRequest(fakeRequest));
    assert.equal(response.status, 403, rpcPath);
    assert.equal(response.body.reason, 'unknown_target', rpcPath);
    assert.equal(response.body.token, undefined, rpcPath);
    await assertSessionRefusesFake(fx);
    assert.deepEqual(fake.sent, [], `${rpcPath}: no batch left for any path`);
    const [event] = fx.eventsNamed('svc.catalog.target_failed');
    assert.match(String(event.detail), /rpc\.path/, rpcPath);
    await assertOthersUnaffected(fx);
  }
  // Control: the same gateway with a path below the fake's prefix is reached there.
  const fake = fakeBehindSharedGateway(await documentWithRpc(`/rpc/${FAKE}.echo`));
  const fx = await createPlaneDeployment({ extraServices: [fake.endpoint] });
  using session = fx.plane.abilitySession({
    abilityId: `${FAKE}.echo`,
    targetServiceId: FAKE,
    scopes: [`${FAKE}.read`],
  });
  await session.whoami({}).catch(() => {});
  assert.deepEqual(fake.sent, [`https://gw.example/${FAKE}/rpc/${FAKE}.echo`]);
});

test('REG-06 (WebSocket leg) a backslash rpc.path on a binding never makes the WebSocket leg dial another host', async () => {
  const dialled: string[] = [];
  const rpcPath = '/\\evil.example/rpc/svc-fake.echo';
  const document = await documentWithRpc(rpcPath, ['websocket']);
  const endpoint = cloudflareServiceBinding({
    id: FAKE,
    grants: FAKE_GRANTS,
    binding: { fetch: () => Promise.resolve(Response.json(document)) },
    createWebSocket: (url) => {
      dialled.push(url);
      throw new Error('never dialled');
    },
  });
  const fx = await createPlaneDeployment({ extraServices: [endpoint] });
  await assertSessionRefusesFake(fx);
  assert.deepEqual(dialled, []);
});

test('REG-03 (REST) a document whose REST variable is not an input field mounts no route', async () => {
  const base = await discoveryDocumentOf(FAKE) as {
    abilities: { methods: Record<string, Record<string, unknown>> }[];
  };
  const document = structuredClone(base);
  document.abilities[0].methods.whoami.rest = { method: 'get', path: '/fake/{nope}', status: 200 };
  const { fx, fake } = await withFake(document);
  const response = await fx.rest('GET', '/fake/x', { bearer: 't-robot' });
  assert.equal(response.status, 404);
  assert.equal(fx.middleware.runs, 0);
  assert.equal(Object.hasOwn((await fx.openapi()).paths ?? {}, '/fake/{nope}'), false);
  assert.equal(fake.received.some((path) => path.startsWith('/rpc/')), false);
  // The control: with a consistent path the route exists (and reaches the fake's RPC route).
  const fixed = structuredClone(base);
  fixed.abilities[0].methods.whoami.rest = { method: 'get', path: '/fake/whoami', status: 200 };
  const control = await withFake(fixed);
  assert.ok(Object.hasOwn((await control.fx.openapi()).paths ?? {}, '/fake/whoami'));
});

// The OpenAPI part is 'REG-05 (OpenAPI) ...' in openapi-document.test.ts.
test('REG-05 (MCP) tools/list is byte-identical for every caller', {
  skip: 'needs the MCP front door (tools/list), not built yet',
}, () => {});
