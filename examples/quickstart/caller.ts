// A caller: gets a token from the plane, then calls the service with it.
import process from 'node:process';
import {
  type AbilityRpc,
  abilitySession,
  controlPlaneHmacTokenRequester,
  disposeAbilitySession,
  httpBatchRpc,
} from 'svcplane';
import type { notes } from './service.ts';

const planeUrl = process.env.PLANE_URL ?? 'http://127.0.0.1:8787';
const notesUrl = process.env.NOTES_URL ?? 'http://127.0.0.1:8788';

const session = abilitySession<AbilityRpc<typeof notes>>({
  abilityId: 'notes.store',
  callerServiceId: 'billing',
  targetServiceId: 'notes',
  scopes: ['notes.read'],
  requestToken: controlPlaneHmacTokenRequester({
    clientId: 'billing',
    controlPlaneUrl: planeUrl,
    clientSecret: process.env.BILLING_SECRET as string,
  }),
  transport: httpBatchRpc(`${notesUrl}/rpc/notes.store`),
});
try {
  console.log(await session.get({ id: '7' })); // { id: '7', text: 'hello billing' }
} finally {
  disposeAbilitySession(session);
}
