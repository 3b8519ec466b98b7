// Run as a child process by idle-exit-scenario.ts: starts a long shared timeout and cancels it,
// then leaves the event loop with nothing to do. A process that does not exit long before the
// timeout would have ended is held by the shared timer.
import { startSharedTimeout } from '../../src/core/shared-timeout.ts';

const cancel = startSharedTimeout(120_000, () => {
  console.log('fired');
});
await new Promise((resolve) => setTimeout(resolve, 10));
cancel();
console.log('idle');
