/**
 * The caller role: open typed, disposable sessions with other services' abilities, over
 * HTTP-batch, WebSocket, a Workers binding or a custom transport, with tokens from the control
 * plane (three shipped requesters) and proofs of possession for sender-constrained tokens.
 *
 * @module
 */
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
export { brokerSession, type BrokerSessionOptions } from './broker-session.ts';
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
export { customRpcTransport } from './transports/custom.ts';
export { cloudflareNativeRpc, type NativeAbilityBinding } from './transports/cloudflare-native.ts';
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
export { CapabilityTokenRequestError } from './token-request-error.ts';
// Read where a caller's refusals arrive, so a caller importing only this entry has it.
export {
  type AbilityValidationFailure,
  isAbilityValidationError,
} from '../core/validation-issues.ts';
export type { ValidationIssue } from '../core/errors.ts';
export { jwkCapabilityProofSigner, type JwkCapabilityProofSignerOptions } from './proof-signer.ts';
