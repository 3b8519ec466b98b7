// The control plane: signs capability tokens for callers it knows, for the grants it holds.
import process from 'node:process';
import { createControlPlane, hmacServiceClientAuth, httpService } from 'svcplane';
import { serveNode } from 'svcplane/node';

const env = process.env;
const planeUrl = env.PLANE_URL ?? 'http://127.0.0.1:8787';

const plane = createControlPlane({
  id: 'plane',
  issuer: planeUrl,
  // From `npx svcplane keygen`: the two lines it prints.
  signingKeys: [{ kid: env.SVC_SIGNING_KID!, secret: env.SVC_SIGNING_KEY! }],
  authenticateCaller: hmacServiceClientAuth({
    clients: { billing: { serviceId: 'billing', secret: env.BILLING_SECRET! } },
  }),
  services: [
    httpService({
      id: 'notes',
      url: env.NOTES_URL ?? 'http://127.0.0.1:8788',
      grants: [{ caller: 'billing', scopes: ['notes.read'] }],
    }),
  ],
});

await serveNode(plane, { port: Number(new URL(planeUrl).port) });
console.log(`plane on ${planeUrl}`);
