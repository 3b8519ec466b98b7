/**
 * One call of a handler as the wrapper runs it: the session context it is made from, the factory
 * input the handler is built with (its abort signal made only on first read), and the deadline
 * that bounds a unary call.
 *
 * @module
 */
import type { ResourceOutputs } from './resource-outputs.ts';
import type { Context } from 'hono';
import type { ConnInfo } from '../core/conn-info.ts';
import { SvcTimeoutError } from '../core/errors.ts';
import type { VerifiedIdentity } from '../core/identity.ts';
import type { SvcLogEvent } from '../core/logging.ts';
import type { AbilityDefinition, HandlerFactoryInput } from './ability.ts';
import { registerHandlerIdentity } from './scopes.ts';

// deno-lint-ignore no-explicit-any
type AnyAbility = AbilityDefinition<any>;

/** What the wrapper knows about the authenticated session it serves. */
export interface AbilityCallContext {
  /** The verified caller. */
  identity: VerifiedIdentity;
  /** Runtime access handed to handler factories (request context, bindings). */
  context: unknown;
  /** Advisory connection info (brokered tokens at an ingress service only). */
  connInfo?: ConnInfo;
  /** The caller's idempotency key, passed to handlers as received. */
  idempotencyKey?: string;
  /** The request id, for handlers and log events. */
  requestId?: string;
  /** The transport the session runs on; streaming needs a session transport. */
  transport: 'http-batch' | 'websocket' | 'cloudflare-binding-rpc' | 'custom';
  /**
   * Checks the session's token again before each call (expiry, key still published): throws
   * (or returns a promise that rejects) with the verifier's refusal; a promise when the check
   * had to wait. Set on session transports, where one authentication serves many calls.
   */
  recheckToken?: () => unknown;
  /** Epoch ms at which the caller's budget runs out; `undefined` = no caller budget. */
  callerDeadlineEndsAt?: number;
  /** The service's `timeout.methodMs`: a ceiling in ms, `false` for none, default otherwise. */
  serviceMethodCeilingMs?: number | false;
  /** Receives `svc.ability.handler_failed`; must not throw (a throw is ignored). */
  log(event: SvcLogEvent): void;
  /**
   * Set for a session that ends only if it must (an HTTP batch): marked once an output holds
   * more than plain data (a function, a target, a stub, a stream), which only ending the
   * session disposes.
   */
  resourceOutputs?: ResourceOutputs;
}

/**
 * The abort side of a call, with the `AbortController` made only when a handler reads its
 * `signal`: most handlers never do, and creating a controller is a measurable share of a call.
 * An abort before the first read is remembered, so a late reader still gets an aborted signal.
 */
export class LazyAbort {
  #controller: AbortController | undefined;
  #aborted = false;
  #reason: unknown;

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }

  get aborted(): boolean {
    return this.#aborted;
  }

  get reason(): unknown {
    return this.#reason;
  }

  abort(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.#controller?.abort(reason);
  }
}

/**
 * The factory input of one call. A class rather than an object literal: `signal` is an accessor
 * (the controller is made on first read), and an accessor in a literal costs more per call than
 * the rest of the object. Destructuring reads it like any member.
 */
class CallFactoryInput implements HandlerFactoryInput {
  readonly context: Context;
  readonly identity: VerifiedIdentity;
  readonly remainingTimeoutMs: () => number | undefined;
  declare readonly connInfo?: ConnInfo;
  declare readonly idempotencyKey?: string;
  declare readonly requestId?: string;
  readonly #abort: LazyAbort;

  constructor(
    call: AbilityCallContext,
    abort: LazyAbort,
    remainingTimeoutMs: () => number | undefined,
  ) {
    // A service's gateway passes the call's Hono context; only tests built by hand pass others.
    this.context = call.context as Context;
    this.identity = call.identity;
    this.remainingTimeoutMs = remainingTimeoutMs;
    this.#abort = abort;
    const optional = this as { connInfo?: ConnInfo; idempotencyKey?: string; requestId?: string };
    if (call.connInfo !== undefined) optional.connInfo = call.connInfo;
    if (call.idempotencyKey !== undefined) optional.idempotencyKey = call.idempotencyKey;
    if (call.requestId !== undefined) optional.requestId = call.requestId;
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }
}

/** Builds the handler object for one call and returns its implementation of the method. */
export function createHandler(
  ability: AnyAbility,
  methodName: string,
  call: AbilityCallContext,
  abort: LazyAbort,
  remainingTimeoutMs: () => number | undefined,
): { handler: object; implementation: (input: unknown) => unknown } {
  const factoryInput = new CallFactoryInput(call, abort, remainingTimeoutMs);
  const handler: unknown = ability.handler(factoryInput);
  if (handler === null || (typeof handler !== 'object' && typeof handler !== 'function')) {
    throw new TypeError(`the handler factory of ${ability.id} did not return an object`);
  }
  registerHandlerIdentity(handler, call.identity);
  const implementation = (handler as Record<string, unknown>)[methodName];
  if (typeof implementation !== 'function') {
    throw new TypeError(`the handler object of ${ability.id} has no method "${methodName}"`);
  }
  return { handler, implementation: implementation as (input: unknown) => unknown };
}

/** What is left until `endsAt`, read when asked (`undefined`: no deadline). */
export function remainingUntil(endsAt: number | undefined): () => number | undefined {
  return () => (endsAt === undefined ? undefined : Math.max(0, endsAt - Date.now()));
}

/** The deadline's refusal: the handler's signal is aborted with it, and the caller gets it. */
export function deadlineExceeded(abort: LazyAbort, label: string): SvcTimeoutError {
  const timeout = new SvcTimeoutError(`${label}: deadline exceeded`);
  abort.abort(timeout);
  return timeout;
}

/**
 * Settles with `work`, or rejects with `SvcTimeoutError` (and aborts the handler's signal) when
 * the deadline passes first, including when `work` settles late without the timer having had a
 * turn (a handler that kept the thread busy past it). The timer is always cleared so an idle
 * process can exit.
 */
export function withinDeadline<T>(
  work: Promise<T>,
  endsAt: number,
  abort: LazyAbort,
  label: string,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(deadlineExceeded(abort, label)),
      Math.max(0, endsAt - Date.now()),
    );
    work.then(
      (value) => {
        clearTimeout(timer);
        if (Date.now() > endsAt) reject(deadlineExceeded(abort, label));
        else resolve(value);
      },
      (error) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
