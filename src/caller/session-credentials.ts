/**
 * The credentials of one session: the token (and, for a bound token, the proof) its calls
 * present, the token requests that bring them, and their renewal.
 *
 * Renewal: once credentials near their end the next call starts a renewal in the background and
 * still travels with them; only credentials that can no longer be presented (the token expired,
 * or over HTTP-batch the proof is too old) make a call wait for new ones. A failed renewal fails
 * no call while the credentials in hand are valid; a later call tries again. A call waits for
 * credentials only within what is left of its budget; one that gives up drops the request it
 * waited on (unless a newer one replaced it), so a token request that stalls once does not hold
 * later calls.
 *
 * @module
 */
import { decodeJwt } from 'jose';
import { CapabilityAuthError } from '../core/errors.ts';
import { MAX_TIMER_DELAY_MS } from '../core/deadline.ts';
import { CAPABILITY_PROOF_FRESHNESS_SECONDS } from '../service/proof-verify.ts';
import {
  type AbilitySessionOptions,
  budgetExceeded,
  remainingBudgetMs,
} from './session-options.ts';

/** The token a session presents, its proof when bound, and when to renew them. */
export interface Credentials {
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

/**
 * The credentials behind one session and the token requests that bring them: calls share one
 * request at a time, a request nobody waits on any more is called off, and a renewal nobody
 * waits on fails no call.
 */
export class SessionCredentials {
  readonly #options: AbilitySessionOptions;
  #disposed: unknown;
  /** The credentials calls present, once a request brought some. */
  #credentials: Credentials | undefined;
  /** The token request calls share, until it settles or stalls (see `#sharedRequest`). */
  #request: PendingTokenRequest | undefined;
  /** Every token request not yet answered, shared or not (aborted at disposal). */
  readonly #unanswered = new Set<PendingTokenRequest>();
  /** The token the service last refused as invalid, named in the next token request. */
  #refusedToken: string | undefined;
  readonly #waiters = new Set<CredentialsWaiter>();
  /** Until when a background renewal waits after a failed token request (epoch ms). */
  #renewalPausedUntil = 0;
  /**
   * The service's refusal of credentials just received, and until when calls share it (ms on
   * the monotonic clock).
   */
  #freshTokenRefusal: { error: unknown; until: number } | undefined;

  constructor(options: AbilitySessionOptions) {
    this.#options = options;
  }

  /** The credentials in hand, if any. */
  get current(): Credentials | undefined {
    return this.#credentials;
  }

  /** Forgets the credentials in hand (their connection broke, or their authentication failed). */
  drop(): void {
    this.#credentials = undefined;
  }

  /** Fails every waiting call with `error` and calls off every unanswered token request. */
  dispose(error: unknown): void {
    this.#disposed = error;
    for (const waiter of this.#waiters) waiter.abandon(error);
    this.#waiters.clear();
    for (const pending of this.#unanswered) pending.controller.abort(error);
    this.#unanswered.clear();
    this.#request = undefined;
  }

  /**
   * Stops presenting credentials the service refused with 401 and names them in the next token
   * request. A replacement for refused credentials, refused in turn within
   * {@link RENEWAL_RETRY_MS} of its arrival, says the service refuses what the plane issues now
   * (a key it does not know yet, say): until that much time has passed since it arrived, calls
   * fail with the same refusal instead of each asking the plane for another token the service
   * would refuse too.
   */
  refuse(credentials: Credentials, error: unknown): void {
    this.#credentials = undefined;
    this.#refusedToken = credentials.token;
    if (
      credentials.replacesRefused && performance.now() - credentials.receivedAt < RENEWAL_RETRY_MS
    ) {
      this.#freshTokenRefusal = { error, until: credentials.receivedAt + RENEWAL_RETRY_MS };
    }
  }

  /**
   * The credentials a call started at `startedAt` presents. Those in hand serve until they can
   * no longer be presented; once due for renewal, the call also starts renewing them in the
   * background. Without usable credentials the call waits for a request's answer, within its
   * budget. `presentedToken` is the token the open session transport authenticated with, if any.
   */
  for(
    method: string,
    startedAt: number,
    presentedToken: string | undefined,
  ): Credentials | Promise<Credentials> {
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
      this.#proofTooOldToPresent(credentials, now, presentedToken)
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
  #proofTooOldToPresent(
    credentials: Credentials,
    now: number,
    presentedToken: string | undefined,
  ): boolean {
    if (credentials.provedAt === undefined || this.#options.transport.kind === 'http-batch') {
      return false;
    }
    if (presentedToken === credentials.token) return false;
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
    const remaining = remainingBudgetMs(this.#options, startedAt);
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
          waiter.abandon(budgetExceeded(this.#options, method));
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
}
