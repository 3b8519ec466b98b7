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
 * are not taxonomy errors are replaced with an opaque 500 and logged. How one handler call is
 * built and bounded lives in `ability-call.ts`.
 *
 * @module
 */
import { RpcTarget } from 'capnweb';
import { earliestBudgetMs, effectiveMethodCeilingMs } from '../core/deadline.ts';
import {
  AbilityValidationError,
  hasSvcErrorShape,
  opaqueHandlerFailure,
  SvcConfigurationError,
  SvcInternalError,
  SvcTimeoutError,
} from '../core/errors.ts';
import { frozenIdentity } from '../core/identity.ts';
import { describeErrorForLog, type SvcLogEvent } from '../core/logging.ts';
import { validateWithSchemaNow } from '../core/schema.ts';
import { type AbilityDefinition, isDefinedAbility } from './ability.ts';
import { itemStream, type ValidatedItem } from './item-stream.ts';
import { declaredOutputPropertyNames, type MethodDefinition } from './method.ts';
import { assertScopes } from './scopes.ts';
import type { AbilityRpc } from './types.ts';
import {
  type AbilityCallContext,
  createHandler,
  deadlineExceeded,
  LazyAbort,
  remainingUntil,
  withinDeadline,
} from './ability-call.ts';

export type { AbilityCallContext } from './ability-call.ts';

/** The object served to an authenticated caller: an `RpcTarget` with the ability's methods. */
// deno-lint-ignore no-explicit-any
export type AbilityTarget<A extends AbilityDefinition<any>> = RpcTarget & AbilityRpc<A>;

/** Message of an output-side issue: the handler's output may hold data the caller must not see. */
const REDACTED_OUTPUT_ISSUE = 'does not match the output schema';
/** Stands in an output issue's path for a key the output schema does not declare. */
const REDACTED_PATH_KEY = '*';

// deno-lint-ignore no-explicit-any
type AnyAbility = AbilityDefinition<any>;
type TargetClass = new (call: SessionCallContext) => RpcTarget;

/**
 * A session as the wrapper keeps it. Handlers get `identity`, deeply frozen; the scope check
 * reads `grantedScopes`, its frozen scope list, which no one can change.
 */
interface SessionCallContext extends AbilityCallContext {
  readonly grantedScopes: readonly string[];
}

const targetClasses = new WeakMap<AnyAbility, TargetClass>();

/**
 * What every ability target is: the session it serves, in a private field. Cap'n Web reaches
 * neither instance properties nor private fields, and nothing a handler could enumerate shows
 * it. A field rather than a side table: a weak map entry per batch keeps the whole session alive
 * through the garbage collector's young-generation passes, and that cost more than the batch.
 */
class AbilityTargetBase extends RpcTarget {
  readonly #call: SessionCallContext;

  constructor(call: SessionCallContext) {
    super();
    this.#call = call;
  }

  static callOf(target: unknown): SessionCallContext | undefined {
    return target !== null && typeof target === 'object' && #call in target
      ? (target as AbilityTargetBase).#call
      : undefined;
  }
}

function callContextOf(target: unknown, label: string): SessionCallContext {
  const call = AbilityTargetBase.callOf(target);
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

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function';
}

/** An output-side refusal without the library's messages, which may quote the output. */
function redactedOutputError(error: unknown, declared: ReadonlySet<string>): unknown {
  if (!(error instanceof AbilityValidationError)) return error;
  // Libraries quote offending values in messages (arktype: `(was "...")`), and a path can hold
  // keys of the output itself (a record's): only indices and declared property names stay.
  return new AbilityValidationError(error.message, {
    status: 500,
    ...(error.reason !== undefined ? { reason: error.reason } : {}),
    issues: error.issues.map((issue) => ({
      message: REDACTED_OUTPUT_ISSUE,
      ...(issue.path !== undefined
        ? {
          path: issue.path.map((segment) =>
            typeof segment === 'number' || declared.has(segment) ? segment : REDACTED_PATH_KEY
          ),
        }
        : {}),
    })),
  });
}

/**
 * Validates an output (or one streamed item): synchronously when the schema answers so. What a
 * schema passes on may be the handler's own value, whose reading runs handler code: callers
 * guard this like the handler call itself.
 */
function checkedOutput(plan: MethodPlan, value: unknown): unknown {
  let result: unknown;
  try {
    result = validateWithSchemaNow(plan.method.output, value, 'output', plan.label);
  } catch (error) {
    throw redactedOutputError(error, plan.outputPropertyNames);
  }
  return isThenable(result)
    ? Promise.resolve(result).catch((error: unknown) => {
      throw redactedOutputError(error, plan.outputPropertyNames);
    })
    : result;
}

/** Whether a thrown value is an `Error` with a valid taxonomy `code`; a hostile one is not. */
function isTaxonomyError(error: unknown): boolean {
  try {
    // `instanceof` runs a proxy's getPrototypeOf trap: handler code, which may throw.
    return error instanceof Error && hasSvcErrorShape(error);
  } catch {
    return false;
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
  if (isTaxonomyError(error)) return error;
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

/** What every call of one declared method needs and never changes, computed once. */
interface MethodPlan {
  ability: AnyAbility;
  methodName: string;
  method: MethodDefinition;
  /** `<abilityId>.<method>`, for messages. */
  label: string;
  /** The ability's scopes followed by the method's. */
  requiredScopes: readonly string[];
  /** See {@link declaredOutputPropertyNames}. */
  outputPropertyNames: ReadonlySet<string>;
}

/** The unary budget of a call arriving now: the earlier of the method ceiling and the caller's. */
function unaryBudgetMs(
  method: MethodDefinition,
  call: AbilityCallContext,
  startedAt: number,
): number | undefined {
  const ceilingMs = method.timeoutMs !== undefined
    ? effectiveMethodCeilingMs({ methodTimeoutMs: method.timeoutMs })
    : call.serviceMethodCeilingMs !== undefined
    ? effectiveMethodCeilingMs({ serviceMethodMs: call.serviceMethodCeilingMs })
    : effectiveMethodCeilingMs({});
  const callerBudgetMs = call.callerDeadlineEndsAt === undefined
    ? undefined
    : call.callerDeadlineEndsAt - startedAt;
  return earliestBudgetMs(ceilingMs, callerBudgetMs);
}

/** The deadline state of one unary call. */
interface UnaryDeadline {
  /** Epoch ms at which the call's budget runs out; `undefined` when unbounded. */
  endsAt: number | undefined;
  abort: LazyAbort;
}

/** The handler's failure as the caller sees it, unless the deadline already answered. */
function handlerFailure(
  error: unknown,
  plan: MethodPlan,
  call: AbilityCallContext,
  deadline: UnaryDeadline,
): unknown {
  // After the deadline the caller already has its 504; what the aborted handler threw
  // (typically an AbortError) reaches no one and is not a handler failure worth logging.
  if (deadline.abort.aborted) return deadline.abort.reason;
  return callerFacingFailure(error, plan.ability, plan.methodName, call);
}

/** Creates the handler, calls it and validates its output; synchronous while everything is. */
function invokeHandler(
  plan: MethodPlan,
  call: AbilityCallContext,
  deadline: UnaryDeadline,
  input: unknown,
): unknown {
  // The deadline passed while validating: the caller has its 504, no handler is created.
  if (deadline.abort.aborted) throw deadline.abort.reason;
  let output: unknown;
  let pending: boolean;
  try {
    const { handler, implementation } = createHandler(
      plan.ability,
      plan.methodName,
      call,
      deadline.abort,
      remainingUntil(deadline.endsAt),
    );
    output = implementation.call(handler, input);
    // Reading `then` runs the handler's code too (a getter, a proxy trap).
    pending = isThenable(output);
  } catch (error) {
    throw handlerFailure(error, plan, call, deadline);
  }
  if (!pending) return guardedOutput(plan, call, deadline, output);
  return Promise.resolve(output).then(
    (settled) => guardedOutput(plan, call, deadline, settled),
    (error: unknown) => {
      throw handlerFailure(error, plan, call, deadline);
    },
  );
}

/**
 * Validates a unary output. Taxonomy refusals (an invalid output's 500) leave as they are; a
 * throw from reading the handler's value is a handler failure like a throw from the handler.
 */
function guardedOutput(
  plan: MethodPlan,
  call: AbilityCallContext,
  deadline: UnaryDeadline,
  output: unknown,
): unknown {
  try {
    const checked = checkedOutput(plan, output);
    if (!isThenable(checked)) return withResourcesNoted(call, checked);
    return Promise.resolve(checked).then(
      (value) => withResourcesNoted(call, value),
      (error: unknown) => {
        throw handlerFailure(error, plan, call, deadline);
      },
    );
  } catch (error) {
    throw handlerFailure(error, plan, call, deadline);
  }
}

/** `output`, noted on the session's record of outputs when it keeps one. */
function withResourcesNoted(call: AbilityCallContext, output: unknown): unknown {
  return call.resourceOutputs === undefined ? output : call.resourceOutputs.noted(output);
}

/**
 * Validates one streamed item, guarded like {@link guardedOutput}: at once when the schema
 * answers so, else once its promise settles.
 */
function guardedItem(plan: MethodPlan, call: AbilityCallContext, item: unknown): ValidatedItem {
  try {
    const checked = checkedOutput(plan, item);
    // Read here, inside the guard: reading the value's `then` runs the handler's code.
    if (!isThenable(checked)) return { now: checked };
    return {
      later: Promise.resolve(checked).catch((error: unknown) => {
        throw callerFacingFailure(error, plan.ability, plan.methodName, call);
      }),
    };
  } catch (error) {
    throw callerFacingFailure(error, plan.ability, plan.methodName, call);
  }
}

/**
 * Runs a unary call. When the schemas and the handler all answer synchronously the result is
 * the output itself, with no promise and no timer, checked against the clock once it is there.
 * The first promise along the way is raced against the deadline.
 */
function runUnary(plan: MethodPlan, call: AbilityCallContext, args: unknown[]): unknown {
  const startedAt = Date.now();
  const budgetMs = unaryBudgetMs(plan.method, call, startedAt);
  const deadline: UnaryDeadline = {
    endsAt: budgetMs === undefined ? undefined : startedAt + budgetMs,
    abort: new LazyAbort(),
  };
  const input = validateWithSchemaNow(
    plan.method.input,
    singleInput(args, plan.label),
    'input',
    plan.label,
  );
  const outcome = isThenable(input)
    ? Promise.resolve(input).then((value) => invokeHandler(plan, call, deadline, value))
    : invokeHandler(plan, call, deadline, input);
  if (deadline.endsAt === undefined) return outcome;
  if (!isThenable(outcome)) {
    // Synchronous all the way: no timer could fire, so the clock decides afterwards.
    if (Date.now() > deadline.endsAt) throw deadlineExceeded(deadline.abort, plan.label);
    return outcome;
  }
  return withinDeadline(Promise.resolve(outcome), deadline.endsAt, deadline.abort, plan.label);
}

async function openStream(
  plan: MethodPlan,
  call: AbilityCallContext,
  args: unknown[],
): Promise<ReadableStream<unknown>> {
  const { ability, methodName, method, label } = plan;
  const input = await validateWithSchemaNow(
    method.input,
    singleInput(args, label),
    'input',
    label,
  );
  // A stream is not bounded by a ceiling; its signal tells the handler the consumer went away.
  const abort = new LazyAbort();
  try {
    const { handler, implementation } = createHandler(
      ability,
      methodName,
      call,
      abort,
      remainingUntil(call.callerDeadlineEndsAt),
    );
    const source = await implementation.call(handler, input);
    return itemStream(source, {
      validateItem: (item) => guardedItem(plan, call, item),
      sourceFailure: (error) => callerFacingFailure(error, ability, methodName, call),
      onCancel: (reason) => abort.abort(reason),
    });
  } catch (error) {
    throw callerFacingFailure(error, ability, methodName, call);
  }
}

/** Runs one call: its output (or a promise of it, or of a stream); refusals are thrown. */
function callAbilityMethod(plan: MethodPlan, target: unknown, args: unknown[]): unknown {
  const call = callContextOf(target, plan.label);
  if (call.recheckToken === undefined) return callAuthorized(plan, call, args);
  // Decided at once when it can be (the usual case): a synchronous result stays synchronous.
  const rechecked = call.recheckToken();
  return isThenable(rechecked)
    ? Promise.resolve(rechecked).then(() => callAuthorized(plan, call, args))
    : callAuthorized(plan, call, args);
}

/** Runs one call whose token holds: refusals first, then the handler. */
function callAuthorized(plan: MethodPlan, call: SessionCallContext, args: unknown[]): unknown {
  const { method, label } = plan;
  refuseStreamOverHttpBatch(method, call, label);
  // Before anything else runs: a refused caller never reaches validation or a handler.
  assertScopes(call.grantedScopes, plan.requiredScopes, label);
  refuseSpentCallerBudget(call, label);
  if (method.stream) return openStream(plan, call, args);
  const outcome = runUnary(plan, call, args);
  return call.resourceOutputs === undefined ? outcome : call.resourceOutputs.counted(outcome);
}

function targetClassFor(ability: AnyAbility): TargetClass {
  const cached = targetClasses.get(ability);
  if (cached !== undefined) return cached;
  // One subclass per ability, its prototype carrying exactly the declared methods: Cap'n Web
  // reaches prototype members by name (dots included) and never instance properties, and it
  // skips every name on Object.prototype, so nothing undeclared is reachable.
  class AbilityRpcTarget extends AbilityTargetBase {}
  for (
    const [methodName, method] of Object.entries(
      ability.methods as Record<string, MethodDefinition>,
    )
  ) {
    const plan: MethodPlan = {
      ability,
      methodName,
      method,
      label: `${ability.id}.${methodName}`,
      requiredScopes: Object.freeze([...ability.scopes, ...method.scopes]),
      outputPropertyNames: declaredOutputPropertyNames(method),
    };
    // A synchronous result goes back as is (Cap'n Web answers it without a promise hop); a
    // refusal always leaves as a rejection.
    const invoke = function (this: unknown, ...args: unknown[]): unknown {
      try {
        return callAbilityMethod(plan, this, args);
      } catch (error) {
        return Promise.reject(error);
      }
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
 * Handlers receive a deeply frozen copy of `session.identity`, and scopes are checked against
 * the scopes it holds now. Throws `SvcConfigurationError` for an ability that was not produced
 * by `defineAbility`.
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
  // A deeply frozen identity, taken before any handler exists (an identity frozen already, one
  // per verified token, is shared as it is): nothing a handler or the caller does to the object
  // it holds reaches a later call's check. Its frozen scopes are what the check reads.
  const identity = frozenIdentity(session.identity);
  const target = new TargetClass({ ...session, identity, grantedScopes: identity.scopes });
  return target as AbilityTarget<A>;
}
