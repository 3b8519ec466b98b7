// A service: one ability, checked against the plane's keys on every call.
import process from 'node:process';
import { abilityMethod, createService, defineAbility, jwksFromUrl } from 'svcplane';
import { serveNode } from 'svcplane/node';
import { z } from 'zod';

export const notes = defineAbility({
  id: 'notes.store',
  exposure: 'published',
  methods: {
    get: abilityMethod({
      input: z.object({ id: z.string() }),
      output: z.object({ id: z.string(), text: z.string() }),
      scopes: ['notes.read'],
    }),
  },
  handler: ({ identity }) => ({
    get: ({ id }) => ({ id, text: `hello ${identity.serviceId}` }),
  }),
});

const planeUrl = process.env.PLANE_URL ?? 'http://127.0.0.1:8787';
const notesUrl = process.env.NOTES_URL ?? 'http://127.0.0.1:8788';
const service = createService({
  id: 'notes',
  title: 'Notes',
  version: '1.0.0',
  auth: { jwks: jwksFromUrl(`${planeUrl}/.well-known/svc/jwks.json`), issuer: planeUrl },
  abilities: [notes],
});

await serveNode(service, { port: Number(new URL(notesUrl).port) });
console.log(`notes on ${notesUrl}`);
