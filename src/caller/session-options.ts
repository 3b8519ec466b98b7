/**
 * What a caller gives `abilitySession` and what it gets back: the session options, the
 * token requester and proof signer it plugs in, the typed session surface, and the checks that
 * refuse bad options before anything travels. Also the budget arithmetic every part of a
 * session shares.
 *
 * @module
 */
import { SvcConfigurationError, SvcTimeoutError } from '../core/errors.ts';
import { refuseUnknownKeys } from '../core/config-values.ts';
import { isAbilityOfService } from '../service/identifiers.ts';
import type { RpcTransportFactory } from './transports/outbound-metadata.ts';

/** Signs a proof of possession for a bound token (one token, one service, one ability). */
export type ProofSigner = (input: {
  token: string;
  targetServiceId: string;
  abilityId: string;
}) => Promise<string>;

/** What a session asks its token requester for. */
export interface TokenRequest {
  /** The calling service: the token's `sub`. */
  callerServiceId: string;
  /** The service the token is for: its `aud`. */
  targetServiceId: string;
  /** The ability the session calls; the plane refuses a token for one the target lacks. */
  abilityId: string;
  /** The scopes the session was opened with. */
  scopes: readonly string[];
  /**
   * The token this session last presented and the service refused as invalid (401: expired,
   * signed by a key no longer published, …). A requester that caches tokens must not hand this
   * one back.
   */
  refusedToken?: string;
  /**
   * Aborted once the session no longer wants this request's answer: every call that waited on
   * it gave up (its budget ran out, or another request answered first) and it is no longer the
   * one later calls share, or the session was disposed. A requester should stop what it started
   * for this request (the shipped ones abort their fetch, unless another session still waits on
   * the same shared fetch). A request nobody waits on (a background renewal) is not aborted.
   */
  signal?: AbortSignal;
}

/**
 * Obtains a capability token. A requester may carry its own prover, which sessions use
 * automatically for bound tokens.
 */
export type TokenRequester = ((request: TokenRequest) => Promise<string>) & {
  /** Signs the proofs its key-bound tokens (`cnf`) need; a session uses it unless given its own. */
  proveTokenPossession?: ProofSigner;
};

/** Options of {@link abilitySession} (the contract's caller-side session options). */
export interface AbilitySessionOptions {
  /** The ability to call, `<targetServiceId>.<name>`. */
  abilityId: string;
  /** This service's id: the caller every token is requested for. */
  callerServiceId: string;
  /** The service serving the ability: the audience of every token. */
  targetServiceId: string;
  /** Scopes every token asks for; the ability's and each called method's must be among them. */
  scopes: readonly string[];
  /** Obtains the tokens: a shipped requester (`controlPlaneHmacTokenRequester`...) or your own. */
  requestToken: TokenRequester;
  /** How calls travel: `httpBatchRpc`, `websocketRpc`, `cloudflareServiceBindingRpc`... */
  transport: RpcTransportFactory;
  /**
   * Budget of each call in milliseconds, token issuance included; `0` fails every call. Over
   * WebSocket the socket carries the budget left when it opens, and it bounds every call on it:
   * such a session is bounded in time. Without it nothing in the session bounds a call: a call
   * waits as long as the token requester (the shipped requesters set no timeout of their own)
   * and the peer take.
   */
  timeoutMs?: number;
  /** Forwarded with every call when well formed (else dropped); svcplane never deduplicates. */
  idempotencyKey?: string;
  /** Forwarded with every call, so the service's log events carry it. */
  requestId?: string;
  /** Serialised connection info to forward (set by the control plane only). */
  connInfo?: string;
  /** Prover for bound tokens; defaults to the requester's own `proveTokenPossession`. */
  proveTokenPossession?: ProofSigner;
}

// deno-lint-ignore no-explicit-any
export type AnyMethods = Record<string, (input: any) => unknown>;

/** The callable surface of a session: each ability method takes one input and returns a promise. */
export type AbilitySessionMethods<Api> = {
  readonly [K in keyof Api as K extends string ? K : never]: Api[K] extends
    (input: infer Input) => infer Output ? (input: Input) => Promise<Awaited<Output>>
    : never;
};

/** A typed session with one ability; dispose it with `using` or {@link disposeAbilitySession}. */
export type AbilitySession<Api = AnyMethods> =
  & AbilitySessionMethods<Api>
  & Disposable
  & AsyncDisposable;

function requireText(value: unknown, name: string): string {
  if (typeof value !== 'string' || value === '') {
    throw new SvcConfigurationError(`abilitySession: ${name} must be a non-empty string`);
  }
  return value;
}

/**
 * Refuses a session for an ability its target does not serve (abilities are named after their
 * service): such a session could only be refused, after a token was minted for nothing. Throws
 * `SvcConfigurationError` with reason `ability_target_mismatch`.
 */
export function refuseAbilityOutsideTarget(abilityId: string, targetServiceId: string): void {
  if (isAbilityOfService(abilityId, targetServiceId)) return;
  throw new SvcConfigurationError(
    `abilitySession: \`abilityId\` "${abilityId}" is not an ability of \`targetServiceId\` ` +
      `"${targetServiceId}" (its id must start with "${targetServiceId}.")`,
    { reason: 'ability_target_mismatch' },
  );
}

const SESSION_OPTIONS: readonly string[] = [
  'abilityId',
  'callerServiceId',
  'targetServiceId',
  'scopes',
  'requestToken',
  'transport',
  'timeoutMs',
  'idempotencyKey',
  'requestId',
  'connInfo',
  'proveTokenPossession',
];

/** Refuses malformed session options with `SvcConfigurationError`, before anything travels. */
export function validateOptions(options: AbilitySessionOptions): void {
  if (options === null || typeof options !== 'object') {
    throw new SvcConfigurationError('abilitySession: options object required');
  }
  refuseUnknownKeys(options, SESSION_OPTIONS, 'abilitySession');
  requireText(options.abilityId, 'abilityId');
  requireText(options.callerServiceId, 'callerServiceId');
  requireText(options.targetServiceId, 'targetServiceId');
  refuseAbilityOutsideTarget(options.abilityId, options.targetServiceId);
  if (!Array.isArray(options.scopes) || options.scopes.some((s) => typeof s !== 'string')) {
    throw new SvcConfigurationError('abilitySession: scopes must be an array of strings');
  }
  // The plane refuses a token request without scopes: refused here, before any request is sent
  // or any call queued, with the remedy instead of a 422 at the first call.
  if (options.scopes.length === 0) {
    throw new SvcConfigurationError(
      'abilitySession: scopes must name at least one scope the caller is granted on ' +
        `${options.targetServiceId} (the plane issues no token without scopes)`,
      { reason: 'scopes_required' },
    );
  }
  if (typeof options.requestToken !== 'function') {
    throw new SvcConfigurationError('abilitySession: requestToken must be a function');
  }
  const transport = options.transport as Partial<RpcTransportFactory> | undefined;
  if (transport === undefined || typeof transport.open !== 'function') {
    throw new SvcConfigurationError('abilitySession: transport must be an RPC transport');
  }
  const timeoutMs = options.timeoutMs;
  if (timeoutMs !== undefined && (!Number.isFinite(timeoutMs) || timeoutMs < 0)) {
    throw new SvcConfigurationError(
      'abilitySession: timeoutMs must be a non-negative number of milliseconds',
    );
  }
}

/** What is left of a call's budget, in ms (`undefined`: the session has no budget). */
export function remainingBudgetMs(
  options: AbilitySessionOptions,
  startedAt: number,
): number | undefined {
  const budget = options.timeoutMs;
  return budget === undefined ? undefined : budget - (Date.now() - startedAt);
}

/** The timeout a call fails with once its budget has run out. */
export function budgetExceeded(options: AbilitySessionOptions, method: string): SvcTimeoutError {
  return new SvcTimeoutError(
    `Call to ${options.abilityId} method ${method} exceeded its ${
      options.timeoutMs ?? 0
    } ms budget`,
  );
}
