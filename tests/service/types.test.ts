// Type-level checks: `npx tsc --noEmit` fails if any `@ts-expect-error` below stops being an
// error or an equality stops holding. The tests also run, so the same definitions are exercised.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type } from 'arktype';
import { z } from 'zod';
import { defineAbility } from '../../src/service/ability.ts';
import { createAbilityTarget } from '../../src/service/ability-target.ts';
import { abilityMethod } from '../../src/service/method.ts';
import type { AbilityHandlerObject, AbilityRpc } from '../../src/service/types.ts';
import { callContextWith } from '../support/ability-fixtures.ts';

// workerd permits code generation only at startup, where arktype compiles its validators, so
// arktype schemas are declared at module scope.
const noteOutput = type({ id: 'string', length: 'number' });

type Equals<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true
  : false;

const notes = defineAbility({
  id: 'svc-t.notes',
  rpc: { transports: ['websocket'] },
  methods: {
    create: abilityMethod({
      input: z.object({ text: z.string(), tags: z.array(z.string()).default([]) }),
      output: noteOutput,
    }),
    watch: abilityMethod({
      input: z.object({ count: z.number() }),
      output: z.object({ seq: z.number() }),
      stream: true,
    }),
  },
  handler: () => ({
    create: (input) => ({ id: `n-${input.tags.length}`, length: input.text.length }),
    async *watch({ count }) {
      for (let seq = 0; seq < count; seq++) yield { seq };
    },
  }),
});

type NotesRpc = AbilityRpc<typeof notes>;

// The client takes the schema's input type (`tags` optional thanks to the default)...
const clientInput: Equals<
  Parameters<NotesRpc['create']>[0],
  { text: string; tags?: string[] | undefined }
> = true;
// ...and resolves to the schema's output type; a stream resolves to a ReadableStream of items.
const clientOutput: Equals<
  ReturnType<NotesRpc['create']>,
  Promise<{ id: string; length: number }>
> = true;
const streamOutput: Equals<
  ReturnType<NotesRpc['watch']>,
  Promise<ReadableStream<{ seq: number }>>
> = true;
const methodNames: Equals<keyof NotesRpc, 'create' | 'watch'> = true;

// The handler receives the validated input (defaults applied: `tags` is always present).
type NotesHandler = AbilityHandlerObject<typeof notes.methods>;
const handlerInput: Equals<
  Parameters<NotesHandler['create']>[0],
  { text: string; tags: string[] }
> = true;

// Never invoked: these lines exist for the type checker.
void ((client: NotesRpc) => {
  // @ts-expect-error wrong input field type
  void client.create({ text: 42 });
  // @ts-expect-error missing required input field
  void client.create({ tags: [] });
  // @ts-expect-error unknown method
  void client.remove({ id: 'n-1' });
  // @ts-expect-error a streaming method resolves to a stream, not an item
  const item: Promise<{ seq: number }> = client.watch({ count: 1 });
  void item;
});

void (() =>
  defineAbility({
    id: 'svc-t.wrongoutput',
    methods: { create: notes.methods.create },
    handler: () => ({
      // @ts-expect-error wrong output type: `length` must be a number
      create: (input) => ({ id: 'x', length: input.text }),
    }),
  }));

void (() =>
  defineAbility({
    id: 'svc-t.missing',
    methods: notes.methods,
    // @ts-expect-error the handler object lacks `watch`
    handler: () => ({ create: () => ({ id: 'x', length: 1 }) }),
  }));

void (() =>
  defineAbility({
    id: 'svc-t.streamitem',
    methods: { watch: notes.methods.watch },
    handler: () => ({
      // @ts-expect-error a streamed item must match the output schema
      watch: () => [{ seq: 'first' }],
    }),
  }));

test('the typed client matches what the wrapper returns at run time', async () => {
  assert.deepEqual(
    [clientInput, clientOutput, streamOutput, methodNames, handlerInput],
    [true, true, true, true, true],
  );
  const client: NotesRpc = createAbilityTarget(notes, callContextWith().call);
  const created = await client.create({ text: 'hello' });
  assert.deepEqual(created, { id: 'n-0', length: 5 });
  const stream = await client.watch({ count: 2 });
  const reader = stream.getReader();
  assert.deepEqual((await reader.read()).value, { seq: 0 });
  assert.deepEqual((await reader.read()).value, { seq: 1 });
  assert.equal((await reader.read()).done, true);
});
