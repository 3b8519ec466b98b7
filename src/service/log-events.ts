/**
 * Per-request event collection, so HTTP-policy middleware can read what a request emitted after
 * `await next()`.
 *
 * @module
 */
import type { Context } from 'hono';
import { describeErrorForLog, type SvcLogEvent } from '../core/logging.ts';

const EVENTS_VARIABLE = 'svcLogEvents';

/** One request's events, and whether its response is final (then nothing more is kept). */
interface EventCollection {
  readonly events: SvcLogEvent[];
  open: boolean;
}

/** Starts collecting events for one request. */
export function beginLogEventCollection(c: Context): void {
  c.set(EVENTS_VARIABLE as never, { events: [], open: true } satisfies EventCollection as never);
}

function collectionOf(c: Context): EventCollection | undefined {
  return c.get(EVENTS_VARIABLE as never) as EventCollection | undefined;
}

/**
 * Stops collecting once the response is final: nothing reads the list afterwards, and a
 * WebSocket session outlives its upgrade request, so keeping on would hold every event it emits.
 * A flag rather than freezing the list: freezing an array is slow on some engines (JSC).
 */
export function endLogEventCollection(c: Context): void {
  const collection = collectionOf(c);
  if (collection !== undefined) collection.open = false;
}

/** Records an event emitted inside a request, while its response is not yet final. */
export function recordLogEvent(c: Context, event: SvcLogEvent): void {
  const collection = collectionOf(c);
  if (collection?.open === true) collection.events.push(event);
}

/**
 * The structured log events emitted so far while handling this request (read it after
 * `await next()` in middleware mounted through the service's `middleware` option).
 */
export function svcLogEvents(c: Context): readonly SvcLogEvent[] {
  return collectionOf(c)?.events ?? [];
}

/**
 * `svc.ability.handler_failed` for a failure Cap'n Web's session replaced behind the wrapper (an
 * output it cannot send, or one of its own errors): no method name is known there.
 */
export function errorWithheldEvent(
  requestId: string | undefined,
  abilityId: string,
  error: unknown,
): SvcLogEvent {
  return {
    event: 'svc.ability.handler_failed',
    level: 'error',
    requestId,
    ability: abilityId,
    reason: 'error_withheld',
    error: describeErrorForLog(error),
  };
}
