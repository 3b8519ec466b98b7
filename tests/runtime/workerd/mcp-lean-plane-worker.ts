// A Worker holding a control plane whose catalog publishes no MCP projection: what a deployment
// without MCP bundles. The MCP SDK must not be part of what it loads.
import { createControlPlane } from '../../../src/plane/mod.ts';
import { localService } from '../../../src/plane/endpoints.ts';
import { createService } from '../../../src/service/mod.ts';

const service = createService({
  id: 'lean',
  title: 'Lean',
  version: '1',
  auth: { jwks: { keys: [] }, issuer: 'lean-plane' },
  abilities: [],
});

const plane = createControlPlane({
  id: 'lean-plane',
  signingKeys: (env: unknown) => JSON.parse((env as { KEYS: string }).KEYS),
  services: [localService({ id: 'lean', service, grants: [] })],
});

export default { fetch: plane.fetch };
