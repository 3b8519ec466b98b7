// Contract Errors r3 from the caller's side: an ability_validation refusal reaches the caller with
// typed `issues` ({ message, path? }) over HTTP-batch, WebSocket, the plane's in-process session and
// the broker; a service or a forged peer sending malformed issues gets a checked, bounded list,
// never a wrongly typed one, whichever form Cap'n Web gave the error on the wire.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { abilitySession } from '../../src/caller/ability-session.ts';
import { httpBatchRpc } from '../../src/caller/transports/http-batch.ts';
import { svcErrorInfo, type ValidationIssue } from '../../src/core/errors.ts';
import {
  type AbilityValidationFailure,
  isAbilityValidationError,
  MAX_VALIDATION_ISSUE_MESSAGE_LENGTH,
  MAX_VALIDATION_ISSUES,
} from '../../src/core/validation-issues.ts';
import { defineAbility } from '../../src/service/ability.ts';
import { abilityMethod } from '../../src/service/method.ts';
import { createBrokerDeployment } from './broker-fixture.ts';
import { createFixture } from './fixture.ts';
import { createPlaneDeployment } from './plane-fixture.ts';

type ItemsApi = { 'items.update'(input: unknown): Promise<unknown> };

/** The two issues svc-a's `items.update` reports for `{ id: 7 }` (id a number, name missing). */
const EXPECTED_PATHS = [['id'], ['name']];

async function refusalOf(call: Promise<unknown>): Promise<unknown> {
  return await call.then(
    () => assert.fail('expected a refusal'),
    (error: unknown) => error,
  );
}

/** The refusal must narrow, and its issues be the two the schema reported, typed. */
function assertTypedIssues(error: unknown, label: string): AbilityValidationFailure {
  assert.ok(isAbilityValidationError(error), `${label}: ${String(error)}`);
  assert.equal(error.status, 422, label);
  assert.equal(error.retryable, false, label);
  const issues: readonly ValidationIssue[] = error.issues;
  assert.equal(issues.length, 2, `${label}: ${JSON.stringify(issues)}`);
  for (const issue of issues) assert.equal(typeof issue.message, 'string', label);
  assert.deepEqual(issues.map((issue) => issue.path).sort(), EXPECTED_PATHS, label);
  return error;
}

test('Errors r3 (caller): issues arrive typed over HTTP-batch and WebSocket', async () => {
  const fx = await createFixture();
  using batch = fx.session<ItemsApi>('svc-a.echo');
  const overBatch = await refusalOf(batch['items.update']({ id: 7 }));
  // Received errors lose their class (r4); the guard reads them all the same.
  assert.equal(Object.getPrototypeOf(overBatch), Error.prototype);
  assertTypedIssues(overBatch, 'http-batch');
  const socket = fx.webSocket('svc-a.echo');
  using ws = fx.session<ItemsApi>('svc-a.echo', { transport: socket.transport });
  assertTypedIssues(await refusalOf(ws['items.update']({ id: 7 })), 'websocket');
  assert.equal(fx.count('calls', 'svc-a.echo#items.update'), 0);
});

test('Errors r3 (caller): issues arrive typed through the in-process session', async () => {
  const fx = await createPlaneDeployment();
  using session = fx.plane.abilitySession<ItemsApi>({
    abilityId: 'svc-a.echo',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
  });
  assertTypedIssues(await refusalOf(session['items.update']({ id: 7 })), 'in-process');
});

test('Errors r3 (caller): issues arrive typed through the broker, both transports', async () => {
  const fx = await createBrokerDeployment();
  for (const transport of ['http-batch', 'websocket'] as const) {
    using session = fx.brokerSession<ItemsApi>('t-alice', {
      abilityId: 'svc-a.echo',
      scopes: ['svc-a.read'],
      transport,
    });
    assertTypedIssues(await refusalOf(session['items.update']({ id: 7 })), `broker ${transport}`);
  }
});

/** svc-c.forged: a service that throws a refusal carrying whatever `issues` it is given. */
const forgedAbility = defineAbility({
  id: 'svc-c.forged',
  rpc: { transports: ['http-batch', 'websocket'] },
  methods: {
    raise: abilityMethod({ input: z.object({ issues: z.unknown() }), output: z.object({}) }),
  },
  handler: () => ({
    raise({ issues }: { issues: unknown }): Record<string, never> {
      throw Object.assign(new Error('forged refusal'), {
        code: 'ability_validation',
        status: 418,
        retryable: true,
        issues,
      });
    },
  }),
});

const HOSTILE_ISSUES = [
  { message: 'kept', path: ['a', 0] },
  { message: 12 },
  { path: ['no message'] },
  'text',
  null,
  [{ message: 'nested list' }],
  { message: 'object in path', path: [{ nested: true }] },
  { message: 'x'.repeat(MAX_VALIDATION_ISSUE_MESSAGE_LENGTH * 2) },
  ...Array.from({ length: MAX_VALIDATION_ISSUES * 2 }, (_, i) => ({ message: `filler ${i}` })),
];

test('Errors r3 (caller): a service sending malformed issues yields a checked, bounded list', async () => {
  const fx = await createFixture();
  fx.deploy('svc-c', [forgedAbility]);
  const token = await fx.tokenFor('svc-c', []);
  type ForgedApi = { raise(input: { issues: unknown }): Promise<unknown> };
  const socket = fx.webSocket('svc-c.forged');
  for (const transport of ['http-batch', 'websocket'] as const) {
    using session = fx.session<ForgedApi>('svc-c.forged', {
      token,
      ...(transport === 'websocket' ? { transport: socket.transport } : {}),
    });
    const error = await refusalOf(session.raise({ issues: HOSTILE_ISSUES }));
    assert.ok(isAbilityValidationError(error), transport);
    // The peer's 418 and `retryable: true` get no say.
    assert.equal(error.status, 422, transport);
    assert.equal(error.retryable, false, transport);
    assert.equal(error.issues.length, MAX_VALIDATION_ISSUES - 5, transport);
    assert.deepEqual(error.issues.slice(0, 3), [
      { message: 'kept', path: ['a', 0] },
      { message: 'object in path' },
      { message: `${'x'.repeat(MAX_VALIDATION_ISSUE_MESSAGE_LENGTH)}…` },
    ], transport);
    for (const issue of error.issues) assert.equal(typeof issue.message, 'string', transport);
    const notAList = await refusalOf(session.raise({ issues: { 0: { message: 'm' } } }));
    assert.ok(isAbilityValidationError(notAList), transport);
    assert.deepEqual(notAList.issues, [], transport);
  }
});

/** An HTTP-batch "service" answering the session's first call with one forged Cap'n Web line. */
function forgedBatchSession(line: string) {
  return abilitySession<{ call(input: unknown): Promise<unknown> }>({
    abilityId: 'svc-x.forged',
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-x',
    scopes: ['svc-x.read'],
    requestToken: async () => 'a.b.c',
    transport: httpBatchRpc(async () => new Response(line)),
  });
}

test('Errors r3 (caller): a forged peer error is read alike in both Cap’n Web error forms', async () => {
  // Cap'n Web sends an error with own properties as [name, message, stack|null, props]; arrays
  // inside props travel escaped as [[...]].
  const props = JSON.stringify({
    code: 'ability_validation',
    status: 422,
    retryable: false,
    issues: [[
      { message: 'kept', path: [['items', 2, 'name']] },
      { message: [['not', 'text']] },
      { message: 'bad path', path: 'items.2' },
    ]],
  });
  for (const stack of ['null', JSON.stringify('Error: forged\n    at nowhere')]) {
    using session = forgedBatchSession(
      `["reject",2,["error","AbilityValidationError","forged",${stack},${props}]]`,
    );
    const error = await refusalOf(session.call({}));
    assert.ok(isAbilityValidationError(error), stack);
    assert.deepEqual(error.issues, [
      { message: 'kept', path: ['items', 2, 'name'] },
      { message: 'bad path' },
    ], stack);
  }
  // Without own properties (the short form) there is no taxonomy: not a validation refusal.
  using bare = forgedBatchSession('["reject",2,["error","AbilityValidationError","forged"]]');
  const error = await refusalOf(bare.call({}));
  assert.equal(isAbilityValidationError(error), false);
  assert.equal(svcErrorInfo(error).code, 'internal');
});
