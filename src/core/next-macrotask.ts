/**
 * Waiting for the next macrotask: past every pending microtask and whatever the runtime does
 * between tasks (writing a response, delivering I/O), without the clamp a zero-delay timer has.
 *
 * @module
 */

/** Resolves on the next macrotask, without the timer clamp where the runtime allows. */
export function nextMacrotask(): Promise<void> {
  const immediate = (globalThis as { setImmediate?: (callback: () => void) => unknown })
    .setImmediate;
  if (typeof immediate === 'function') {
    return new Promise((resolve) => immediate(() => resolve()));
  }
  if (typeof MessageChannel === 'function') {
    return new Promise((resolve) => {
      const channel = new MessageChannel();
      channel.port1.onmessage = () => {
        channel.port1.close();
        resolve();
      };
      channel.port2.postMessage(null);
    });
  }
  return new Promise((resolve) => setTimeout(resolve, 0));
}
