/**
 * The caller's typed, disposable session with one ability of another service.
 *
 * A session gets a capability token from its requester (it caches nothing across sessions),
 * signs a proof of possession only when the token is bound (`cnf`), and authenticates inside
 * the RPC session, pipelined with the first call. Over HTTP-batch each macrotask's calls travel
 * in a fresh batch that repeats `authenticate` with the same token, so one session serves calls
 * over time; over WebSocket and custom transports one session carries every call.
 *
 * Renewal: once credentials near their end the next call starts a renewal in the background and
 * still travels with them; only credentials that can no longer be presented (the token expired,
 * or over HTTP-batch the proof is too old) make a call wait for new ones. A failed renewal fails
 * no call while the credentials in hand are valid; a later call tries again.
 *
 * Deadlines: `timeoutMs` is the caller's budget for each call, token and proof included. A call
 * waits for credentials only within what is left of its budget; one that gives up drops the
 * request it waited on (unless a newer one replaced it), so a token request that stalls once
 * does not hold later calls. Each outbound batch (or, on WebSocket, the socket at open) carries
 * what is left of the budget, so an HTTP-batch call shares a batch only with calls whose budget
 * ends within {@link BATCH_DEADLINE_TOLERANCE_MS} of its own. The local wait for the peer ends
 * `SVC_TIMEOUT_GRACE_MS` after the budget so the peer's own verdict normally arrives first. A
 * timed-out call rejects with `SvcTimeoutError`; the session stays usable. Over WebSocket the
 * budget the socket carried when it opened bounds every call on it (contract, Limits r3): once
 * `timeoutMs` has passed since the first call opened it, later calls fail with a timeout, so a
 * WebSocket session with `timeoutMs` is bounded in time; open a new one for later work, or leave
 * `timeoutMs` out of a long-lived one. Without a budget nothing in the session bounds a call: it
 * waits as long as the token requester and the peer take.
 *
 * @module
 */
import { decodeJwt } from 'jose';
import {
  CapabilityAuthError,
  SvcConfigurationError,
  svcErrorInfo,
  SvcInternalError,
  SvcTimeoutError,
} from '../core/errors.ts';
import { refuseUnknownKeys } from '../core/config-values.ts';
import { callerWaitMs, MAX_TIMER_DELAY_MS } from '../core/deadline.ts';
import { isAbilityOfService } from '../service/identifiers.ts';
import { CAPABILITY_PROOF_FRESHNESS_SECONDS } from '../service/proof-verify.ts';
import { streamWithTypedFailure } from './stream-failure.ts';
import type {
  OpenedRpcSession,
  OutboundRpcMetadata,
  RpcTransportFactory,
} from './transports/outbound-metadata.ts';

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
type AnyMethods = Record<string, (input: any) => unknown>;

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

// `Symbol.dispose` may be missing on older runtimes, and polyfills disagree on the fallback
// they register, so a session answers to every spelling of both symbols.
const DISPOSE_KEYS: ReadonlySet<PropertyKey> = new Set([
  Symbol.dispose ?? Symbol.for('Symbol.dispose'),
  Symbol.for('Symbol.dispose'),
  Symbol.for('dispose'),
]);
const ASYNC_DISPOSE_KEYS: ReadonlySet<PropertyKey> = new Set([
  Symbol.asyncDispose ?? Symbol.for('Symbol.asyncDispose'),
  Symbol.for('Symbol.asyncDispose'),
  Symbol.for('asyncDispose'),
]);

// Names a session never treats as ability methods, so it is not mistaken for a promise or a
// JSON value, and `authenticate` stays the gateway's.
const NOT_METHODS: ReadonlySet<string> = new Set([
  'then',
  'catch',
  'finally',
  'toJSON',
  'authenticate',
]);

// Cap'n Web stubs answer these names themselves, so a remote method by that name is unreachable.
const STUB_RESERVED: ReadonlySet<string> = new Set(['dup', 'map', 'onRpcBroken']);

interface Credentials {
  token: string;
  proof?: string;
  /**
   * Epoch ms from which a call starts renewing these credentials in the background (a session
   * transport authenticates again on the same connection once the renewal arrives).
   */
  renewAt: number;
  /** Epoch ms from which a call waits for new credentials instead of presenting these. */
  usableUntil: number;
  /** Epoch ms the proof was signed at (bound tokens only). */
  provedAt?: number;
  /**
   * When the requester's answer arrived, in ms on the monotonic clock (`performance.now`): a
   * step of the wall clock must not stretch the pause it starts.
   */
  receivedAt: number;
  /** Whether they were asked for in place of a token the service refused. */
  replacesRefused: boolean;
}

/** A token request in flight: its answer, the calls waiting on it, and how to call it off. */
interface PendingTokenRequest {
  readonly answer: Promise<Credentials>;
  readonly startedAt: number;
  readonly controller: AbortController;
  /** Calls currently waiting with this request as the one they joined. */
  waiting: number;
  settled: boolean;
}

/** A call waiting for credentials, from whichever request brings them. */
interface CredentialsWaiter {
  arrived(credentials: Credentials): void;
  abandon(error: unknown): void;
}

/** A session opened on the transport, with `authenticate` already pipelined on it. */
interface AuthenticatedSession {
  opened: OpenedRpcSession;
  // deno-lint-ignore no-explicit-any
  ability: any;
  outstanding: number;
  /** Calls made on it so far (an HTTP-batch takes at most MAX_CALLS_PER_BATCH). */
  calls: number;
  /** The token `ability` was authenticated with, and when to authenticate again. */
  token: string;
  renewAt: number;
  /** Epoch ms at which the budget this session forwarded runs out (`undefined`: none). */
  endsAt: number | undefined;
  /** Why the connection broke, once it did (a session transport's typed failure). */
  brokenBy?: unknown;
  /** `ability` once resolved, on a session transport (released at the next authentication). */
  // deno-lint-ignore no-explicit-any
  resolved?: any;
}

/** Whether a token carries a key confirmation; read without verification, only to decide. */
function isBoundToken(token: string): boolean {
  try {
    const cnf = decodeJwt(token).cnf;
    return cnf !== null && typeof cnf === 'object';
  } catch {
    // Not a decodable JWT: the service is the authority and will refuse it with a reason.
    return false;
  }
}

/**
 * Most calls one HTTP-batch carries. Each call is two messages (push and pull), and a service
 * refuses a batch of more than 10 000 messages by default (413, every call in it failing):
 * calls past this go in the next batch, leaving room for a service with a lower limit.
 */
export const MAX_CALLS_PER_BATCH = 1000;

/**
 * Largest difference between two calls' deadlines that still lets them share an HTTP-batch,
 * whose one `X-Svc-Timeout` is the budget left to the call that opened it. Clocks tick and the
 * wire counts in whole milliseconds, and a batch leaves a macrotask after it opens without
 * measuring again, so a budget is only exact to about this much anyway; calls started further
 * apart (say, one that waited longer for the token) go in separate batches, each carrying its
 * own budget, since the service fails a call once the budget it received runs out. The price:
 * calls that queued for the first token, started more than this far apart, leave in as many
 * batches; forwarding one budget for all of them would tell some calls less time than they have.
 */
export const BATCH_DEADLINE_TOLERANCE_MS = 2;

/**
 * How long a token request may go unanswered before a session without a budget stops sharing
 * it and asks again: long enough for any healthy plane, short enough that one request that
 * never answers does not hold every later call of the session.
 */
export const STALLED_TOKEN_REQUEST_MS = 30_000;

/** How long a background renewal waits after a failed token request that named no delay. */
export const RENEWAL_RETRY_MS = 1000;

/** The longest a background renewal waits on a plane's `Retry-After`. */
export const MAX_RENEWAL_PAUSE_MS = 30_000;

/** How long a proof is reused for new HTTP-batches; well inside its freshness window. */
const PROOF_REUSE_MS = 30_000;
/** How long a proof can still open a batch: the service's window, before its clock skew. */
const PROOF_USABLE_MS = CAPABILITY_PROOF_FRESHNESS_SECONDS * 1000;
/** Margin before a token's expiry from which a call renews it in the background. */
const TOKEN_RENEWAL_MARGIN_MS = 5_000;

/** When the token expires (epoch ms, read without verification; never when not decodable). */
function tokenExpiry(token: string): number {
  try {
    const exp = decodeJwt(token).exp;
    if (typeof exp === 'number' && Number.isFinite(exp)) return exp * 1000;
  } catch {
    // Not decodable: the service will refuse it; nothing to schedule.
  }
  return Number.POSITIVE_INFINITY;
}

/**
 * When to renew credentials and until when they can still be presented. A session transport
 * presents the proof only when it authenticates, right after the credentials arrive; every
 * HTTP-batch authenticates afresh, so there the proof's age counts too.
 */
function credentialTimes(
  token: string,
  provedAt: number | undefined,
  perBatch: boolean,
): Pick<Credentials, 'renewAt' | 'usableUntil'> {
  const expiresAt = tokenExpiry(token);
  const renewAt = expiresAt - TOKEN_RENEWAL_MARGIN_MS;
  if (provedAt === undefined || !perBatch) return { renewAt, usableUntil: expiresAt };
  return {
    renewAt: Math.min(renewAt, provedAt + PROOF_REUSE_MS),
    usableUntil: Math.min(expiresAt, provedAt + PROOF_USABLE_MS),
  };
}

/** Whether a call whose budget ends at `endsAt` may travel in `batch` (see the tolerance). */
function sharesDeadline(batch: AuthenticatedSession, endsAt: number | undefined): boolean {
  if (batch.endsAt === undefined || endsAt === undefined) return batch.endsAt === endsAt;
  return Math.abs(batch.endsAt - endsAt) <= BATCH_DEADLINE_TOLERANCE_MS;
}

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

function validateOptions(options: AbilitySessionOptions): void {
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

/** The state behind one session proxy. */
class AbilitySessionCore {
  readonly #options: AbilitySessionOptions;
  #disposed: SvcInternalError | undefined;
  /** The credentials calls present, once a request brought some. */
  #credentials: Credentials | undefined;
  /** The token request calls share, until it settles or stalls (see `#sharedRequest`). */
  #request: PendingTokenRequest | undefined;
  /** Every token request not yet answered, shared or not (aborted at disposal). */
  readonly #unanswered = new Set<PendingTokenRequest>();
  /** The token the service last refused as invalid, named in the next token request. */
  #refusedToken: string | undefined;
  readonly #waiters = new Set<CredentialsWaiter>();
  #session: AuthenticatedSession | undefined;
  #batch: AuthenticatedSession | undefined;
  readonly #openBatches = new Set<AuthenticatedSession>();
  /** Until when a background renewal waits after a failed token request (epoch ms). */
  #renewalPausedUntil = 0;
  /**
   * The service's refusal of credentials just received, and until when calls share it (ms on
   * the monotonic clock).
   */
  #freshTokenRefusal: { error: unknown; until: number } | undefined;
  readonly #pending = new Set<(error: unknown) => void>();

  constructor(options: AbilitySessionOptions) {
    this.#options = options;
  }

  /** Rejection handler of the direct path: after disposal, every failure is the disposal. */
  readonly #asDisposalError = (error: unknown): never => {
    throw this.#disposed ?? error;
  };

  /** Calls one ability method, bounded by the caller budget and by disposal. */
  call(method: string, input: unknown): Promise<unknown> {
    if (this.#disposed !== undefined) return Promise.reject(this.#disposed);
    if (STUB_RESERVED.has(method)) {
      return Promise.reject(
        new SvcConfigurationError(
          `Method name ${method} of ${this.#options.abilityId} cannot be called over Cap'n Web ` +
            '(stubs reserve it)',
        ),
      );
    }
    const budget = this.#options.timeoutMs;
    const session = this.#session;
    if (budget === undefined && session !== undefined && Date.now() < session.renewAt) {
      // The common case, kept free of timers: an authenticated session transport whose token is
      // not due for renewal, and no budget. The call goes straight out; a disposal closes the
      // session, which rejects the call, and the rejection is reported as the disposal. A 401
      // still marks the token refused, so the next call presents a fresh one.
      return session.ability[method](input).then(
        (value: unknown) => this.#typedResult(session, value),
        (error: unknown) => {
          this.#noteRefusedToken(session, error);
          return this.#asDisposalError(error);
        },
      );
    }
    if (budget === 0) return Promise.reject(this.#timeoutError(method, budget));
    const startedAt = Date.now();
    return new Promise((resolve, reject) => {
      let settled = false;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const settle = (finish: () => void) => {
        if (settled) return;
        settled = true;
        if (timer !== undefined) clearTimeout(timer);
        this.#pending.delete(onDispose);
        finish();
      };
      const onDispose = (error: unknown) => settle(() => reject(error));
      this.#pending.add(onDispose);
      if (budget !== undefined) {
        timer = setTimeout(
          () => settle(() => reject(this.#timeoutError(method, budget))),
          callerWaitMs(budget),
        );
      }
      this.#invoke(method, input, startedAt).then(
        (value) => settle(() => resolve(value)),
        (error) => settle(() => reject(error)),
      );
    });
  }

  /** Closes every open session; later calls reject with one `session_disposed` error. */
  dispose(): void {
    if (this.#disposed !== undefined) return;
    this.#disposed = new SvcInternalError(
      `Ability session for ${this.#options.abilityId} is disposed`,
      { reason: 'session_disposed' },
    );
    for (const reject of this.#pending) reject(this.#disposed);
    this.#pending.clear();
    for (const waiter of this.#waiters) waiter.abandon(this.#disposed);
    this.#waiters.clear();
    for (const pending of this.#unanswered) pending.controller.abort(this.#disposed);
    this.#unanswered.clear();
    this.#request = undefined;
    this.#session?.opened.close();
    for (const batch of this.#openBatches) batch.opened.close();
    this.#openBatches.clear();
    this.#batch = undefined;
  }

  async #invoke(method: string, input: unknown, startedAt: number): Promise<unknown> {
    const credentials = await this.#credentialsFor(method, startedAt);
    if (this.#disposed !== undefined) throw this.#disposed;
    const remaining = this.#remainingMs(startedAt);
    if (remaining !== undefined && remaining <= 0) {
      throw this.#timeoutError(method, this.#options.timeoutMs ?? 0);
    }
    const session = this.#sessionFor(credentials, startedAt, remaining);
    session.outstanding++;
    session.calls++;
    try {
      return this.#typedResult(session, await session.ability[method](input));
    } catch (error) {
      this.#noteRefusedToken(session, error);
      throw error;
    } finally {
      session.outstanding--;
      this.#closeFinishedBatch(session);
    }
  }

  /**
   * A streamed result fails, should its session end under it, with the session's own typed
   * reason (disposed, connection lost) rather than Cap'n Web's untyped one.
   */
  #typedResult(session: AuthenticatedSession, value: unknown): unknown {
    if (!(value instanceof ReadableStream)) return value;
    return streamWithTypedFailure(value, (error) => this.#disposed ?? session.brokenBy ?? error);
  }

  /**
   * A call refused with 401 was refused for its token (method checks refuse with 403): over
   * HTTP-batch at authentication, on a session transport by the service's check on every call
   * (the token expired, or its key left the JWKS). The session stops presenting it and asks for
   * another, naming the refused one so a caching requester does not hand it back; a long-lived
   * session authenticates again with the new one on the same connection.
   */
  #noteRefusedToken(session: AuthenticatedSession, error: unknown): void {
    const info = svcErrorInfo(error);
    if (info.code !== 'capability_auth' || info.status !== 401) return;
    const credentials = this.#credentials;
    if (credentials?.token !== session.token) return;
    this.#tokenRefused(credentials, error);
    session.renewAt = Number.NEGATIVE_INFINITY;
  }

  /**
   * Stops presenting credentials the service refused with 401 and names them in the next token
   * request. A replacement for refused credentials, refused in turn within
   * {@link RENEWAL_RETRY_MS} of its arrival, says the service refuses what the plane issues now
   * (a key it does not know yet, say): until that much time has passed since it arrived, calls
   * fail with the same refusal instead of each asking the plane for another token the service
   * would refuse too.
   */
  #tokenRefused(credentials: Credentials, error: unknown): void {
    this.#credentials = undefined;
    this.#refusedToken = credentials.token;
    if (
      credentials.replacesRefused && performance.now() - credentials.receivedAt < RENEWAL_RETRY_MS
    ) {
      this.#freshTokenRefusal = { error, until: credentials.receivedAt + RENEWAL_RETRY_MS };
    }
  }

  #remainingMs(startedAt: number): number | undefined {
    const budget = this.#options.timeoutMs;
    return budget === undefined ? undefined : budget - (Date.now() - startedAt);
  }

  #timeoutError(method: string, budget: number): SvcTimeoutError {
    return new SvcTimeoutError(
      `Call to ${this.#options.abilityId} method ${method} exceeded its ${budget} ms budget`,
    );
  }

  /**
   * The credentials a call started at `startedAt` presents. Those in hand serve until they can
   * no longer be presented; once due for renewal, the call also starts renewing them in the
   * background. Without usable credentials the call waits for a request's answer, within its
   * budget.
   */
  #credentialsFor(method: string, startedAt: number): Credentials | Promise<Credentials> {
    const credentials = this.#credentials;
    const now = Date.now();
    if (credentials === undefined) {
      const refusal = this.#freshTokenRefusal;
      if (refusal !== undefined && performance.now() < refusal.until) {
        return Promise.reject(refusal.error);
      }
    }
    if (
      credentials === undefined || now >= credentials.usableUntil ||
      this.#proofTooOldToPresent(credentials, now)
    ) {
      return this.#awaitCredentials(method, startedAt);
    }
    if (
      now >= credentials.renewAt && now >= this.#renewalPausedUntil &&
      this.#sharedRequest() === undefined
    ) {
      // Nobody waits on this renewal, so its failure fails no call: the credentials in hand stay
      // in use until they expire, and the next call due for renewal asks again.
      this.#requestCredentials();
    }
    return credentials;
  }

  /**
   * Whether a session transport would present these credentials' proof (it authenticates with
   * them next) after the proof has aged past reuse: the service refuses a proof older than its
   * freshness window, and a renewal that arrived in the background may be presented long after
   * it was signed. The call then waits for credentials with a fresh proof. Credentials already
   * presented on the open session need no proof again; HTTP-batch bounds the proof's age through
   * `usableUntil`.
   */
  #proofTooOldToPresent(credentials: Credentials, now: number): boolean {
    if (credentials.provedAt === undefined || this.#options.transport.kind === 'http-batch') {
      return false;
    }
    if (this.#session !== undefined && this.#session.token === credentials.token) return false;
    return now - credentials.provedAt >= PROOF_REUSE_MS;
  }

  /**
   * The pending request calls may share. One that has not answered within a call's budget (or,
   * without a budget, within {@link STALLED_TOKEN_REQUEST_MS}) is taken as stalled, so the next
   * call asks again instead of sharing it: a waiting call drops it when it gives up, and this
   * catches a renewal nobody waits on before the credentials in hand expire. Calls without a
   * budget that already wait on a stalled request keep waiting; later ones are not held by it.
   */
  #sharedRequest(): PendingTokenRequest | undefined {
    const pending = this.#request;
    if (pending === undefined) return undefined;
    const patience = this.#options.timeoutMs ?? STALLED_TOKEN_REQUEST_MS;
    return Date.now() - pending.startedAt >= patience ? undefined : pending;
  }

  /**
   * Starts a token request as the one later calls share. Its answer becomes the session's
   * credentials and reaches every waiting call; a request a waiting call gave up on (no longer
   * the shared one) still delivers, so a token that arrives late is not lost, but it replaces
   * credentials in hand only when it outlasts them.
   */
  #requestCredentials(): PendingTokenRequest {
    const controller = new AbortController();
    const pending: PendingTokenRequest = {
      answer: this.#fetchCredentials(controller.signal),
      startedAt: Date.now(),
      controller,
      waiting: 0,
      settled: false,
    };
    this.#request = pending;
    this.#unanswered.add(pending);
    const settle = () => {
      pending.settled = true;
      this.#unanswered.delete(pending);
      const shared = this.#request === pending;
      if (shared) this.#request = undefined;
      return shared;
    };
    pending.answer.then(
      (credentials) => this.#deliver(credentials, settle()),
      (error) => {
        settle();
        this.#pauseRenewal(error);
      },
    );
    return pending;
  }

  /**
   * After a failed request, a renewal in the background (credentials still in hand) waits a
   * while before asking again: the plane's `Retry-After` when it sent one, else
   * {@link RENEWAL_RETRY_MS}, at most {@link MAX_RENEWAL_PAUSE_MS}. Without it, every call made
   * while the plane sheds load (429, 503) would send it one more request.
   */
  #pauseRenewal(error: unknown): void {
    const asked = (error as { retryAfterMs?: unknown } | null)?.retryAfterMs;
    const pause = typeof asked === 'number' && Number.isFinite(asked) && asked >= 0
      ? Math.min(asked, MAX_RENEWAL_PAUSE_MS)
      : RENEWAL_RETRY_MS;
    this.#renewalPausedUntil = Date.now() + pause;
  }

  /**
   * Calls off a request nobody wants any more: no call waits on it and later calls do not share
   * it. The requester is told through the request's signal.
   */
  #abortIfAbandoned(pending: PendingTokenRequest): void {
    if (pending.settled || pending.waiting > 0 || this.#request === pending) return;
    this.#unanswered.delete(pending);
    pending.controller.abort();
  }

  /**
   * Takes in a request's answer and hands the session's credentials to every waiting call. The
   * shared request's answer always replaces what is in hand (it is the requester's latest word);
   * a late answer from a request calls gave up on only when it lasts longer.
   */
  #deliver(credentials: Credentials, shared: boolean): void {
    const current = this.#credentials;
    if (
      this.#disposed === undefined &&
      (shared || current === undefined || Date.now() >= current.usableUntil ||
        credentials.usableUntil > current.usableUntil)
    ) {
      this.#credentials = credentials;
    }
    const delivered = this.#credentials ?? credentials;
    for (const waiter of this.#waiters) waiter.arrived(delivered);
  }

  /**
   * Waits for credentials from the shared request (starting one when there is none) or from any
   * other request that answers first, but no longer than the call's remaining budget. The
   * request's failure fails the call. A call that gives up drops the request if it is still the
   * shared one, so the next call asks the requester again instead of waiting on a request that
   * may never answer; calls already waiting on it keep their own budgets.
   */
  #awaitCredentials(method: string, startedAt: number): Promise<Credentials> {
    const pending = this.#sharedRequest() ?? this.#requestCredentials();
    const remaining = this.#remainingMs(startedAt);
    pending.waiting++;
    return new Promise((resolve, reject) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const waiter: CredentialsWaiter = {
        arrived: (credentials) => settle(() => resolve(credentials)),
        abandon: (error) => settle(() => reject(error)),
      };
      const settle = (finish: () => void) => {
        if (!this.#waiters.delete(waiter)) return;
        if (timer !== undefined) clearTimeout(timer);
        pending.waiting--;
        finish();
        this.#abortIfAbandoned(pending);
      };
      this.#waiters.add(waiter);
      pending.answer.catch(waiter.abandon);
      if (remaining !== undefined) {
        timer = setTimeout(() => {
          if (this.#request === pending) this.#request = undefined;
          waiter.abandon(this.#timeoutError(method, this.#options.timeoutMs ?? 0));
        }, Math.min(Math.max(0, remaining), MAX_TIMER_DELAY_MS));
      }
    });
  }

  async #fetchCredentials(signal: AbortSignal): Promise<Credentials> {
    const { abilityId, callerServiceId, targetServiceId, scopes, requestToken } = this.#options;
    const refusedToken = this.#refusedToken;
    const token = await requestToken({
      callerServiceId,
      targetServiceId,
      abilityId,
      scopes: [...scopes],
      ...(refusedToken !== undefined ? { refusedToken } : {}),
      signal,
    });
    if (token !== refusedToken && this.#refusedToken === refusedToken) {
      this.#refusedToken = undefined;
    }
    if (typeof token !== 'string' || token === '') {
      throw new CapabilityAuthError(`The token requester returned no token for ${abilityId}`, {
        reason: 'token_missing',
      });
    }
    const perBatch = this.#options.transport.kind === 'http-batch';
    const arrival = {
      receivedAt: performance.now(),
      replacesRefused: refusedToken !== undefined,
    };
    if (!isBoundToken(token)) {
      return { token, ...arrival, ...credentialTimes(token, undefined, perBatch) };
    }
    const prover = this.#options.proveTokenPossession ?? requestToken.proveTokenPossession;
    if (typeof prover !== 'function') {
      throw new CapabilityAuthError(
        `The token for ${abilityId} is bound to a key (cnf), but no proveTokenPossession ` +
          'signer was given',
        { reason: 'proof_signer_missing' },
      );
    }
    const provedAt = Date.now();
    const proof = await prover({ token, targetServiceId, abilityId });
    return {
      token,
      proof,
      provedAt,
      ...arrival,
      ...credentialTimes(token, provedAt, perBatch),
    };
  }

  #metadata(remaining: number | undefined): OutboundRpcMetadata {
    const { requestId, idempotencyKey, connInfo } = this.#options;
    return {
      ...(requestId !== undefined ? { requestId } : {}),
      ...(remaining !== undefined ? { timeoutMs: remaining } : {}),
      ...(idempotencyKey !== undefined ? { idempotencyKey } : {}),
      ...(connInfo !== undefined ? { connInfo } : {}),
    };
  }

  #open(credentials: Credentials, remaining: number | undefined): AuthenticatedSession {
    const opened = this.#options.transport.open(this.#metadata(remaining), {
      abilityId: this.#options.abilityId,
    });
    const { token, renewAt } = credentials;
    return {
      opened,
      ability: authenticated(opened, credentials),
      outstanding: 0,
      calls: 0,
      token,
      renewAt,
      endsAt: remaining === undefined ? undefined : Date.now() + remaining,
    };
  }

  /**
   * The long-lived session every call travels with: opened on first use, and authenticated again
   * on the same connection with each renewed token (the service checks the token on every call,
   * so an expired one would stop the session) and after a refused authentication (a transient
   * refusal must not stop the session for good). A broken connection is forgotten, so the next
   * call opens a fresh one.
   */
  #longLivedSession(credentials: Credentials, remaining: number | undefined) {
    let session = this.#session;
    if (session === undefined) {
      const opened = session = this.#open(credentials, remaining);
      this.#session = opened;
      opened.opened.onBroken?.((error) => {
        opened.brokenBy = error;
        this.#forgetSession(opened);
      });
      this.#watchAuthentication(opened);
    } else if (session.token !== credentials.token) {
      this.#releaseAbility(session);
      session.ability = authenticated(session.opened, credentials);
      session.token = credentials.token;
      session.renewAt = credentials.renewAt;
      this.#watchAuthentication(session);
    }
    return session;
  }

  /**
   * Keeps the resolved ability stub (to release it at the next authentication) or, when the
   * authentication is refused, marks the session for a new one with fresh credentials. The
   * connection stays open: calls pipelined on the refused stub still get the specific refusal.
   */
  #watchAuthentication(session: AuthenticatedSession): void {
    const ability = session.ability;
    Promise.resolve(ability).then(
      (stub) => {
        if (session.ability === ability) session.resolved = stub;
        else stub?.[Symbol.dispose]?.();
      },
      (error) => {
        if (session.ability !== ability) return;
        // Credentials a renewal brought since are kept: the next call authenticates with them.
        const credentials = this.#credentials;
        if (credentials?.token === session.token) {
          if (svcErrorInfo(error).status === 401) this.#tokenRefused(credentials, error);
          else this.#credentials = undefined;
        }
        session.token = '';
        session.renewAt = Number.NEGATIVE_INFINITY;
      },
    );
  }

  /** Releases the current ability stub; calls pipelined on it were delivered when it resolved. */
  #releaseAbility(session: AuthenticatedSession): void {
    session.resolved?.[Symbol.dispose]?.();
    session.resolved = undefined;
  }

  #forgetSession(session: AuthenticatedSession): void {
    if (this.#session !== session) return;
    this.#session = undefined;
    this.#credentials = undefined;
    session.opened.close();
  }

  /**
   * The authenticated session a call made now travels with, opening one when needed. A call
   * joins the open HTTP-batch only when its budget ends with the budget the batch forwards.
   */
  #sessionFor(
    credentials: Credentials,
    startedAt: number,
    remaining: number | undefined,
  ): AuthenticatedSession {
    if (this.#options.transport.kind !== 'http-batch') {
      return this.#longLivedSession(credentials, remaining);
    }
    const budget = this.#options.timeoutMs;
    if (
      this.#batch === undefined || !this.#batch.opened.acceptsCalls() ||
      this.#batch.calls >= MAX_CALLS_PER_BATCH ||
      !sharesDeadline(this.#batch, budget === undefined ? undefined : startedAt + budget)
    ) {
      this.#batch = this.#open(credentials, remaining);
      this.#openBatches.add(this.#batch);
    }
    return this.#batch;
  }

  /** A batch whose request went out and whose calls all settled has nothing left to do. */
  #closeFinishedBatch(session: AuthenticatedSession): void {
    if (!this.#openBatches.has(session)) return;
    if (session.outstanding > 0 || session.opened.acceptsCalls()) return;
    this.#openBatches.delete(session);
    if (this.#batch === session) this.#batch = undefined;
    session.opened.close();
  }
}

/** `authenticate` pipelined on `opened`: a promise of the ability stub, not awaited. */
function authenticated(opened: OpenedRpcSession, credentials: Credentials) {
  const { token, proof } = credentials;
  return proof === undefined
    ? opened.main.authenticate(token)
    : opened.main.authenticate(token, proof);
}

const sessionCores = new WeakMap<object, AbilitySessionCore>();

/**
 * Opens a typed session with one ability of another service. Nothing travels until the first
 * call. `session.someMethod(input)` returns a promise of the method's output (a
 * `ReadableStream` for streaming methods, which need a session transport).
 */
export function abilitySession<Api = AnyMethods>(
  options: AbilitySessionOptions,
): AbilitySession<Api> {
  validateOptions(options);
  const core = new AbilitySessionCore(options);
  const methods = new Map<string, (input: unknown) => Promise<unknown>>();
  const dispose = () => core.dispose();
  const asyncDispose = () => {
    core.dispose();
    return Promise.resolve();
  };
  const proxy = new Proxy(Object.create(null) as object, {
    get(_target, key) {
      if (DISPOSE_KEYS.has(key)) return dispose;
      if (ASYNC_DISPOSE_KEYS.has(key)) return asyncDispose;
      if (typeof key !== 'string' || NOT_METHODS.has(key) || key in Object.prototype) {
        return undefined;
      }
      let method = methods.get(key);
      if (method === undefined) {
        method = (input: unknown) => core.call(key, input);
        methods.set(key, method);
      }
      return method;
    },
    set: () => false,
    defineProperty: () => false,
    deleteProperty: () => false,
  });
  sessionCores.set(proxy, core);
  return proxy as AbilitySession<Api>;
}

/** Disposes a session (idempotent); afterwards every call rejects with `session_disposed`. */
export function disposeAbilitySession(session: AbilitySession<unknown> | Disposable): void {
  const core = sessionCores.get(session as object);
  if (core !== undefined) core.dispose();
  else (session as Disposable)[Symbol.dispose]?.();
}
