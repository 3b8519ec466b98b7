/**
 * The service role: define abilities and serve them. Calling other services' abilities is the
 * caller role (`svcplane/caller`).
 *
 * @module
 */
export {
  type AbilityAccess,
  type AbilityDefinition,
  type AbilityExposure,
  type AbilityMethods,
  type AbilityOptions,
  type AbilityTransport,
  defineAbility,
  type HandlerFactoryInput,
} from './ability.ts';
export {
  abilityMethod,
  type McpProjection,
  type MethodDefinition,
  type MethodOptions,
  type RestProjection,
  type RestProjectionOptions,
} from './method.ts';
export {
  type CapabilityCatalog,
  type CapabilityCatalogOptions,
  type CapabilityScope,
  defineCapabilities,
} from './capabilities.ts';
export { requireScopes } from './scopes.ts';
export type {
  AbilityHandlerObject,
  AbilityMethodRpc,
  AbilityRpc,
  HandlerMethod,
  StreamSource,
} from './types.ts';
export type {
  AbilityDiscoveryEntry,
  MethodDiscoveryEntry,
  ServiceDiscoveryDocument,
} from './discovery.ts';
export { createService, SERVICE_DISCOVERY_PATH, type SvcService } from './service.ts';
export type {
  ConnectAbilityAnswer,
  ConnectAbilityRefusal,
  ConnectAbilityRequest,
} from './native-ability-rpc.ts';
export type {
  ServiceAuthOptions,
  ServiceIngressOptions,
  ServiceOptions,
  ServiceTimeoutOptions,
} from './service-options.ts';
export { svcLogEvents } from './log-events.ts';
export {
  DEFAULT_JWKS_CACHE_TTL_SECONDS,
  DEFAULT_JWKS_FAILURE_COOLDOWN_MS,
  DEFAULT_JWKS_FETCH_TIMEOUT_MS,
  jwksFromServiceBinding,
  type JwksFromServiceBindingOptions,
  jwksFromUrl,
  type JwksFromUrlOptions,
  type JwksServiceBinding,
  type RemoteJwksOptions,
  staticJwks,
} from './jwks-sources.ts';
export { DEFAULT_BATCH_BODY_TIMEOUT_MS, WEBSOCKET_AUTHENTICATE_TIMEOUT_MS } from './rpc-serve.ts';
export {
  MAX_WEBSOCKET_SEND_BUFFER_BYTES,
  SEND_BUFFER_FULL_CLOSE,
} from './websocket-rpc-transport.ts';
export type { WebSocketUpgrader } from './websocket-upgrade.ts';
