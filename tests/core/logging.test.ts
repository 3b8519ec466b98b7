import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  createEventLog,
  describeErrorForLog,
  MAX_LOGGED_ERROR_MESSAGE_LENGTH,
  MAX_LOGGED_ERROR_NAME_LENGTH,
  type SvcLogEvent,
} from '../../src/core/logging.ts';
import { SvcConfigurationError } from '../../src/core/errors.ts';

type ConsoleMethod = 'log' | 'error';

/** Replaces console.log / console.error while `run` executes and returns what each received. */
function captureConsole(run: () => void): Record<ConsoleMethod, unknown[][]> {
  const captured: Record<ConsoleMethod, unknown[][]> = { log: [], error: [] };
  const original = { log: console.log, error: console.error };
  console.log = (...args: unknown[]) => captured.log.push(args);
  console.error = (...args: unknown[]) => captured.error.push(args);
  try {
    run();
  } finally {
    console.log = original.log;
    console.error = original.error;
  }
  return captured;
}

test('default sink writes one JSON line per event to console.log', () => {
  const emit = createEventLog(undefined);
  const event: SvcLogEvent = {
    event: 'svc.request.completed',
    level: 'info',
    requestId: 'r-1',
    status: 200,
  };
  const captured = captureConsole(() => emit(event, { some: 'context' }));
  assert.equal(captured.error.length, 0);
  assert.equal(captured.log.length, 1);
  assert.equal(captured.log[0].length, 1);
  const line = captured.log[0][0];
  assert.equal(typeof line, 'string');
  assert.ok(!(line as string).includes('\n'));
  assert.deepEqual(JSON.parse(line as string), event);
});

test('default sink writes error-level events to console.error', () => {
  const emit = createEventLog(undefined);
  const captured = captureConsole(() => {
    emit({ event: 'svc.request.failed', level: 'error', requestId: 'r-2' });
    emit({ event: 'svc.discovery.served', level: 'debug' });
    emit({ event: 'svc.caller_auth.not_configured', level: 'warn' });
  });
  assert.equal(captured.error.length, 1);
  assert.deepEqual(JSON.parse(captured.error[0][0] as string), {
    event: 'svc.request.failed',
    level: 'error',
    requestId: 'r-2',
  });
  assert.equal(captured.log.length, 2);
});

test('default sink survives values JSON cannot encode', () => {
  const emit = createEventLog(undefined);
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  const captured = captureConsole(() => {
    assert.doesNotThrow(() => emit({ event: 'e', level: 'info', count: 10n }));
    assert.doesNotThrow(() => emit({ event: 'e', level: 'info', cyclic }));
  });
  assert.equal(captured.log.length, 1);
  assert.equal(JSON.parse(captured.log[0][0] as string).count, '10');
});

test('false discards every event', () => {
  const emit = createEventLog(false);
  const captured = captureConsole(() => {
    emit({ event: 'svc.request.completed', level: 'info' });
    emit({ event: 'svc.request.failed', level: 'error' });
  });
  assert.deepEqual(captured, { log: [], error: [] });
});

test('a callback receives each event once with the request context', () => {
  const received: [SvcLogEvent, unknown][] = [];
  const emit = createEventLog((event, context) => received.push([event, context]));
  const context = { req: 'ctx' };
  const captured = captureConsole(() => {
    emit({ event: 'svc.rest.completed', level: 'info', requestId: 'r-3' }, context);
    emit({ event: 'svc.broker.connect.failed', level: 'warn' });
  });
  assert.equal(received.length, 2);
  assert.deepEqual(received[0][0], {
    event: 'svc.rest.completed',
    level: 'info',
    requestId: 'r-3',
  });
  assert.equal(received[0][1], context);
  assert.equal(received[1][1], undefined);
  assert.deepEqual(captured, { log: [], error: [] }, 'a callback replaces the console sink');
});

test('an object with log is called as a method', () => {
  const sink = {
    events: [] as string[],
    log(event: SvcLogEvent) {
      this.events.push(event.event);
    },
  };
  const emit = createEventLog(sink);
  emit({ event: 'svc.mcp.tool.completed', level: 'info' });
  assert.deepEqual(sink.events, ['svc.mcp.tool.completed']);
});

test('a throwing callback never breaks the caller', () => {
  let calls = 0;
  const emit = createEventLog(() => {
    calls++;
    throw new Error('sink down');
  });
  assert.doesNotThrow(() => emit({ event: 'svc.request.completed', level: 'info' }));
  const fromObject = createEventLog({
    log() {
      calls++;
      throw new Error('sink down');
    },
  });
  assert.doesNotThrow(() => fromObject({ event: 'svc.request.completed', level: 'info' }));
  assert.equal(calls, 2);
});

test('a rejecting async callback does not surface as an unhandled rejection', async () => {
  let calls = 0;
  const emit = createEventLog(
    (async () => {
      calls++;
      throw new Error('async sink down');
    }) as unknown as () => void,
  );
  emit({ event: 'svc.request.completed', level: 'info' });
  // Let the rejection settle; an unhandled one would fail the run on every runtime.
  await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(calls, 1);
});

test('createEventLog refuses option values that are not a sink', () => {
  for (const option of [true, null, 'console', 42, {}, { log: 'yes' }]) {
    assert.throws(
      () => createEventLog(option as never, 'service logger'),
      (error: unknown) =>
        error instanceof SvcConfigurationError && error.message.includes('service logger'),
    );
  }
});

test('describeErrorForLog keeps the name and message of an Error, never its stack', () => {
  const error = new TypeError('SECRET-123 postgres://u:p@db');
  const described = describeErrorForLog(error);
  assert.deepEqual(described, { name: 'TypeError', message: 'SECRET-123 postgres://u:p@db' });
  assert.deepEqual(Object.keys(described).sort(), ['message', 'name']);
  class CustomFailure extends Error {
    override name = 'CustomFailure';
  }
  assert.deepEqual(describeErrorForLog(new CustomFailure('boom')), {
    name: 'CustomFailure',
    message: 'boom',
  });
});

test('describeErrorForLog names non-Error values NonError', () => {
  assert.deepEqual(describeErrorForLog('SECRET-abc'), { name: 'NonError', message: 'SECRET-abc' });
  assert.deepEqual(describeErrorForLog(42), { name: 'NonError', message: '42' });
  assert.deepEqual(describeErrorForLog(null), { name: 'NonError', message: 'null' });
  assert.deepEqual(describeErrorForLog(undefined), { name: 'NonError', message: 'undefined' });
  assert.deepEqual(describeErrorForLog({ message: 'plain' }).name, 'NonError');
  const unprintable = Object.create(null);
  assert.deepEqual(describeErrorForLog(unprintable), { name: 'NonError', message: '[object]' });
  assert.equal(describeErrorForLog(Symbol('s')).message, 'Symbol(s)');
});

test('describeErrorForLog bounds name and message lengths', () => {
  const error = new Error('m'.repeat(10_000));
  error.name = 'N'.repeat(1000);
  const described = describeErrorForLog(error);
  assert.ok(described.name.length <= MAX_LOGGED_ERROR_NAME_LENGTH + 1);
  assert.ok(described.message.length <= MAX_LOGGED_ERROR_MESSAGE_LENGTH + 1);
  assert.ok(described.message.startsWith('mmm'));
  assert.ok(
    describeErrorForLog('s'.repeat(10_000)).message.length <= MAX_LOGGED_ERROR_MESSAGE_LENGTH + 1,
  );
});

test('describeErrorForLog survives throwing getters', () => {
  const error = new Error('original');
  Object.defineProperty(error, 'message', {
    get() {
      throw new Error('getter');
    },
  });
  assert.deepEqual(describeErrorForLog(error), { name: 'Error', message: '' });
});
