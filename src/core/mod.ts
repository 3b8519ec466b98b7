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
export type {
  CallerAccess,
  DelegatedSubject,
  KeyConfirmation,
  VerifiedIdentity,
} from './identity.ts';
export type { JsonSchema, SchemaInput, SchemaOutput, SvcSchema } from './schema.ts';
