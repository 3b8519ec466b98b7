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
 * Parts: `session-options.ts` (the options, their checks, the budget arithmetic),
 * `session-credentials.ts` (token requests and renewal), `session-core.ts` (calls and the
 * connections they travel on); this file is the typed proxy over them.
 *
 * @module
 */
import { AbilitySessionCore } from './session-core.ts';
import {
  type AbilitySession,
  type AbilitySessionOptions,
  type AnyMethods,
  validateOptions,
} from './session-options.ts';

export {
  type AbilitySession,
  type AbilitySessionMethods,
  type AbilitySessionOptions,
  type ProofSigner,
  refuseAbilityOutsideTarget,
  type TokenRequest,
  type TokenRequester,
} from './session-options.ts';
export { BATCH_DEADLINE_TOLERANCE_MS, MAX_CALLS_PER_BATCH } from './session-core.ts';
export {
  MAX_RENEWAL_PAUSE_MS,
  RENEWAL_RETRY_MS,
  STALLED_TOKEN_REQUEST_MS,
} from './session-credentials.ts';

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
