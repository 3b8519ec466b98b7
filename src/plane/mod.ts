/**
 * The control plane: signing authority, JWKS, catalog, caller authentication, token endpoint and
 * in-process sessions.
 *
 * @module
 */
export {
  CAPABILITY_TOKEN_PATH,
  type ControlPlane,
  createControlPlane,
  type IssueForCallerOptions,
  JWKS_PATH,
} from './control-plane.ts';
export type { ControlPlaneOptions } from './control-plane-options.ts';
export type { OpenApiOption, OpenApiSecurityRequirementOption } from './openapi-options.ts';
export {
  DEFAULT_REFERENCE_PATH,
  type ReferenceAssetBody,
  type ReferenceAssetFiles,
  type ReferenceAssets,
  type ReferenceOption,
} from './reference/reference-option.ts';
export type { PublicOriginOption } from './public-origin.ts';
export type { McpOptions, McpStreamLimits } from './mcp-options.ts';
export {
  DEFAULT_CAPABILITY_TOKEN_TTL_SECONDS,
  type IssueCapabilityTokenOptions,
  type IssuedCapabilityToken,
  MAX_CAPABILITY_TOKEN_TTL_SECONDS,
} from './issuer.ts';
export type { BrokerCaller, InProcessSessionOptions } from './in-process-session.ts';
export type { PlaneVariables, SvcInvocation } from './invocation-middleware.ts';
export {
  cloudflareServiceBinding,
  type CloudflareServiceBindingOptions,
  type EndpointRpcKind,
  httpService,
  type HttpServiceOptions,
  localService,
  type LocalServiceOptions,
  type ServiceEndpoint,
  type ServiceEndpointKind,
  type ServiceGrant,
} from './endpoints.ts';
export { DEFAULT_DISCOVERY_CACHE_TTL_SECONDS, type ServicesOption } from './catalog.ts';
export {
  type DiscoveryCacheOption,
  memoryRegistryCache,
  type MemoryRegistryCacheOptions,
  type RegistryCache,
} from './registry-cache.ts';
export {
  type AuthenticatedCaller,
  type CallerAuthenticator,
  CallerAuthError,
} from './caller-auth.ts';
export {
  type HmacServiceClient,
  hmacServiceClientAuth,
  type HmacServiceClientAuthOptions,
} from './caller-auth-hmac.ts';
export {
  type JwkServiceClient,
  jwkServiceClientAuth,
  type JwkServiceClientAuthOptions,
} from './caller-auth-jwk.ts';
export {
  generateSigningKeyEntry,
  type GenerateSigningKeyOptions,
  SIGNING_KEYS_TIMEOUT_MS,
  type SigningKeyEntry,
  type SigningKeysOption,
} from './signing-keys.ts';
export {
  type CapabilityTokenEntrypoint,
  capabilityTokenEntrypoint,
  type CapabilityTokenEntrypointAnswer,
  type CapabilityTokenEntrypointError,
  type CapabilityTokenEntrypointOptions,
  type CapabilityTokenEntrypointRefusal,
  type CapabilityTokenEntrypointRequest,
  type CapabilityTokenEntrypointResponse,
  MAX_ENTRYPOINT_ERROR_MESSAGE_LENGTH,
  type TokenIssuingPlane,
} from './token-entrypoint.ts';
export { PLANE_REQUEST_FAILED_EVENT } from './request-failure.ts';
