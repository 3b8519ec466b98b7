/**
 * The service role: define abilities, serve them, and call other services' abilities.
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
  type AbilitySession,
  abilitySession,
  type AbilitySessionMethods,
  type AbilitySessionOptions,
  disposeAbilitySession,
  MAX_CALLS_PER_BATCH,
  MAX_RENEWAL_PAUSE_MS,
  type ProofSigner,
  RENEWAL_RETRY_MS,
  STALLED_TOKEN_REQUEST_MS,
  type TokenRequest,
  type TokenRequester,
} from './ability-session.ts';
export { STALLED_TOKEN_FETCH_MS } from './token-request-cache.ts';
export {
  cloudflareServiceBindingRpc,
  httpBatchRpc,
  type HttpBatchRpcOptions,
  MAX_BATCH_RESPONSE_BYTES,
  type RpcFetch,
  type ServiceBindingFetcher,
} from './transports/http-batch.ts';
export {
  WEBSOCKET_OPEN_TIMEOUT_MS,
  websocketRpc,
  type WebSocketRpcOptions,
} from './transports/websocket.ts';
export {
  MAX_WEBSOCKET_SEND_BUFFER_BYTES,
  SEND_BUFFER_FULL_CLOSE,
} from './transports/websocket-rpc-transport.ts';
export { customRpcTransport } from './transports/custom.ts';
export { cloudflareNativeRpc } from './transports/cloudflare-native.ts';
export type { RpcTransportFactory } from './transports/outbound-metadata.ts';
export {
  type CapabilityTokenBinding,
  controlPlaneHmacTokenRequester,
  type ControlPlaneHmacTokenRequesterOptions,
  controlPlaneJwkTokenRequester,
  type ControlPlaneJwkTokenRequesterOptions,
  controlPlaneRpcTokenRequester,
  type ControlPlaneRpcTokenRequesterOptions,
  type RequesterTokenRequest,
  type TokenEndpointFetch,
} from './token-requesters.ts';
export { jwkCapabilityProofSigner, type JwkCapabilityProofSignerOptions } from './proof-signer.ts';
export type { WebSocketUpgrader } from './websocket-upgrade.ts';
