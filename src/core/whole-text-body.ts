/**
 * Requests and responses whose whole body is a string this process already holds (an HTTP
 * batch and its answer). Whoever reads such a body in the same process (a service handed the
 * caller's batch, a caller handed the service's answer, a serving helper writing the answer to
 * its socket) can take that text as it is, instead of reading it back through the body's stream:
 * building and draining that stream costs several times the read on every runtime.
 *
 * @module
 */

import { deferredTextResponse, takesDeferredResponses } from './deferred-response.ts';

// A private symbol, so no one else can claim a body's text.
const WHOLE_TEXT = Symbol('svcplane.wholeText');

/** What carries a body: a `Request` or a `Response`. */
interface BodyCarrier {
  readonly bodyUsed?: boolean;
}

function remember<T extends BodyCarrier>(message: T, text: string): T {
  try {
    // Assigned rather than defined: defining a property costs several times more on some
    // engines (V8), per message. Being keyed by a private symbol, it is read by nothing else.
    (message as { [WHOLE_TEXT]?: string })[WHOLE_TEXT] = text;
  } catch {
    // A message that takes no property is read through its stream, as any other.
  }
  return message;
}

/**
 * A `Response` with `text` as its body, remembering the text for {@link untouchedWholeText}.
 * For a serving helper whose `env` says it takes deferred responses (see
 * `deferred-response.ts`), the runtime's response is built only if something reads its body.
 */
export function wholeTextResponse(text: string, init: ResponseInit, env?: unknown): Response {
  const response = takesDeferredResponses(env)
    ? deferredTextResponse(text, init)
    : new Response(text, init);
  return remember(response, text);
}

/** A `Request` with `text` as its body, remembering the text for {@link untouchedWholeText}. */
export function wholeTextRequest(
  url: string | URL,
  text: string,
  init: Omit<RequestInit, 'body'>,
): Request {
  return remember(new Request(url, { ...init, body: text }), text);
}

/**
 * The text `message` was built with by {@link wholeTextResponse} or {@link wholeTextRequest},
 * while nobody has read any of its body; otherwise `undefined`, and the body is the answer. A
 * message built anew from it (a middleware replacing the body, a copied request) carries no
 * text. Only `bodyUsed` is consulted: reading `body` makes some runtimes build the stream this
 * exists to avoid, and a stream locked but not yet read would deliver this very text.
 */
export function untouchedWholeText(message: BodyCarrier): string | undefined {
  const text = (message as { [WHOLE_TEXT]?: string })[WHOLE_TEXT];
  return text === undefined || message.bodyUsed === true ? undefined : text;
}
