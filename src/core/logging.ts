/**
 * Structured log events. Each event is one JSON object with `event`, `level` and, when known,
 * `requestId`. Every surface takes a log callback; without one, events go to the console as one
 * JSON line each. Logging is a side channel: it must never change the outcome of a request.
 *
 * @module
 */
import { SvcConfigurationError } from './errors.ts';

/** Severity of a log event. */
export type SvcLogLevel = 'debug' | 'info' | 'warn' | 'error';

/** One structured log event. Fields beyond `event`, `level` and `requestId` depend on the event. */
export interface SvcLogEvent {
  /** Event name, e.g. `svc.request.completed`. */
  event: string;
  /** Severity. */
  level: SvcLogLevel;
  /** The request id, when the event happened inside a request. */
  requestId?: string;
  /** Event-specific fields. */
  [field: string]: unknown;
}

/** Receives each event once; `context` is the request context when emitted inside a request. */
export type SvcLogCallback = (event: SvcLogEvent, context?: unknown) => void;

/** A `log` / `logger` option: a callback, an object with `log`, `false` (silent) or default. */
export type SvcLogOption = SvcLogCallback | { log: SvcLogCallback } | false | undefined;

/** The emitter a surface calls; it never throws. */
export type SvcEventLog = (event: SvcLogEvent, context?: unknown) => void;

const noOp: SvcEventLog = () => {};

function writeJsonLine(event: SvcLogEvent): void {
  const line = JSON.stringify(event, (_key, value) =>
    // A bigint would make JSON.stringify throw; the event is still worth a line.
    typeof value === 'bigint' ? value.toString() : value);
  if (event.level === 'error') console.error(line);
  else console.log(line);
}

function swallowRejection(result: unknown): void {
  if (result !== null && typeof result === 'object' && 'then' in result) {
    const then = (result as { then?: unknown }).then;
    if (typeof then === 'function') {
      then.call(result, undefined, () => {});
    }
  }
}

function guarded(callback: SvcLogCallback): SvcEventLog {
  return (event, context) => {
    try {
      // An async callback's rejection must not surface as an unhandled rejection either.
      swallowRejection((callback as (...args: unknown[]) => unknown)(event, context));
    } catch {
      // A failing log sink must not fail the request it is reporting on.
    }
  };
}

/**
 * Builds the emitter for a surface's log option: `undefined` writes one JSON line per event to
 * the console (`console.error` for level `error`, else `console.log`); `false` discards events;
 * a callback (or `{ log }`) receives each event and the request context. The emitter never
 * throws, whatever the sink does. Any other option value refuses the configuration. An object
 * with `log` is a sink, called as a method: its other members (its own state, a logger's other
 * methods) are its business, so they are not refused as unknown options.
 */
export function createEventLog(option: SvcLogOption, label = 'log'): SvcEventLog {
  if (option === false) return noOp;
  if (option === undefined) return guarded(writeJsonLine);
  if (typeof option === 'function') return guarded(option);
  if (option !== null && typeof option === 'object' && typeof option.log === 'function') {
    const sink = option;
    return guarded((event, context) => sink.log(event, context));
  }
  throw new SvcConfigurationError(
    `${label}: expected a log callback, an object with a log method, or false`,
    { reason: 'invalid_log_option' },
  );
}

/** Longest error name kept in a log event. */
export const MAX_LOGGED_ERROR_NAME_LENGTH = 128;
/** Longest error message kept in a log event. */
export const MAX_LOGGED_ERROR_MESSAGE_LENGTH = 2048;

function bounded(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

/** Longest request path kept in a log event. */
export const MAX_LOGGED_PATH_LENGTH = 1024;

/**
 * The path of `url` as a log event carries it: still percent-encoded (a client's `%0A` stays
 * three characters, never a line break in the log) and at most {@link MAX_LOGGED_PATH_LENGTH}
 * characters, whatever length the runtime let through.
 */
export function loggedRequestPath(url: string): string {
  let path = plainSerializedPath(url);
  if (path === undefined) {
    try {
      path = new URL(url).pathname;
    } catch {
      path = '/';
    }
  }
  return bounded(path, MAX_LOGGED_PATH_LENGTH);
}

// What may start a dot segment, written plainly or percent-encoded.
const DOT_SEGMENT_HINT = /\/\.|%2e/i;

// An http(s) URL's path, up to its query or fragment, in visible ASCII.
const HTTP_URL_PATH = /^https?:\/\/[^/?#\\\s]*(\/[\x21-\x22\x24-\x3e\x40-\x7e]*)(?:[?#]|$)/;

/**
 * The path of a URL as a `Request` serialises it (every request's `url`), read from the text
 * without parsing it again; `undefined` when the text holds anything the parser would rewrite (a
 * backslash, a dot segment), which then takes the parser.
 */
function plainSerializedPath(url: string): string | undefined {
  const path = HTTP_URL_PATH.exec(url)?.[1];
  if (path === undefined || path.includes('\\') || DOT_SEGMENT_HINT.test(path)) return undefined;
  return path;
}

function readString(read: () => unknown): string | undefined {
  try {
    const value = read();
    return typeof value === 'string' ? value : undefined;
  } catch {
    return undefined;
  }
}

function describeNonError(value: unknown): string {
  if (typeof value === 'string') return value;
  try {
    return String(value);
  } catch {
    // Objects without a prototype, or with a throwing toString, still deserve a log line.
    return `[${typeof value}]`;
  }
}

function isErrorInstance(value: unknown): value is Error {
  try {
    return value instanceof Error;
  } catch {
    // A proxy's getPrototypeOf trap may throw; such a value is described like a non-error.
    return false;
  }
}

/**
 * The name and message of a thrown value for a log event (never its stack), each bounded in
 * length. A value that is not an `Error` gets name `NonError` and a string rendering as message.
 */
export function describeErrorForLog(error: unknown): { name: string; message: string } {
  if (isErrorInstance(error)) {
    const name = readString(() => error.name) ?? 'Error';
    const message = readString(() => error.message) ?? '';
    return {
      name: bounded(name, MAX_LOGGED_ERROR_NAME_LENGTH),
      message: bounded(message, MAX_LOGGED_ERROR_MESSAGE_LENGTH),
    };
  }
  return {
    name: 'NonError',
    message: bounded(describeNonError(error), MAX_LOGGED_ERROR_MESSAGE_LENGTH),
  };
}
