/**
 * Per-request event collection, so HTTP-policy middleware can read what a request emitted after
 * `await next()`.
 *
 * @module
 */
import type { Context } from 'hono';
import { describeErrorForLog, type SvcLogEvent } from '../core/logging.ts';

const EVENTS_VARIABLE = 'svcLogEvents';

/** Starts collecting events for one request. */
export function beginLogEventCollection(c: Context): void {
  c.set(EVENTS_VARIABLE as never, [] as never);
}

/**
 * Stops collecting once the response is final: nothing reads the list afterwards, and a
 * WebSocket session outlives its upgrade request, so keeping on would hold every event it emits.
 */
export function endLogEventCollection(c: Context): void {
  const events = svcLogEvents(c);
  c.set(
    EVENTS_VARIABLE as never,
    (events.length === 0 ? NO_EVENTS : Object.freeze([...events])) as never,
  );
}

const NO_EVENTS: readonly SvcLogEvent[] = Object.freeze([]);

/** Records an event emitted inside a request, while its response is not yet final. */
export function recordLogEvent(c: Context, event: SvcLogEvent): void {
  const events = c.get(EVENTS_VARIABLE as never) as SvcLogEvent[] | undefined;
  if (events !== undefined && !Object.isFrozen(events)) events.push(event);
}

/**
 * The structured log events emitted so far while handling this request (read it after
 * `await next()` in middleware mounted through the service's `middleware` option).
 */
export function svcLogEvents(c: Context): readonly SvcLogEvent[] {
  return (c.get(EVENTS_VARIABLE as never) as SvcLogEvent[] | undefined) ?? [];
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
