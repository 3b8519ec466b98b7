// Worker bundled by service-websocket.test.ts: the real zod and arktype services behind the
// Workers entrypoint, verifying tokens against the JWKS the test passes as a JSON binding.
import { workersEntrypoint } from '../../../src/adapters/workers.ts';
import { runtimeServices } from '../service-websocket-fixture.ts';

let services: ReturnType<typeof runtimeServices> | undefined;

export default workersEntrypoint({
  fetch(request: Request, env?: unknown) {
    services ??= runtimeServices((env as { JWKS: { keys: unknown[] } }).JWKS);
    return services.fetch(request, env);
  },
});
