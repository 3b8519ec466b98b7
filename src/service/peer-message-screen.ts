/**
 * Screens each Cap'n Web message a peer sends before the session reads it, refusing values this
 * library's protocol never carries.
 *
 * Cap'n Web lets a peer pass its own promises, stubs and streams as values. Neither side of an
 * ability session ever needs them from the other: a caller sends JSON inputs, tokens and proofs;
 * a service answers with JSON outputs, the ability stub and streamed results. Accepting them
 * anyway is harmful: Cap'n Web (0.12) leaves a received promise's rejection unobserved when the
 * session drops it, so one unauthenticated message holding `["promise", n]` ends a Node, Deno or
 * Bun process with an unhandled rejection; a call whose input is a promise the peer never
 * resolves is never delivered, so no deadline starts and an HTTP batch never answers; and
 * references the peer passes in are held outside any entry limit.
 *
 * A message holding such a value is refused as a whole: the transport reports it as a failure,
 * which aborts the session with {@link PEER_VALUE_REFUSED_REASON} (an HTTP batch answers with
 * that abort). The screen walks only where Cap'n Web evaluates expressions, so a JSON string
 * such as `"promise"` in an input, or a method of that name, is data and passes.
 *
 * @module
 */
import type { AnyRpcTransport } from 'capnweb';
import { SvcInternalError } from '../core/errors.ts';

/** Which end of a session receives the message: they send different things. */
export type RpcReceiver = 'service' | 'caller';

/** `reason` of the error a session aborts with when a peer message is refused. */
export const PEER_VALUE_REFUSED_REASON = 'rpc_value_refused';

// Value kinds a service never sends: a promise, a `.map()` over a remote value (it runs the
// peer's instructions here), a writable stream. Nor a stub anywhere but as a whole answer (the
// ability stub `authenticate` returns): one inside a value could be called by the caller's own
// code, e.g. as the `then` of what looks like a promise. A readable stream (a streaming
// method's result) it does send.
const REFUSED_FROM_SERVICES: ReadonlySet<string> = new Set([
  'promise',
  'remap',
  'writable',
  'export',
]);
// A caller sends none of those, and no readable stream either.
const REFUSED_FROM_CALLERS: ReadonlySet<string> = new Set([...REFUSED_FROM_SERVICES, 'readable']);
// Message types that deliver a stream to the receiver; only a service sends them.
const STREAM_MESSAGES: ReadonlySet<string> = new Set(['stream', 'pipe']);

// A message can hold a refused value only if one of these names appears in it literally, or
// behind a `\u` escape; most messages skip the parse.
const MAY_HOLD_REFUSED_FROM_CALLER = /"(?:promise|remap|writable|export|readable|stream|pipe)"|\\u/;
const MAY_HOLD_REFUSED_FROM_SERVICE = /"(?:promise|remap|writable|export)"|\\u/;

/**
 * The error to abort a session with when `raw`, a message from the peer (JSON text, or the
 * parsed message over a structured-clone transport), carries something `receiver` never
 * accepts; `undefined` when it passes (including text that is not JSON at all: Cap'n Web
 * refuses that itself).
 */
export function peerMessageRefusal(raw: unknown, receiver: RpcReceiver): Error | undefined {
  let message = raw;
  if (typeof raw === 'string') {
    const pattern = receiver === 'service'
      ? MAY_HOLD_REFUSED_FROM_CALLER
      : MAY_HOLD_REFUSED_FROM_SERVICE;
    if (!pattern.test(raw)) return undefined;
    try {
      message = JSON.parse(raw);
    } catch {
      return undefined;
    }
  }
  const refused = receiver === 'service' ? REFUSED_FROM_CALLERS : REFUSED_FROM_SERVICES;
  const found = refusedInMessage(message, receiver, refused);
  if (found === undefined) return undefined;
  const sender = receiver === 'service' ? 'caller' : 'service';
  return new SvcInternalError(
    `RPC message refused: a ${sender} never sends ${found} in this protocol`,
    { status: 400, reason: PEER_VALUE_REFUSED_REASON },
  );
}

/** What in a whole message is refused, described, or `undefined`. */
function refusedInMessage(
  message: unknown,
  receiver: RpcReceiver,
  refused: ReadonlySet<string>,
): string | undefined {
  if (!Array.isArray(message)) return undefined;
  const type = message[0];
  if (receiver === 'service' && typeof type === 'string' && STREAM_MESSAGES.has(type)) {
    return `a "${type}" message`;
  }
  switch (type) {
    case 'push':
    case 'stream':
    case 'abort':
      return refusedInExpression(message[1], refused);
    case 'resolve':
      if (receiver === 'caller' && isStubExpression(message[2])) return undefined;
      return refusedInExpression(message[2], refused);
    case 'reject':
      return refusedInExpression(message[2], refused);
    default:
      return undefined;
  }
}

/**
 * Walks an expression as Cap'n Web evaluates it, with an explicit stack (a message may nest as
 * deep as its size allows; Cap'n Web's own depth limit applies after this).
 */
function refusedInExpression(
  expression: unknown,
  refused: ReadonlySet<string>,
): string | undefined {
  const pending: unknown[] = [expression];
  while (pending.length > 0) {
    const value = pending.pop();
    if (value === null || typeof value !== 'object') continue;
    if (!Array.isArray(value)) {
      pushAll(pending, Object.values(value));
      continue;
    }
    if (value.length === 1 && Array.isArray(value[0])) {
      // An escaped array literal: each element is an expression.
      pushAll(pending, value[0]);
      continue;
    }
    const kind = value[0];
    if (typeof kind !== 'string') continue;
    if (refused.has(kind)) return `a value of kind "${kind}" there`;
    pushAll(pending, subExpressions(kind, value));
  }
  return undefined;
}

/** The parts of a special value Cap'n Web evaluates as expressions in turn. */
function subExpressions(kind: string, value: unknown[]): unknown[] {
  switch (kind) {
    case 'import':
    case 'pipeline':
      return Array.isArray(value[3]) ? value[3] : [];
    case 'error':
      return isRecord(value[4]) ? Object.values(value[4]) : [];
    case 'request':
      return isRecord(value[2]) ? [value[2].body, value[2].signal] : [];
    case 'response':
      return [value[1]];
    case 'blob':
      return [value[2]];
    default:
      return [];
  }
}

/** Appends without spreading: an array may be longer than a call's argument limit. */
function pushAll(target: unknown[], values: readonly unknown[]): void {
  for (let i = 0; i < values.length; i++) target.push(values[i]);
}

/** `["export", n]`: a stub as the whole value (the ability stub a service answers with). */
function isStubExpression(value: unknown): boolean {
  return Array.isArray(value) && value.length === 2 && value[0] === 'export' &&
    typeof value[1] === 'number';
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * A Cap'n Web transport whose received messages pass {@link peerMessageRefusal} first: a refused
 * message fails `receive`, which aborts the session.
 */
export function screenedTransport(
  transport: AnyRpcTransport,
  receiver: RpcReceiver,
): AnyRpcTransport {
  const parsesText = transport.encodingLevel === undefined || transport.encodingLevel === 'string';
  const screened = {
    ...(transport.encodingLevel !== undefined ? { encodingLevel: transport.encodingLevel } : {}),
    send: (message: never) => transport.send(message),
    receive: async () => {
      const message = await transport.receive();
      // A string transport's session parses whatever it gets as JSON text (`JSON.parse` turns a
      // non-string into text first), so that text is what the screen reads.
      const screened = parsesText && typeof message !== 'string' ? String(message) : message;
      const refusal = peerMessageRefusal(screened, receiver);
      if (refusal !== undefined) throw refusal;
      return message;
    },
  } as AnyRpcTransport;
  if (typeof transport.abort === 'function') {
    screened.abort = (reason: unknown) => transport.abort!(reason);
  }
  return screened;
}
