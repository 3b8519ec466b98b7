/**
 * The state behind one session proxy: its calls, each bounded by the caller budget and by
 * disposal, and the connections they travel on (one long-lived session transport, or a fresh
 * HTTP-batch per macrotask and deadline).
 *
 * @module
 */
import { SvcConfigurationError, svcErrorInfo, SvcInternalError } from '../core/errors.ts';
import { callerWaitMs } from '../core/deadline.ts';
import { type Credentials, SessionCredentials } from './session-credentials.ts';
import {
  type AbilitySessionOptions,
  budgetExceeded,
  remainingBudgetMs,
} from './session-options.ts';
import { streamWithTypedFailure } from './stream-failure.ts';
import {
  isPerCallTransport,
  type OpenedRpcSession,
  type OutboundRpcMetadata,
} from './transports/outbound-metadata.ts';

// Cap'n Web stubs answer these names themselves, so a remote method by that name is unreachable.
const STUB_RESERVED: ReadonlySet<string> = new Set(['dup', 'map', 'onRpcBroken']);

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

/** Whether a call whose budget ends at `endsAt` may travel in `batch` (see the tolerance). */
function sharesDeadline(batch: AuthenticatedSession, endsAt: number | undefined): boolean {
  if (batch.endsAt === undefined || endsAt === undefined) return batch.endsAt === endsAt;
  return Math.abs(batch.endsAt - endsAt) <= BATCH_DEADLINE_TOLERANCE_MS;
}

/**
 * A call on the bounded path: it settles once, with its answer, when its budget runs out, or
 * when the session is disposed, and leaves the session's pending set as it does. One object
 * per call rather than a closure per outcome.
 */
class BoundedCall {
  #settled = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  readonly #resolve: (value: unknown) => void;
  readonly #reject: (error: unknown) => void;
  readonly #pending: Set<BoundedCall>;

  constructor(
    resolve: (value: unknown) => void,
    reject: (error: unknown) => void,
    pending: Set<BoundedCall>,
  ) {
    this.#resolve = resolve;
    this.#reject = reject;
    this.#pending = pending;
    pending.add(this);
  }

  /** Fails the call with `error()` after `ms` unless it settled first. */
  failAfter(ms: number, error: () => unknown): void {
    this.#timer = setTimeout(() => this.fail(error()), ms);
  }

  succeed(value: unknown): void {
    if (this.#settle()) this.#resolve(value);
  }

  fail(error: unknown): void {
    if (this.#settle()) this.#reject(error);
  }

  /** Whether this is the call's first outcome; the others are ignored. */
  #settle(): boolean {
    if (this.#settled) return false;
    this.#settled = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#pending.delete(this);
    return true;
  }
}

/** The state behind one session proxy. */
export class AbilitySessionCore {
  readonly #options: AbilitySessionOptions;
  #disposed: SvcInternalError | undefined;
  readonly #credentials: SessionCredentials;
  #session: AuthenticatedSession | undefined;
  #batch: AuthenticatedSession | undefined;
  readonly #openBatches = new Set<AuthenticatedSession>();
  /** Finished batches whose connection stays open for a stream still being read. */
  readonly #finishing = new Set<OpenedRpcSession>();
  readonly #pending = new Set<BoundedCall>();

  constructor(options: AbilitySessionOptions) {
    this.#options = options;
    this.#credentials = new SessionCredentials(options);
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
    if (budget === 0) return Promise.reject(budgetExceeded(this.#options, method));
    const startedAt = Date.now();
    return new Promise((resolve, reject) => {
      const call = new BoundedCall(resolve, reject, this.#pending);
      if (budget !== undefined) {
        call.failAfter(callerWaitMs(budget), () => budgetExceeded(this.#options, method));
      }
      this.#invoke(method, input, startedAt).then(
        (value) => call.succeed(value),
        (error) => call.fail(error),
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
    for (const call of this.#pending) call.fail(this.#disposed);
    this.#pending.clear();
    this.#credentials.dispose(this.#disposed);
    this.#session?.opened.close();
    for (const batch of this.#openBatches) batch.opened.close();
    this.#openBatches.clear();
    for (const opened of this.#finishing) opened.close();
    this.#finishing.clear();
    this.#batch = undefined;
  }

  async #invoke(method: string, input: unknown, startedAt: number): Promise<unknown> {
    const credentials = await this.#credentials.for(method, startedAt, this.#session?.token);
    if (this.#disposed !== undefined) throw this.#disposed;
    const remaining = remainingBudgetMs(this.#options, startedAt);
    if (remaining !== undefined && remaining <= 0) {
      throw budgetExceeded(this.#options, method);
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
    const credentials = this.#credentials.current;
    if (credentials?.token !== session.token) return;
    this.#credentials.refuse(credentials, error);
    session.renewAt = Number.NEGATIVE_INFINITY;
  }

  #metadata(remaining: number | undefined): OutboundRpcMetadata {
    const { requestId, idempotencyKey, connInfo } = this.#options;
    // Set one by one: spreading conditional objects is slow on some engines, once per batch.
    const metadata: OutboundRpcMetadata = {};
    if (requestId !== undefined) metadata.requestId = requestId;
    if (remaining !== undefined) metadata.timeoutMs = remaining;
    if (idempotencyKey !== undefined) metadata.idempotencyKey = idempotencyKey;
    if (connInfo !== undefined) metadata.connInfo = connInfo;
    return metadata;
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
        const credentials = this.#credentials.current;
        if (credentials?.token === session.token) {
          if (svcErrorInfo(error).status === 401) this.#credentials.refuse(credentials, error);
          else this.#credentials.drop();
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
    this.#credentials.drop();
    session.opened.close();
  }

  /**
   * The authenticated session a call made now travels with, opening one when needed. A call
   * joins the open batch of a per-call transport only when its budget ends with the budget the
   * batch forwards.
   */
  #sessionFor(
    credentials: Credentials,
    startedAt: number,
    remaining: number | undefined,
  ): AuthenticatedSession {
    if (!isPerCallTransport(this.#options.transport.kind)) {
      return this.#longLivedSession(credentials, remaining);
    }
    const budget = this.#options.timeoutMs;
    if (
      this.#batch === undefined || !this.#batch.opened.acceptsCalls() ||
      this.#batch.calls >= MAX_CALLS_PER_BATCH ||
      !sharesDeadline(this.#batch, budget === undefined ? undefined : startedAt + budget)
    ) {
      const batch = this.#batch = this.#open(credentials, remaining);
      this.#openBatches.add(batch);
      batch.opened.onBroken?.((error) => {
        batch.brokenBy = error;
      });
    }
    return this.#batch;
  }

  /** A batch whose request went out and whose calls all settled has nothing left to do. */
  #closeFinishedBatch(session: AuthenticatedSession): void {
    if (!this.#openBatches.has(session)) return;
    if (session.outstanding > 0 || session.opened.acceptsCalls()) return;
    this.#openBatches.delete(session);
    if (this.#batch === session) this.#batch = undefined;
    const { opened } = session;
    if (opened.finish === undefined) return opened.close();
    // A stream it returned may still be read: the transport ends the connection after it, and
    // until then disposing of the session still ends it.
    this.#finishing.add(opened);
    opened.finish(() => this.#finishing.delete(opened));
  }
}

/** `authenticate` pipelined on `opened`: a promise of the ability stub, not awaited. */
function authenticated(opened: OpenedRpcSession, credentials: Credentials) {
  const { token, proof } = credentials;
  return proof === undefined
    ? opened.main.authenticate(token)
    : opened.main.authenticate(token, proof);
}
