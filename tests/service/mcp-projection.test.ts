import assert from 'node:assert/strict';
import test from 'node:test';
import { z } from 'zod';
import { SvcConfigurationError } from '../../src/core/errors.ts';
import { defineAbility } from '../../src/service/ability.ts';
import {
  parseServiceDiscoveryDocument,
  serviceDiscoveryDocument,
} from '../../src/service/discovery.ts';
import { abilityMethod } from '../../src/service/method.ts';

const input = z.object({ id: z.string(), count: z.number().optional() });
const output = z.string();

function refused(run: () => unknown, fragment: string): void {
  assert.throws(run, (error: unknown) => {
    assert.ok(error instanceof SvcConfigurationError, String(error));
    assert.match(error.message, new RegExp(fragment.replace(/[{}()[\]`.*+?^$|\\]/g, '\\$&')));
    return true;
  });
}

test('mcp projections: a tool, a prompt and a resource template are kept on the definition', () => {
  const method = abilityMethod({
    input,
    output,
    mcp: { name: 'notes.get', description: 'Get a note', title: 'Get note' },
    mcpPrompt: { name: 'note_prompt', description: 'Ask about a note' },
    mcpResource: { uri: 'notes://{id}', name: 'note', mimeType: 'text/plain' },
  });
  assert.deepEqual(method.mcp, { name: 'notes.get', description: 'Get a note', title: 'Get note' });
  assert.deepEqual(method.mcpPrompt, { name: 'note_prompt', description: 'Ask about a note' });
  assert.deepEqual(method.mcpResource, {
    uri: 'notes://{id}',
    name: 'note',
    mimeType: 'text/plain',
  });
});

test('mcp projections: a prompt or a resource on a streaming method is refused at definition', () => {
  const stream = { input, output, stream: true as const };
  refused(
    () => abilityMethod({ ...stream, mcpPrompt: { name: 'p' } }),
    'mcpPrompt cannot be declared on a streaming method',
  );
  refused(
    () => abilityMethod({ ...stream, mcpResource: { uri: 'a:b', name: 'r' } }),
    'mcpResource cannot be declared on a streaming method',
  );
  // A tool is allowed on a stream.
  assert.equal(abilityMethod({ ...stream, mcp: { name: 't', description: 'd' } }).stream, true);
});

test('mcp projections: malformed names, URIs and template variables are refused', () => {
  refused(() => abilityMethod({ input, output, mcp: { name: '', description: 'd' } }), 'mcp.name');
  refused(
    () => abilityMethod({ input, output, mcp: { name: 'x'.repeat(129), description: 'd' } }),
    'mcp.name',
  );
  refused(
    () => abilityMethod({ input, output, mcp: { name: 'a b', description: 'd' } }),
    'mcp.name',
  );
  refused(() => abilityMethod({ input, output, mcpPrompt: { name: 'a/b' } }), 'mcpPrompt.name');
  refused(
    () => abilityMethod({ input, output, mcpResource: { uri: 'no-scheme', name: 'r' } }),
    'mcpResource.uri',
  );
  refused(
    () => abilityMethod({ input, output, mcpResource: { uri: 'a://{missing}', name: 'r' } }),
    'variable {missing} is not a top-level string input field',
  );
  refused(
    () => abilityMethod({ input, output, mcpResource: { uri: 'a://{count}', name: 'r' } }),
    'variable {count} is not a top-level string input field',
  );
  refused(
    () => abilityMethod({ input, output, mcpResource: { uri: 'a://{id}/{id}', name: 'r' } }),
    'repeats the variable {id}',
  );
});

test('mcp projections: a prompt name or resource URI declared twice in one service is refused', () => {
  const ability = defineAbility({
    id: 'notes.a',
    methods: {
      one: abilityMethod({ input, output, mcpPrompt: { name: 'same' } }),
      two: abilityMethod({ input, output, mcpPrompt: { name: 'same' } }),
    },
    handler: () => ({ one: () => '', two: () => '' }),
  });
  refused(
    () => serviceDiscoveryDocument({ id: 'notes', title: 'N', version: '1', abilities: [ability] }),
    'MCP prompt name same is declared twice',
  );
});

test('mcp projections: discovery publishes them and the plane reads them back; a crafted stream prompt is refused', () => {
  const ability = defineAbility({
    id: 'notes.a',
    methods: {
      get: abilityMethod({
        input,
        output,
        mcp: { name: 'get', description: 'd', title: 'T' },
        mcpPrompt: { name: 'p', title: 'P' },
        mcpResource: { uri: 'notes://{id}', name: 'n', description: 'D' },
      }),
    },
    handler: () => ({ get: () => '' }),
  });
  const document = serviceDiscoveryDocument({
    id: 'notes',
    title: 'N',
    version: '1',
    abilities: [ability],
  });
  const parsed = parseServiceDiscoveryDocument(JSON.parse(JSON.stringify(document)), 'notes');
  const method = parsed.abilities[0].methods.get;
  assert.deepEqual(method.mcp, { name: 'get', description: 'd', title: 'T' });
  assert.deepEqual(method.mcpPrompt, { name: 'p', title: 'P' });
  assert.deepEqual(method.mcpResource, { uri: 'notes://{id}', name: 'n', description: 'D' });
  const crafted = structuredClone(document) as unknown as {
    abilities: {
      rpc: { transports: string[] };
      methods: Record<string, Record<string, unknown>>;
    }[];
  };
  crafted.abilities[0].rpc.transports = ['websocket'];
  crafted.abilities[0].methods.get.stream = true;
  refused(
    () => parseServiceDiscoveryDocument(crafted, 'notes'),
    'cannot project a streaming method',
  );
});
