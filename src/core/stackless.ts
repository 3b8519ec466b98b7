/**
 * Errors raised on every request as a signal (a batch that ended, a session closed after its
 * response) rather than as a failure: capturing a stack for each costs more than the rest of
 * their work, and nothing ever prints it.
 *
 * @module
 */

/** `Error.stackTraceLimit` where the engine has it (V8, JavaScriptCore); a no-op elsewhere. */
const errorConstructor = Error as { stackTraceLimit?: number };

/**
 * Runs `work` with stack capture off, for errors it creates synchronously (e.g. the one Cap'n
 * Web builds when a session's main stub is disposed). Only for work whose errors are signals:
 * any error `work` creates has no stack.
 */
export function withoutStackCapture<T>(work: () => T): T {
  const limit = errorConstructor.stackTraceLimit;
  if (typeof limit !== 'number') return work();
  errorConstructor.stackTraceLimit = 0;
  try {
    return work();
  } finally {
    errorConstructor.stackTraceLimit = limit;
  }
}

/** A plain `Error` with `message` and no stack captured. */
export function stacklessError(message: string): Error {
  return withoutStackCapture(() => new Error(message));
}
