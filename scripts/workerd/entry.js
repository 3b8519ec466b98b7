// Worker entry for one bundled test file: importing the file registers its tests with the shim.
import { runRegisteredTests } from 'node:test';
import '__TEST_FILE__';

export default {
  async fetch() {
    const results = await runRegisteredTests();
    return new Response(JSON.stringify(results), {
      headers: { 'content-type': 'application/json' },
    });
  },
};
