/**
 * The abilities the official MCP conformance suite (`@modelcontextprotocol/conformance`, server
 * mode) expects, served the way every MCP projection is served: a real service, reached by a
 * real control plane, projected at its `/mcp` endpoint. Names and outputs follow the suite's
 * scenarios (`tools-call-simple-text`, `tools-call-error`, `tools-call-with-progress`,
 * `json-schema-2020-12`, `resources-*`, `prompts-*`); what a stateless projection cannot
 * express (sampling, elicitation, completion, subscriptions, image / audio / embedded content,
 * log notifications) has no fixture.
 *
 * @module
 */
import type { MiddlewareHandler } from 'hono';
import { AbilityHandlerError } from '../core/errors.ts';
import { type AbilityDefinition, defineAbility } from '../service/ability.ts';
import { jwksFromServiceBinding } from '../service/jwks-sources.ts';
import { abilityMethod } from '../service/method.ts';
import { createService } from '../service/service.ts';
import { type ControlPlane, createControlPlane } from '../plane/control-plane.ts';
import { httpService } from '../plane/endpoints.ts';
import { generateSigningKeyEntry } from '../plane/signing-keys.ts';
import { jsonSchemaType } from './json-schema-type.ts';
import { memoryWebSocketFactory } from './memory-websocket-factory.ts';

const CONFORMANCE_SERVICE_ID = 'conformance';
const CONFORMANCE_PLANE_ID = 'conformance-plane';
const CONFORMANCE_SCOPE = 'conformance.use';
const DRAFT_2020_12 = 'https://json-schema.org/draft/2020-12/schema';
const noInput = jsonSchemaType<Record<string, never>>({ type: 'object', properties: {} });
const text = jsonSchemaType<string>({ type: 'string' });
const stringFields = <K extends string>(...names: K[]) =>
  jsonSchemaType<Record<K, string>>({
    type: 'object',
    properties: Object.fromEntries(names.map((name) => [name, { type: 'string' }])),
    required: names,
  });

/** The suite's fixture tools, prompts and resources as one published ability. */
export function mcpConformanceAbility(): AbilityDefinition {
  return defineAbility({
    id: `${CONFORMANCE_SERVICE_ID}.mcp`,
    title: 'MCP conformance fixtures',
    exposure: 'published',
    scopes: [CONFORMANCE_SCOPE],
    rpc: { transports: ['http-batch', 'websocket'] },
    methods: {
      simpleText: abilityMethod({
        input: noInput,
        output: text,
        mcp: { name: 'test_simple_text', description: 'Returns a simple text response' },
      }),
      errorHandling: abilityMethod({
        input: noInput,
        output: text,
        mcp: { name: 'test_error_handling', description: 'Always fails, in-band' },
      }),
      progress: abilityMethod({
        input: noInput,
        output: jsonSchemaType<{ progress: number; total: number }>({
          type: 'object',
          properties: { progress: { type: 'number' }, total: { type: 'number' } },
          required: ['progress', 'total'],
        }),
        stream: true,
        mcp: {
          name: 'test_tool_with_progress',
          description: 'Streams three steps; each is a progress notification',
        },
      }),
      schema2020: abilityMethod({
        input: jsonSchemaType<{ name?: string }>({
          $schema: DRAFT_2020_12,
          type: 'object',
          $defs: {
            address: {
              type: 'object',
              properties: { street: { type: 'string' }, city: { type: 'string' } },
            },
          },
          properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' } },
          additionalProperties: false,
        }),
        output: text,
        mcp: {
          name: 'json_schema_2020_12_tool',
          description: 'Tool with JSON Schema 2020-12 features',
        },
      }),
      staticText: abilityMethod({
        input: noInput,
        output: text,
        mcpResource: {
          uri: 'test://static-text',
          name: 'static-text',
          description: 'A static text resource',
          mimeType: 'text/plain',
        },
      }),
      templateData: abilityMethod({
        input: stringFields('id'),
        output: jsonSchemaType<{ id: string; templateTest: boolean; data: string }>({
          type: 'object',
          properties: {
            id: { type: 'string' },
            templateTest: { type: 'boolean' },
            data: { type: 'string' },
          },
          required: ['id', 'templateTest', 'data'],
        }),
        mcpResource: {
          uri: 'test://template/{id}/data',
          name: 'template-data',
          description: 'A resource template with an id',
          mimeType: 'application/json',
        },
      }),
      simplePrompt: abilityMethod({
        input: noInput,
        output: text,
        mcpPrompt: { name: 'test_simple_prompt', description: 'A simple prompt' },
      }),
      promptWithArguments: abilityMethod({
        input: stringFields('arg1', 'arg2'),
        output: text,
        mcpPrompt: { name: 'test_prompt_with_arguments', description: 'A prompt with arguments' },
      }),
    },
    handler: () => ({
      simpleText: () => 'This is a simple text response for testing.',
      errorHandling: () => {
        throw new AbilityHandlerError('This tool intentionally returns an error for testing', {
          status: 400,
          reason: 'intentional_failure',
        });
      },
      async *progress() {
        for (const step of [0, 50, 100]) {
          yield { progress: step, total: 100 };
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      },
      schema2020: (input: { name?: string }) => `Hello ${input.name ?? 'there'}`,
      staticText: () => 'This is the content of the static text resource.',
      templateData: (input: { id: string }) => ({
        id: input.id,
        templateTest: true,
        data: `Data for ID: ${input.id}`,
      }),
      simplePrompt: () => 'This is a simple prompt for testing.',
      promptWithArguments: (input: { arg1: string; arg2: string }) =>
        `Prompt with arguments: arg1='${input.arg1}', arg2='${input.arg2}'`,
    }),
  });
}

/** Names every MCP request a plane user: the suite sends no credentials. */
const anonymousUser: MiddlewareHandler = async (c, next) => {
  c.set('svcCaller' as never, { id: 'conformance-client', kind: 'user' } as never);
  await next();
};

/**
 * A control plane serving {@link mcpConformanceAbility} at `/mcp` through a real service (an
 * in-memory HTTP and WebSocket leg). `publicOrigin` is optional: the suite needs a loopback URL,
 * whose own origin is then the endpoint origin.
 */
export async function createMcpConformancePlane(
  options: { publicOrigin?: string } = {},
): Promise<ControlPlane> {
  // The service reaches the plane's JWKS through this holder: the plane is created after it.
  const holder: { plane?: ControlPlane } = {};
  const service = createService({
    id: CONFORMANCE_SERVICE_ID,
    title: 'MCP conformance fixtures',
    version: '1.0.0',
    auth: {
      issuer: CONFORMANCE_PLANE_ID,
      jwks: jwksFromServiceBinding({ fetch: (request: Request) => holder.plane!.fetch(request) }),
    },
    abilities: [mcpConformanceAbility()],
    logger: false,
  });
  const sockets = memoryWebSocketFactory(service.fetch);
  const plane = createControlPlane({
    id: CONFORMANCE_PLANE_ID,
    signingKeys: [await generateSigningKeyEntry({ kid: 'conformance-1' })],
    services: [
      httpService({
        id: CONFORMANCE_SERVICE_ID,
        url: 'http://conformance.internal',
        fetch: (request) => service.fetch(request),
        createWebSocket: (url) => sockets.createWebSocket(url),
        grants: [{ caller: CONFORMANCE_PLANE_ID, scopes: [CONFORMANCE_SCOPE] }],
      }),
    ],
    invocationMiddleware: anonymousUser,
    ...(options.publicOrigin !== undefined ? { publicOrigin: options.publicOrigin } : {}),
    log: false,
  });
  holder.plane = plane;
  await plane.ready();
  return plane;
}
