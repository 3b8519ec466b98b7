/**
 * `npm start`: runs the demo deployment (see `demo-deployment.ts`) on 127.0.0.1, prints its
 * URLs and a short tour, then keeps serving until interrupted (Ctrl+C closes the servers and
 * exits 0). With `DEMO_EXIT_AFTER_TOUR=1` it exits after the tour instead: 0 when every step
 * went as expected, 1 otherwise.
 */
import process from 'node:process';
import { startDemo, type TourStep } from './demo-deployment.ts';

function printStep(step: TourStep, index: number): void {
  console.log(`${step.ok ? 'OK    ' : 'FAILED'} ${index + 1}. ${step.title}`);
  for (const line of step.details) console.log(`         ${line}`);
}

const demo = await startDemo();
const addresses: [string, string][] = [
  ['control plane', demo.urls.plane],
  ['  JWKS', `${demo.urls.plane}/.well-known/svc/jwks.json`],
  ['  token endpoint', `${demo.urls.plane}/.well-known/svc/capability-token`],
  ['  REST', demo.rest.curl],
  ['  MCP endpoint', demo.mcp.url],
  ['  MCP header', demo.mcp.header],
  ['  RPC broker', `${demo.urls.plane}/rpc`],
  ['  OpenAPI 3.2', demo.urls.openapi],
  ['  API reference', demo.urls.reference],
  ['orders', `${demo.urls.orders}/.well-known/svc/service.json`],
  ['ledger (ingress)', `${demo.urls.ledger}/.well-known/svc/service.json`],
];
console.log('svcplane demo, serving on 127.0.0.1');
for (const [label, url] of addresses) console.log(`  ${label.padEnd(18)} ${url}`);
console.log('');

const steps = await demo.runTour();
steps.forEach(printStep);
const failed = steps.filter((step) => !step.ok).length;
console.log('');
console.log(failed === 0 ? `tour: all ${steps.length} steps OK` : `tour: ${failed} step(s) FAILED`);

if (process.env.DEMO_EXIT_AFTER_TOUR === '1') {
  await demo.close();
  process.exit(failed === 0 ? 0 : 1);
}

console.log('REST through the plane (paste it while the demo runs):');
console.log(`  ${demo.rest.curl}`);
console.log('serving until interrupted (Ctrl+C)');
let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await demo.close();
  process.exit(0);
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
