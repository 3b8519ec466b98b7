/**
 * The caller's typed, disposable session with one ability of another service.
 *
 * A session gets a capability token from its requester (it caches nothing across sessions),
 * signs a proof of possession only when the token is bound (`cnf`), and authenticates inside
 * the RPC session, pipelined with the first call. Over HTTP-batch each macrotask's calls travel
 * in a fresh batch that repeats `authenticate` with the same token, so one session serves calls
 * over time; over WebSocket and custom transports one session carries every call.
 *
 * Deadlines: `timeoutMs` is the caller's budget for each call, token and proof included. Each
 * outbound batch (or, on WebSocket, the socket at open) carries what is left of it, and the
 * local wait ends `SVC_TIMEOUT_GRACE_MS` after the budget so the peer's own verdict normally
 * arrives first. A timed-out call rejects with `SvcTimeoutError`; the session stays usable.
 *
 * @module
 */
import { decodeJwt } from 'jose';
import {
  CapabilityAuthError,
  SvcConfigurationError,
  SvcInternalError,
  SvcTimeoutError,
} from '../core/errors.ts';
import { callerWaitMs } from '../core/deadline.ts';
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
  callerServiceId: string;
  targetServiceId: string;
  abilityId: string;
  scopes: string[];
}

/**
 * Obtains a capability token. A requester may carry its own prover, which sessions use
 * automatically for bound tokens.
 */
export type TokenRequester = ((request: TokenRequest) => Promise<string>) & {
  proveTokenPossession?: ProofSigner;
};

/** Options of {@link abilitySession} (the contract's caller-side session options). */
export interface AbilitySessionOptions {
  abilityId: string;
  callerServiceId: string;
  targetServiceId: string;
  scopes: string[];
  requestToken: TokenRequester;
  transport: RpcTransportFactory;
  /** Budget of each call in milliseconds, token issuance included; `0` fails every call. */
  timeoutMs?: number;
  idempotencyKey?: string;
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
  /** Epoch ms after which a new HTTP-batch should not reuse these credentials. */
  reuseUntil: number;
  /**
   * Epoch ms after which the token itself should be replaced: an open session transport
   * authenticates again with a fresh token then (its proof only matters at authentication).
   */
  renewAt: number;
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

/** How long a proof is reused for new HTTP-batches; well inside its 60 s freshness window. */
const PROOF_REUSE_MS = 30_000;
/** Margin before a token's expiry after which a new HTTP-batch asks for a fresh token. */
const TOKEN_EXPIRY_MARGIN_MS = 5_000;

/** When a new HTTP-batch should stop reusing this token (read without verification). */
function tokenReuseDeadline(token: string): number {
  try {
    const exp = decodeJwt(token).exp;
    if (typeof exp === 'number' && Number.isFinite(exp)) return exp * 1000 - TOKEN_EXPIRY_MARGIN_MS;
  } catch {
    // Not decodable: the service will refuse it; nothing to schedule.
  }
  return Number.POSITIVE_INFINITY;
}

function requireText(value: unknown, name: string): string {
  if (typeof value !== 'string' || value === '') {
    throw new SvcConfigurationError(`abilitySession: ${name} must be a non-empty string`);
  }
  return value;
}

function validateOptions(options: AbilitySessionOptions): void {
  requireText(options?.abilityId, 'abilityId');
  requireText(options.callerServiceId, 'callerServiceId');
  requireText(options.targetServiceId, 'targetServiceId');
  if (!Array.isArray(options.scopes) || options.scopes.some((s) => typeof s !== 'string')) {
    throw new SvcConfigurationError('abilitySession: scopes must be an array of strings');
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
  #credentials: Promise<Credentials> | undefined;
  #session: AuthenticatedSession | undefined;
  #batch: AuthenticatedSession | undefined;
  readonly #openBatches = new Set<AuthenticatedSession>();
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
      // The common case, kept free of per-call wrappers: an authenticated session transport
      // whose token is not due for renewal, and no budget. The call goes straight out; a
      // disposal closes the session, which rejects the call, and the rejection is reported as
      // the disposal.
      return session.ability[method](input).then(undefined, this.#asDisposalError);
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
    this.#session?.opened.close();
    for (const batch of this.#openBatches) batch.opened.close();
    this.#openBatches.clear();
    this.#batch = undefined;
  }

  async #invoke(method: string, input: unknown, startedAt: number): Promise<unknown> {
    const credentials = await this.#obtainCredentials();
    if (this.#disposed !== undefined) throw this.#disposed;
    const remaining = this.#remainingMs(startedAt);
    if (remaining !== undefined && remaining <= 0) {
      throw this.#timeoutError(method, this.#options.timeoutMs ?? 0);
    }
    const session = this.#sessionFor(credentials, remaining);
    session.outstanding++;
    session.calls++;
    try {
      return await session.ability[method](input);
    } finally {
      session.outstanding--;
      this.#closeFinishedBatch(session);
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
   * The token (and proof, for a bound token), fetched once per session; a failure is retried.
   * Every HTTP-batch is a session open at the service, so a batch-based session renews its
   * credentials before the token expires or the proof stops being fresh (the requester's own
   * cache makes a renewal cheap); a long-lived session transport authenticates only once.
   */
  async #obtainCredentials(): Promise<Credentials> {
    if (this.#credentials !== undefined) {
      const current = this.#credentials;
      const credentials = await current.catch(() => undefined);
      const due = this.#options.transport.kind === 'http-batch'
        ? credentials?.reuseUntil
        : credentials?.renewAt;
      if (due !== undefined && Date.now() >= due) {
        if (this.#credentials === current) this.#credentials = undefined;
      }
    }
    if (this.#credentials === undefined) {
      const pending = this.#fetchCredentials();
      this.#credentials = pending;
      pending.catch(() => {
        if (this.#credentials === pending) this.#credentials = undefined;
      });
    }
    return this.#credentials;
  }

  async #fetchCredentials(): Promise<Credentials> {
    const { abilityId, callerServiceId, targetServiceId, scopes, requestToken } = this.#options;
    const token = await requestToken({
      callerServiceId,
      targetServiceId,
      abilityId,
      scopes: [...scopes],
    });
    if (typeof token !== 'string' || token === '') {
      throw new CapabilityAuthError(`The token requester returned no token for ${abilityId}`, {
        reason: 'token_missing',
      });
    }
    const reuseUntil = tokenReuseDeadline(token);
    if (!isBoundToken(token)) return { token, reuseUntil, renewAt: reuseUntil };
    const prover = this.#options.proveTokenPossession ?? requestToken.proveTokenPossession;
    if (typeof prover !== 'function') {
      throw new CapabilityAuthError(
        `The token for ${abilityId} is bound to a key (cnf), but no proveTokenPossession ` +
          'signer was given',
        { reason: 'proof_signer_missing' },
      );
    }
    const proof = await prover({ token, targetServiceId, abilityId });
    return {
      token,
      proof,
      reuseUntil: Math.min(reuseUntil, Date.now() + PROOF_REUSE_MS),
      renewAt: reuseUntil,
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
      opened.opened.onBroken?.(() => this.#forgetSession(opened));
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
      () => {
        if (session.ability !== ability) return;
        session.token = '';
        session.renewAt = Number.NEGATIVE_INFINITY;
        this.#credentials = undefined;
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

  /** The authenticated session a call made now travels with, opening one when needed. */
  #sessionFor(credentials: Credentials, remaining: number | undefined): AuthenticatedSession {
    if (this.#options.transport.kind !== 'http-batch') {
      return this.#longLivedSession(credentials, remaining);
    }
    if (
      this.#batch === undefined || !this.#batch.opened.acceptsCalls() ||
      this.#batch.calls >= MAX_CALLS_PER_BATCH
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
