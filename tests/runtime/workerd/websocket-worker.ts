// Worker bundled by websocket.test.ts: the fake main behind the Workers entrypoint, plus a
// route that relies on WebSocketPair detection alone and one that reports what the fake saw.
import { workersEntrypoint } from '../../../src/adapters/workers.ts';
import { serveRpc } from '../../../src/service/rpc-serve.ts';
import { fakeMainFactory, fakeRpcEndpoint, newFakeRecord } from '../../support/fake-main.ts';

const record = newFakeRecord();
const endpoint = fakeRpcEndpoint(record);

export default workersEntrypoint({
  fetch(request: Request, env?: unknown) {
    const path = new URL(request.url).pathname;
    if (path === '/record') return Promise.resolve(Response.json(record));
    if (path === '/detected/rpc') {
      return serveRpc(request, {
        transports: ['websocket'],
        createMain: fakeMainFactory(record),
      });
    }
    return endpoint.fetch(request, env);
  },
});
