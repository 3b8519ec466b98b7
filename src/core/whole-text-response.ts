/**
 * Responses whose whole body is a string the service already holds (an HTTP batch's answer).
 * A serving helper that writes to its socket itself can send that text as it is, instead of
 * reading it back through the body's stream (on Node, building and draining that stream is
 * several times the cost of writing the text).
 *
 * @module
 */

// A private symbol, so no one else can claim a response's text.
const WHOLE_TEXT = Symbol('svcplane.wholeText');

/** A `Response` with `text` as its body, remembering the text for {@link untouchedWholeText}. */
export function wholeTextResponse(text: string, init: ResponseInit): Response {
  const response = new Response(text, init);
  try {
    Object.defineProperty(response, WHOLE_TEXT, { value: text, enumerable: false });
  } catch {
    // A response that takes no property is written through its stream, as any other.
  }
  return response;
}

/**
 * The text `response` was built with by {@link wholeTextResponse}, while its body is untouched
 * (nobody read, locked or is streaming it); otherwise `undefined`, and the body is the answer.
 * A response built anew from it (a middleware replacing the body, say) carries no text.
 */
export function untouchedWholeText(response: Response): string | undefined {
  const text = (response as { [WHOLE_TEXT]?: string })[WHOLE_TEXT];
  if (text === undefined || response.bodyUsed || response.body === null) return undefined;
  return response.body.locked ? undefined : text;
}
