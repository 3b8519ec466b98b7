/**
 * A Cap'n Web `RpcTransport` over a pair of byte streams, one per direction: how a session rides
 * a Workers native binding (`connectAbility`), whose RPC carries byte streams with their own
 * flow control but not arbitrary values. Messages are newline-framed UTF-8: Cap'n Web's JSON
 * never contains a raw newline.
 *
 * Errors, streams of items and stubs all travel inside the Cap'n Web messages, so nothing depends
 * on how the runtime serialises a thrown error across the binding.
 *
 * @module
 */
import type { RpcTransport } from 'capnweb';
import { SvcInternalError } from '../core/errors.ts';
import { peerMessageRefusal, type RpcReceiver } from './peer-message-screen.ts';

/** Largest message accepted from the peer (32 MiB, as on a WebSocket); past it the session aborts. */
export const MAX_BYTE_STREAM_MESSAGE_BYTES = 32 * 1024 * 1024;

const NEWLINE = 0x0a;

/** How many messages a session receives between two pauses for the event loop's other work. */
const YIELD_EVERY_MESSAGES = 256;

function connectionLost(message: string): SvcInternalError {
  return new SvcInternalError(message, { reason: 'rpc_connection_lost', status: 503 });
}

/** Joins buffered chunks (only when a message spans several). */
function concat(chunks: Uint8Array[], length: number): Uint8Array {
  if (chunks.length === 1) return chunks[0];
  const joined = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    joined.set(chunk, offset);
    offset += chunk.length;
  }
  return joined;
}

/**
 * Session transport over `incoming` (the peer's messages) and `outgoing` (a writer of this end's
 * messages). The end of `incoming` ends the session; `abort` ends both directions.
 */
export class ByteStreamRpcTransport implements RpcTransport {
  #reader: ReadableStreamDefaultReader<Uint8Array>;
  #writer: WritableStreamDefaultWriter<Uint8Array>;
  #receiver: RpcReceiver;
  #encoder = new TextEncoder();
  #decoder = new TextDecoder();
  #pending: Uint8Array[] = [];
  #pendingLength = 0;
  #lines: string[] = [];
  #failure: Error | undefined;
  #closed = false;
  #received = 0;
  #onClosed: (() => void)[] = [];
  #idle: (() => boolean) | undefined;

  constructor(
    incoming: ReadableStream<Uint8Array>,
    outgoing: WritableStream<Uint8Array>,
    receiver: RpcReceiver,
  ) {
    this.#reader = incoming.getReader();
    this.#writer = outgoing.getWriter();
    this.#receiver = receiver;
    // A write failing means the peer went away; `receive` reports it.
    this.#writer.closed.catch(() => {});
  }

  /** Whether the connection ended (the peer's stream ended, or this end aborted). */
  get closed(): boolean {
    return this.#closed;
  }

  /** Registers `callback` for when the connection ends, whichever end ended it. */
  onClosed(callback: () => void): void {
    if (this.#closed) callback();
    else this.#onClosed.push(callback);
  }

  send(message: string): void {
    if (this.#closed) return;
    this.#writer.write(this.#encoder.encode(`${message}\n`)).catch(() => this.#end());
  }

  /**
   * Ends the connection as soon as `idle()` says the session holds nothing in use: now, or when
   * the session next asks for a message (it has handled the previous one, such as the release
   * of a stream that ended).
   */
  closeOnceIdle(idle: () => boolean): void {
    if (idle()) this.close();
    else this.#idle = idle;
  }

  async receive(): Promise<string> {
    if (this.#idle?.()) this.close();
    // A pipe within one isolate (a binding to a service in the same process) resolves every read
    // on a microtask: without a pause now and then, a busy stream would never let timers and
    // sockets run.
    if (++this.#received % YIELD_EVERY_MESSAGES === 0) {
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    for (;;) {
      const line = this.#lines.shift();
      if (line !== undefined) {
        const refusal = peerMessageRefusal(line, this.#receiver);
        if (refusal !== undefined) throw refusal;
        return line;
      }
      if (this.#failure !== undefined) throw this.#failure;
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await this.#reader.read();
      } catch {
        this.#fail(connectionLost('The native binding session broke'));
        continue;
      }
      if (chunk.done) {
        this.#fail(connectionLost('The native binding session ended'));
        continue;
      }
      this.#take(chunk.value);
    }
  }

  abort(_reason: unknown): void {
    this.#fail(connectionLost('The native binding session was aborted'));
  }

  /** Ends the connection normally from this end. */
  close(): void {
    this.#fail(connectionLost('The native binding session was closed'));
  }

  #take(bytes: Uint8Array): void {
    let start = 0;
    for (let index = bytes.indexOf(NEWLINE); index !== -1; index = bytes.indexOf(NEWLINE, start)) {
      this.#pending.push(bytes.subarray(start, index));
      this.#pendingLength += index - start;
      this.#lines.push(this.#decoder.decode(concat(this.#pending, this.#pendingLength)));
      this.#pending = [];
      this.#pendingLength = 0;
      start = index + 1;
    }
    if (start < bytes.length) {
      this.#pending.push(bytes.subarray(start));
      this.#pendingLength += bytes.length - start;
      if (this.#pendingLength > MAX_BYTE_STREAM_MESSAGE_BYTES) {
        this.#fail(
          new SvcInternalError(
            `A native binding message exceeded ${MAX_BYTE_STREAM_MESSAGE_BYTES} bytes`,
            { reason: 'rpc_message_too_large', status: 413 },
          ),
        );
      }
    }
  }

  #fail(error: Error): void {
    if (this.#failure === undefined) this.#failure = error;
    this.#end();
  }

  #end(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#failure === undefined) this.#failure = connectionLost('The native binding ended');
    this.#pending = [];
    this.#writer.close().catch(() => {});
    this.#reader.cancel().catch(() => {});
    for (const callback of this.#onClosed.splice(0)) callback();
  }
}

/** The two ends of a byte pipe. */
export interface BytePipe {
  readable: ReadableStream<Uint8Array>;
  writable: WritableStream<Uint8Array>;
}

/**
 * A byte pipe: what one end writes, the other end reads; its readable is what crosses the
 * binding. On Workers it is the runtime's `IdentityTransformStream`, a byte stream native RPC
 * carries with its own flow control; elsewhere (an in-process binding) a standard
 * `TransformStream`.
 */
export function bytePipe(): BytePipe {
  const Identity = (globalThis as { IdentityTransformStream?: new () => BytePipe })
    .IdentityTransformStream;
  if (typeof Identity === 'function') return new Identity();
  return new TransformStream<Uint8Array, Uint8Array>();
}
