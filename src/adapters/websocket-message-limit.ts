/**
 * The WebSocket message limit for a runtime whose server socket has no size option of its own
 * (Deno): the first message above the limit closes the connection with 1009, as `ws` and Bun
 * do, and is never delivered to the session.
 *
 * Such a runtime has already read the whole message before any listener sees it, so this bounds
 * what the session is handed, not what the runtime buffers.
 *
 * @module
 */
import { MESSAGE_TOO_BIG_CLOSE_CODE } from '../service/websocket-rpc-transport.ts';
import { MAX_WEBSOCKET_PAYLOAD_BYTES } from './serve-target.ts';

/** Close code and reason for a message above the limit (1009, RFC 6455 §7.4.1). */
export const MESSAGE_TOO_BIG = Object.freeze({
  code: MESSAGE_TOO_BIG_CLOSE_CODE,
  reason: 'message too big',
});

/** UTF-8 bytes one UTF-16 code unit can take at most. */
const MAX_UTF8_BYTES_PER_UNIT = 3;

/**
 * Whether `text` takes more than `limitBytes` bytes as UTF-8. Every code unit takes at least one
 * byte and at most three, so the length alone decides outside the band between a third of the
 * limit and the limit; only inside it are the units counted, stopping once past the limit.
 */
function textExceeds(text: string, limitBytes: number): boolean {
  if (text.length > limitBytes) return true;
  if (text.length * MAX_UTF8_BYTES_PER_UNIT <= limitBytes) return false;
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit < 0x80) continue;
    // Two bytes below U+0800; a surrogate is half of a four-byte pair (a received message is
    // decoded UTF-8, so it holds no lone surrogate); every other unit takes three.
    bytes += unit < 0x800 || (unit >= 0xd800 && unit <= 0xdfff) ? 1 : 2;
    if (bytes > limitBytes) return true;
  }
  return false;
}

/**
 * Whether a received message's `data` (text, an `ArrayBuffer`, a view or a `Blob`) is larger
 * than `limitBytes`. Text is measured as the UTF-8 bytes it arrived as.
 */
export function messageExceeds(data: unknown, limitBytes: number): boolean {
  if (typeof data === 'string') return textExceeds(data, limitBytes);
  if (data instanceof ArrayBuffer || ArrayBuffer.isView(data)) {
    return data.byteLength > limitBytes;
  }
  if (data instanceof Blob) return data.size > limitBytes;
  return false;
}

/**
 * Closes `socket` with {@link MESSAGE_TOO_BIG} at its first message larger than `limitBytes`
 * (default `MAX_WEBSOCKET_PAYLOAD_BYTES`). Call it before anything else listens: the listener
 * it adds stops that message, and every message after it, from reaching any later listener.
 */
export function refuseOversizedMessages(
  socket: WebSocket,
  limitBytes: number = MAX_WEBSOCKET_PAYLOAD_BYTES,
): void {
  let refused = false;
  socket.addEventListener('message', (event) => {
    if (!refused && !messageExceeds(event.data, limitBytes)) return;
    event.stopImmediatePropagation();
    if (refused) return;
    refused = true;
    try {
      socket.close(MESSAGE_TOO_BIG.code, MESSAGE_TOO_BIG.reason);
    } catch {
      // Already closing; the runtime ends the connection.
    }
  });
}
