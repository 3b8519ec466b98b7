/**
 * The validating wrapper (authentication layer (c)): the Cap'n Web object a caller receives
 * from `authenticate(token)`. Each declared method of the ability becomes one method of this
 * object; nothing else is reachable by name.
 *
 * Per call, in this order: a streaming method over HTTP-batch is refused (405); the ability's
 * and the method's scopes are checked (403); an already spent caller budget fails (504); the
 * input is validated (422); only then is the handler object created, once, and the method
 * invoked on it; a unary call is bounded by the earlier of the method ceiling and the caller's
 * deadline (504, the handler's signal aborted); the output is validated (500). Failures that
 * are not taxonomy errors are replaced with an opaque 500 and logged.
 *
 * @module
 */
import { RpcTarget } from 'capnweb';
import type { ConnInfo } from '../core/conn-info.ts';
import { earliestBudgetMs, effectiveMethodCeilingMs } from '../core/deadline.ts';
import {
  AbilityValidationError,
  hasSvcErrorShape,
  opaqueHandlerFailure,
  SvcConfigurationError,
  SvcInternalError,
  SvcTimeoutError,
} from '../core/errors.ts';
import type { VerifiedIdentity } from '../core/identity.ts';
import { describeErrorForLog, type SvcLogEvent } from '../core/logging.ts';
import { type SvcSchema, validateWithSchema } from '../core/schema.ts';
import { type AbilityDefinition, type HandlerFactoryInput, isDefinedAbility } from './ability.ts';
import { itemStream } from './item-stream.ts';
import type { MethodDefinition } from './method.ts';
import { assertScopes, registerHandlerIdentity } from './scopes.ts';
import type { AbilityRpc } from './types.ts';

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
  /** Epoch ms at which the caller's budget runs out; `undefined` = no caller budget. */
  callerDeadlineEndsAt?: number;
  /** The service's `timeout.methodMs`: a ceiling in ms, `false` for none, default otherwise. */
  serviceMethodCeilingMs?: number | false;
  /** Receives `svc.ability.handler_failed`; must not throw (a throw is ignored). */
  log(event: SvcLogEvent): void;
}

/** The object served to an authenticated caller: an `RpcTarget` with the ability's methods. */
// deno-lint-ignore no-explicit-any
export type AbilityTarget<A extends AbilityDefinition<any>> = RpcTarget & AbilityRpc<A>;

/** Message of an output-side issue: the handler's output may hold data the caller must not see. */
const REDACTED_OUTPUT_ISSUE = 'does not match the output schema';

// deno-lint-ignore no-explicit-any
type AnyAbility = AbilityDefinition<any>;
type TargetClass = new () => RpcTarget;

const targetClasses = new WeakMap<AnyAbility, TargetClass>();
// Kept outside the instance: Cap'n Web refuses to reach instance properties, and a private
// side table also keeps the session out of anything a handler could enumerate.
const callContexts = new WeakMap<object, AbilityCallContext>();

function callContextOf(target: unknown, label: string): AbilityCallContext {
  const call = target !== null && typeof target === 'object' ? callContexts.get(target) : undefined;
  if (call === undefined) {
    throw new SvcInternalError(`${label}: called on an object that is not an ability target`, {
      reason: 'unknown_target',
    });
  }
  return call;
}

function refuseStreamOverHttpBatch(
  method: MethodDefinition,
  call: AbilityCallContext,
  label: string,
): void {
  if (method.stream && call.transport === 'http-batch') {
    throw new SvcInternalError(
      `${label} streams and needs a session transport (WebSocket or a native binding)`,
      { status: 405, reason: 'stream_requires_session_transport' },
    );
  }
}

function refuseSpentCallerBudget(call: AbilityCallContext, label: string): void {
  if (call.callerDeadlineEndsAt !== undefined && call.callerDeadlineEndsAt <= Date.now()) {
    throw new SvcTimeoutError(`${label}: the caller's deadline had passed when the call arrived`);
  }
}

function singleInput(args: unknown[], label: string): unknown {
  if (args.length > 1) {
    throw new AbilityValidationError(`${label}: invalid input`, {
      status: 422,
      issues: [{ message: `expected exactly one input object, received ${args.length} arguments` }],
    });
  }
  return args[0];
}

async function validateOutput(schema: SvcSchema, value: unknown, label: string): Promise<unknown> {
  try {
    return await validateWithSchema(schema, value, 'output', label);
  } catch (error) {
    if (!(error instanceof AbilityValidationError)) throw error;
    // Libraries quote offending values in messages (arktype: `(was "...")`); keep the paths.
    throw new AbilityValidationError(error.message, {
      status: 500,
      ...(error.reason !== undefined ? { reason: error.reason } : {}),
      issues: error.issues.map((issue) => ({
        message: REDACTED_OUTPUT_ISSUE,
        ...(issue.path !== undefined ? { path: issue.path } : {}),
      })),
    });
  }
}

/**
 * What leaves the service for a failure: taxonomy errors (local, or received with a valid
 * `code` from a hop further down) pass through unchanged; anything else becomes the opaque
 * `Svc ability handler failed: <method>` and is logged once with the original name and message.
 */
function callerFacingFailure(
  error: unknown,
  ability: AnyAbility,
  methodName: string,
  call: AbilityCallContext,
): unknown {
  if (error instanceof Error && hasSvcErrorShape(error)) return error;
  const event: SvcLogEvent = {
    event: 'svc.ability.handler_failed',
    level: 'error',
    ...(call.requestId !== undefined ? { requestId: call.requestId } : {}),
    ability: ability.id,
    method: methodName,
    error: describeErrorForLog(error),
  };
  try {
    call.log(event);
  } catch {
    // Logging is a side channel; the caller still gets the opaque error.
  }
  return opaqueHandlerFailure(methodName, error);
}

/** Builds the handler object for one call and returns its implementation of the method. */
function createHandler(
  ability: AnyAbility,
  methodName: string,
  call: AbilityCallContext,
  signal: AbortSignal,
  remainingTimeoutMs: () => number | undefined,
): { handler: object; implementation: (input: unknown) => unknown } {
  const factoryInput: HandlerFactoryInput = {
    context: call.context,
    identity: call.identity,
    ...(call.connInfo !== undefined ? { connInfo: call.connInfo } : {}),
    signal,
    remainingTimeoutMs,
    ...(call.idempotencyKey !== undefined ? { idempotencyKey: call.idempotencyKey } : {}),
    ...(call.requestId !== undefined ? { requestId: call.requestId } : {}),
  };
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

function remainingUntil(endsAt: number | undefined): () => number | undefined {
  return () => (endsAt === undefined ? undefined : Math.max(0, endsAt - Date.now()));
}

/**
 * Settles with `work`, or rejects with `SvcTimeoutError` (and aborts the handler's signal) when
 * `ms` pass first. The timer is always cleared so an idle process can exit.
 */
function withinDeadline<T>(
  work: Promise<T>,
  ms: number,
  controller: AbortController,
  label: string,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      const timeout = new SvcTimeoutError(`${label}: deadline exceeded`);
      controller.abort(timeout);
      reject(timeout);
    }, ms);
    work.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

async function runUnary(
  ability: AnyAbility,
  methodName: string,
  method: MethodDefinition,
  call: AbilityCallContext,
  args: unknown[],
  label: string,
): Promise<unknown> {
  const startedAt = Date.now();
  const ceilingMs = effectiveMethodCeilingMs({
    ...(method.timeoutMs !== undefined ? { methodTimeoutMs: method.timeoutMs } : {}),
    ...(call.serviceMethodCeilingMs !== undefined
      ? { serviceMethodMs: call.serviceMethodCeilingMs }
      : {}),
    stream: false,
  });
  const callerBudgetMs = call.callerDeadlineEndsAt === undefined
    ? undefined
    : call.callerDeadlineEndsAt - startedAt;
  const budgetMs = earliestBudgetMs(ceilingMs, callerBudgetMs);
  const endsAt = budgetMs === undefined ? undefined : startedAt + budgetMs;
  const controller = new AbortController();
  const work = (async () => {
    const input = await validateWithSchema(method.input, singleInput(args, label), 'input', label);
    // The deadline passed while validating: the caller has its 504, no handler is created.
    if (controller.signal.aborted) throw controller.signal.reason;
    let output: unknown;
    try {
      const { handler, implementation } = createHandler(
        ability,
        methodName,
        call,
        controller.signal,
        remainingUntil(endsAt),
      );
      output = await implementation.call(handler, input);
    } catch (error) {
      // After the deadline the caller already has its 504; what the aborted handler threw
      // (typically an AbortError) reaches no one and is not a handler failure worth logging.
      if (controller.signal.aborted) throw controller.signal.reason;
      throw callerFacingFailure(error, ability, methodName, call);
    }
    return await validateOutput(method.output, output, label);
  })();
  return budgetMs === undefined
    ? await work
    : await withinDeadline(work, budgetMs, controller, label);
}

async function openStream(
  ability: AnyAbility,
  methodName: string,
  method: MethodDefinition,
  call: AbilityCallContext,
  args: unknown[],
  label: string,
): Promise<ReadableStream<unknown>> {
  const input = await validateWithSchema(method.input, singleInput(args, label), 'input', label);
  // A stream is not bounded by a ceiling; its signal tells the handler the consumer went away.
  const controller = new AbortController();
  try {
    const { handler, implementation } = createHandler(
      ability,
      methodName,
      call,
      controller.signal,
      remainingUntil(call.callerDeadlineEndsAt),
    );
    const source = await implementation.call(handler, input);
    return itemStream(source, {
      validateItem: (item) => validateOutput(method.output, item, label),
      sourceFailure: (error) => callerFacingFailure(error, ability, methodName, call),
      onCancel: (reason) => controller.abort(reason),
    });
  } catch (error) {
    throw callerFacingFailure(error, ability, methodName, call);
  }
}

async function callAbilityMethod(
  ability: AnyAbility,
  methodName: string,
  method: MethodDefinition,
  target: unknown,
  args: unknown[],
): Promise<unknown> {
  const label = `${ability.id}.${methodName}`;
  const call = callContextOf(target, label);
  refuseStreamOverHttpBatch(method, call, label);
  // Before anything else runs: a refused caller never reaches validation or a handler.
  assertScopes(call.identity, [...ability.scopes, ...method.scopes], label);
  refuseSpentCallerBudget(call, label);
  return method.stream
    ? await openStream(ability, methodName, method, call, args, label)
    : await runUnary(ability, methodName, method, call, args, label);
}

function targetClassFor(ability: AnyAbility): TargetClass {
  const cached = targetClasses.get(ability);
  if (cached !== undefined) return cached;
  // One subclass per ability, its prototype carrying exactly the declared methods: Cap'n Web
  // reaches prototype members by name (dots included) and never instance properties, and it
  // skips every name on Object.prototype, so nothing undeclared is reachable.
  class AbilityRpcTarget extends RpcTarget {}
  for (
    const [methodName, method] of Object.entries(
      ability.methods as Record<string, MethodDefinition>,
    )
  ) {
    const invoke = function (this: unknown, ...args: unknown[]): Promise<unknown> {
      return callAbilityMethod(ability, methodName, method, this, args);
    };
    Object.defineProperty(invoke, 'name', { value: methodName });
    Object.defineProperty(AbilityRpcTarget.prototype, methodName, {
      value: invoke,
      writable: false,
      enumerable: false,
      configurable: false,
    });
  }
  targetClasses.set(ability, AbilityRpcTarget);
  return AbilityRpcTarget;
}

/**
 * Creates the validating ability object for one authenticated session. The per-ability class
 * is built once and cached; each call on the returned object runs the full wrapper sequence.
 * Throws `SvcConfigurationError` for an ability that was not produced by `defineAbility`.
 */
export function createAbilityTarget<A extends AnyAbility>(
  ability: A,
  session: AbilityCallContext,
): AbilityTarget<A> {
  if (!isDefinedAbility(ability)) {
    throw new SvcConfigurationError(
      'createAbilityTarget: the ability was not created by defineAbility',
      {
        reason: 'invalid_ability',
      },
    );
  }
  const TargetClass = targetClassFor(ability);
  const target = new TargetClass();
  callContexts.set(target, session);
  return target as AbilityTarget<A>;
}
