/**
 * The stub a broker `connect` returns: one method per method the catalog publishes for the
 * ability, each a call through the plane's leg to the service. The caller never sees a token.
 *
 * Over an HTTP-batch caller a streaming method is refused with 405 (contract: Streaming r3); over
 * a session caller a stream is relayed item by item with flow control in both directions (the
 * relay reads a bounded number of items ahead of the caller's side) and a cancel travels back to
 * the service. Disposing the stub (the caller released it, or its session ended) closes the leg.
 *
 * @module
 */
import { RpcTarget } from 'capnweb';
import { SvcInternalError, SvcTimeoutError } from '../../core/errors.ts';
import { type AbilitySession, disposeAbilitySession } from '../../caller/ability-session.ts';
import type { AbilityDiscoveryEntry } from '../../service/discovery.ts';

/** What one brokered stub calls through, and what it may still spend. */
export interface BrokeredAbilityState {
  /** The plane's leg to the service (an ability session). */
  session: AbilitySession;
  /** Epoch ms at which the caller's budget ends; absent when unbounded. */
  deadline?: number;
  /** Whether the caller's own session is an HTTP batch (streams need a session transport). */
  callerBatch: boolean;
  /** Told once, when the stub is disposed. */
  onDispose(): void;
}

const states = new WeakMap<object, BrokeredAbilityState>();

/**
 * Items the broker reads ahead of its caller: enough that a burst of items arriving from the
 * service is acknowledged and relayed in one go rather than in turns with the caller's reads, few
 * enough that a caller who stops reading stops the service's producer soon after (this many items
 * wait at the plane, beside what Cap'n Web's own byte windows hold in flight on each hop).
 */
const RELAY_AHEAD_ITEMS = 256;

/**
 * A stream the broker's session can send: Cap'n Web serialises only streams whose prototype is
 * exactly `ReadableStream`, and the leg's stream is a subclass. It reads at most
 * {@link RELAY_AHEAD_ITEMS} ahead of its reader, so a slow caller slows the service's producer,
 * and a cancel reaches the leg. One pull reads until the read-ahead is full, so a burst of items
 * costs one pull rather than one each.
 */
function relayedStream(source: ReadableStream<unknown>): ReadableStream<unknown> {
  const reader = source.getReader();
  return new ReadableStream<unknown>({
    async pull(controller) {
      do {
        const next = await reader.read();
        if (next.done) {
          controller.close();
          return;
        }
        controller.enqueue(next.value);
      } while ((controller.desiredSize ?? 0) > 0);
    },
    cancel: (reason) => reader.cancel(reason),
  }, { highWaterMark: RELAY_AHEAD_ITEMS });
}

function streamNeedsSession(abilityId: string, method: string): SvcInternalError {
  return new SvcInternalError(
    `${abilityId}.${method} streams and needs a session transport: connect to the broker over ` +
      'WebSocket',
    { status: 405, reason: 'stream_requires_session_transport' },
  );
}

/** A streamed result relayed; anything else as it came. */
function relayed(result: unknown): unknown {
  return result instanceof ReadableStream ? relayedStream(result) : result;
}

/** Why a call cannot go through now, if it cannot. */
function refusal(
  state: BrokeredAbilityState | undefined,
  abilityId: string,
  method: string,
  streams: boolean,
): Error | undefined {
  if (state === undefined) return new SvcInternalError('Brokered ability stub is disposed');
  if (streams && state.callerBatch) return streamNeedsSession(abilityId, method);
  if (state.deadline !== undefined && Date.now() >= state.deadline) {
    return new SvcTimeoutError(`The budget for ${abilityId}.${method} ran out at the broker`, {
      reason: 'budget_exhausted',
    });
  }
  return undefined;
}

/**
 * One call through the leg. A unary result is the leg's own promise, handed on as it is (no
 * promise of ours per call); a streamed one is relayed.
 */
function callThrough(
  target: object,
  abilityId: string,
  method: string,
  streams: boolean,
  input: unknown,
): Promise<unknown> {
  const state = states.get(target);
  const refused = refusal(state, abilityId, method, streams);
  if (refused !== undefined) return Promise.reject(refused);
  const result = (state!.session as Record<string, (input: unknown) => Promise<unknown>>)[method](
    input,
  );
  return streams ? result.then(relayed) : result;
}

// One class per published method set: Cap'n Web calls only methods on a target's prototype.
const classes = new Map<string, new (state: BrokeredAbilityState) => RpcTarget>();
/** Most method-set classes kept; past it a class is built per connect. */
const MAX_CACHED_CLASSES = 256;

/**
 * The class of brokered stubs for `ability`: a prototype method per published method (names
 * Cap'n Web stubs reserve are left out), and `Symbol.dispose` closing the leg.
 */
function brokeredClassFor(
  ability: AbilityDiscoveryEntry,
): new (state: BrokeredAbilityState) => RpcTarget {
  const methods = Object.entries(ability.methods).map(([name, method]) =>
    [name, method.stream === true] as const
  );
  const key = JSON.stringify([ability.id, methods]);
  const known = classes.get(key);
  if (known !== undefined) return known;
  class BrokeredAbility extends RpcTarget {
    constructor(state: BrokeredAbilityState) {
      super();
      states.set(this, state);
    }

    [Symbol.dispose](): void {
      const state = states.get(this);
      if (state === undefined) return;
      states.delete(this);
      disposeAbilitySession(state.session);
      state.onDispose();
    }
  }
  for (const [name, streams] of methods) {
    if (name === 'constructor' || name === 'then' || name in RpcTarget.prototype) continue;
    Object.defineProperty(BrokeredAbility.prototype, name, {
      value(this: object, input: unknown) {
        return callThrough(this, ability.id, name, streams, input);
      },
      writable: false,
      enumerable: false,
      configurable: false,
    });
  }
  if (classes.size < MAX_CACHED_CLASSES) classes.set(key, BrokeredAbility);
  return BrokeredAbility;
}

/** A brokered stub of `ability` calling through `state.session`. */
export function brokeredAbility(
  ability: AbilityDiscoveryEntry,
  state: BrokeredAbilityState,
): RpcTarget {
  const Brokered = brokeredClassFor(ability);
  return new Brokered(state);
}
