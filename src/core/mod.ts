/**
 * Runtime-free building blocks shared by services, callers and the control plane.
 *
 * @module
 */
export {
  AbilityHandlerError,
  AbilityValidationError,
  CapabilityAuthError,
  handlerFailureCause,
  SvcConfigurationError,
  type SvcErrorCode,
  type SvcErrorInfo,
  svcErrorInfo,
  SvcInternalError,
  SvcTimeoutError,
  type ValidationIssue,
} from './errors.ts';
export {
  type AbilityValidationFailure,
  isAbilityValidationError,
  MAX_VALIDATION_ISSUE_MESSAGE_LENGTH,
  MAX_VALIDATION_ISSUE_PATH_DEPTH,
  MAX_VALIDATION_ISSUE_PATH_KEY_LENGTH,
  MAX_VALIDATION_ISSUES,
} from './validation-issues.ts';
export type {
  CallerAccess,
  DelegatedSubject,
  KeyConfirmation,
  VerifiedIdentity,
} from './identity.ts';
export type { JsonSchema, SchemaInput, SchemaOutput, SvcSchema } from './schema.ts';
export {
  DEFAULT_ABILITY_TIMEOUT_MS,
  MAX_SVC_TIMEOUT_MS,
  SVC_TIMEOUT_GRACE_MS,
  SVC_TIMEOUT_HEADER,
  SVC_TIMEOUT_QUERY_PARAM,
  type TimeoutPolicy,
} from './deadline.ts';
export { SVC_IDEMPOTENCY_KEY_HEADER, SVC_IDEMPOTENCY_KEY_QUERY_PARAM } from './idempotency.ts';
export {
  type ConnInfo,
  type ConnInfoRemote,
  SVC_CONN_INFO_HEADER,
  SVC_CONN_INFO_QUERY_PARAM,
} from './conn-info.ts';
export { SVC_REQUEST_ID_HEADER, SVC_REQUEST_ID_QUERY_PARAM } from './request-id.ts';
export type { SvcLogCallback, SvcLogEvent, SvcLogLevel, SvcLogOption } from './logging.ts';
export {
  DEFAULT_HTTP_CACHE_MAX_AGE_SECONDS,
  DEFAULT_STALE_WHILE_REVALIDATE_SECONDS,
  type HttpCacheOption,
} from './http-cache.ts';
export {
  CAPABILITY_TOKEN_CLOCK_SKEW_SECONDS,
  CAPABILITY_TOKEN_TYP,
  type CapabilityKeySet,
  capabilityKeyThumbprint,
  type CapabilityTokenClaims,
  type VerifiedCapabilityToken,
  verifyCapabilityToken,
  type VerifyCapabilityTokenOptions,
} from './capability-token.ts';
export type { CapabilityPublicJwk } from './capability-key-set.ts';
