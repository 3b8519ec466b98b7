/**
 * Writing the frames a `ws` socket sends in one turn of the event loop to its connection
 * together, in one system call.
 *
 * `ws` writes every frame to the connection as it is sent, and an RPC call is several frames in a
 * row: a caller sends `push` and `pull` for a call (and the `release` of the last answer with
 * them), a service answers several calls or streamed items at once. Each write is a system call,
 * which on a loopback connection costs as much as the rest of the call's work. Holding the
 * connection's writes (`cork`) from a turn's first frame until the turn's I/O callbacks and
 * microtasks have run (the next macrotask), then releasing them (`uncork`), sends the same
 * frames, in the same order, in one write. No frame waits for anything but the turn it was sent
 * in.
 *
 * @module
 */
import { nextMacrotask } from '../core/next-macrotask.ts';

/** What a connection offers for holding writes: Node's `net.Socket` (and Deno's and TLS's). */
export interface CorkableConnection {
  cork(): void;
  uncork(): void;
  /** Bytes written and not yet handed to the operating system (held ones included). */
  readonly writableLength: number;
}

/** A socket whose `send` writes frames to a connection (a `ws` WebSocket). */
export interface FrameSender {
  // deno-lint-ignore no-explicit-any
  send(...args: any[]): void;
}

/**
 * Bytes held before they are written at once, without waiting for the end of the turn: a turn
 * that sends much (a large message, a burst of streamed items) is written as it goes, so holding
 * never adds more than this to what the process buffers.
 */
export const MAX_HELD_FRAME_BYTES = 64 * 1024;

function isCorkable(connection: unknown): connection is CorkableConnection {
  const candidate = connection as Partial<CorkableConnection> | null | undefined;
  return typeof candidate?.cork === 'function' && typeof candidate.uncork === 'function' &&
    typeof candidate.writableLength === 'number';
}

/**
 * Makes `socket` write the frames sent in one turn to `connection` together. A connection that
 * cannot hold writes (Bun's `ws`, which has no Node socket under it) is left as it is; so is a
 * socket without `send`. Returns whether the socket now coalesces.
 */
export function coalesceFramesPerTurn(socket: FrameSender, connection: unknown): boolean {
  if (!isCorkable(connection) || typeof socket.send !== 'function') return false;
  const send = socket.send;
  let holding = false;
  // One release per turn, however often a large turn releases early and holds again.
  let releaseScheduled = false;
  const release = () => {
    if (!holding) return;
    holding = false;
    connection.uncork();
  };
  const releaseAtTurnEnd = () => {
    releaseScheduled = false;
    release();
  };
  // An own property shadows the class's method for this socket alone.
  socket.send = function (this: FrameSender, ...args: unknown[]): void {
    if (!holding) {
      holding = true;
      connection.cork();
      if (!releaseScheduled) {
        releaseScheduled = true;
        nextMacrotask().then(releaseAtTurnEnd);
      }
    }
    try {
      send.apply(this, args);
    } finally {
      if (connection.writableLength >= MAX_HELD_FRAME_BYTES) release();
    }
  };
  return true;
}
