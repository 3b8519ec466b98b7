/**
 * Testing your own services: an in-memory WebSocket transport that reaches a service's `fetch`
 * through its real upgrade path (streaming, long-lived sessions and dropped connections on
 * every runtime, workerd included), a signing authority that mints capability tokens without a
 * control plane, and the in-memory caches a test deployment needs.
 *
 * No private key ships here: every {@link createTestTokenIssuer} generates its own, unless the
 * test brings one (see `test-token-issuer.ts`).
 *
 * ```ts
 * import { abilitySession, createService } from 'svcplane';
 * import { createTestTokenIssuer, memoryWebSocketRpc } from 'svcplane/testing';
 *
 * const tokens = await createTestTokenIssuer();
 * const service = createService({ id: 'notes', title: 'Notes', version: '1', auth: tokens.auth, abilities: [notes] });
 * using session = abilitySession({
 *   abilityId: 'notes.store', callerServiceId: 'billing', targetServiceId: 'notes', scopes: ['notes.read'],
 *   requestToken: tokens.tokenRequester(),
 *   transport: memoryWebSocketRpc(service.fetch),
 * });
 * ```
 *
 * @module
 */
export {
  type MemoryWebSocketRpc,
  memoryWebSocketRpc,
  type MemoryWebSocketRpcOptions,
} from './memory-websocket-rpc.ts';
export {
  type MemoryFetch,
  type MemoryWebSocketClose,
  type MemoryWebSocketConnection,
  type MemoryWebSocketFactory,
  memoryWebSocketFactory,
  type MemoryWebSocketFactoryOptions,
  type MemoryWebSocketState,
} from './memory-websocket-factory.ts';
export {
  createTestTokenIssuer,
  DEFAULT_TEST_CALLER_ID,
  DEFAULT_TEST_TOKEN_ISSUER,
  staticTokenRequester,
  type TestTokenDefaults,
  type TestTokenIssuer,
  type TestTokenIssuerOptions,
  type TestTokenOptions,
} from './test-token-issuer.ts';
export {
  memoryRegistryCache,
  type MemoryRegistryCacheOptions,
  type RegistryCache,
} from '../plane/registry-cache.ts';
export { staticJwks } from '../service/jwks-sources.ts';
export { createMcpConformancePlane, mcpConformanceAbility } from './mcp-conformance.ts';
export { type JsonSchemaType, jsonSchemaType } from './json-schema-type.ts';
