// A small service as a user of the library would write it, built only from the public entry
// points (`svcplane` and `svcplane/testing`), to test the testing module the way it is used.
import { z } from 'zod';
import {
  abilityMethod,
  type AbilitySession,
  abilitySession,
  createService,
  defineAbility,
  type RpcTransportFactory,
  type SvcService,
  type TokenRequester,
} from '../../mod.ts';
import { createTestTokenIssuer, type TestTokenIssuer } from '../../src/testing/mod.ts';

/** The typed surface of `notes.store`, as a caller sees it. */
export interface NotesApi {
  whoami(input: Record<string, never>): Promise<{
    serviceId: string;
    scopes: string[];
    callerAccess: string;
    subject: { id: string; kind?: string } | null;
  }>;
  write(input: { text: string }): Promise<{ written: boolean }>;
  count(input: { n: number }): Promise<ReadableStream<{ i: number }>>;
  wait(input: Record<string, never>): Promise<{ waited: boolean }>;
  countThenWait(input: Record<string, never>): Promise<ReadableStream<{ i: number }>>;
}

/** One deployment: a test issuer, the service trusting it, and a gate that holds `wait`. */
export interface NotesFixture {
  tokens: TestTokenIssuer;
  service: SvcService;
  /** Resolves once a `wait` (or `countThenWait`) handler started waiting. */
  waiting(): Promise<void>;
  /** Lets every waiting handler finish. */
  release(): void;
  session(
    transport: RpcTransportFactory,
    requestToken: TokenRequester,
    scopes?: string[],
  ): AbilitySession<NotesApi>;
}

const empty = z.object({}).strict();
const tick = z.object({ i: z.number().int() });

/** Builds the fixture; `options.tokens` is the issuer the service trusts (default a fresh one). */
export async function notesFixture(
  options: { tokens?: TestTokenIssuer } = {},
): Promise<NotesFixture> {
  const tokens = options.tokens ?? await createTestTokenIssuer();
  let release: () => void = () => {};
  const gate = new Promise<void>((resolve) => release = resolve);
  let startedWaiting: () => void = () => {};
  const started = new Promise<void>((resolve) => startedWaiting = resolve);
  const notes = defineAbility({
    id: 'notes.store',
    exposure: 'published',
    rpc: { transports: ['http-batch', 'websocket'] },
    methods: {
      whoami: abilityMethod({
        input: empty,
        output: z.object({
          serviceId: z.string(),
          scopes: z.array(z.string()),
          callerAccess: z.string(),
          subject: z.object({ id: z.string(), kind: z.string().optional() }).nullable(),
        }),
        scopes: ['notes.read'],
      }),
      write: abilityMethod({
        input: z.object({ text: z.string() }),
        output: z.object({ written: z.boolean() }),
        scopes: ['notes.write'],
      }),
      count: abilityMethod({
        input: z.object({ n: z.number().int().nonnegative() }),
        output: tick,
        stream: true,
        scopes: ['notes.read'],
      }),
      wait: abilityMethod({ input: empty, output: z.object({ waited: z.boolean() }) }),
      countThenWait: abilityMethod({ input: empty, output: tick, stream: true }),
    },
    handler: ({ identity }) => ({
      whoami: () => ({
        serviceId: identity.serviceId,
        scopes: identity.scopes,
        callerAccess: identity.callerAccess,
        subject: identity.subject === undefined ? null : {
          id: identity.subject.id,
          ...(identity.subject.kind ? { kind: identity.subject.kind } : {}),
        },
      }),
      write: () => ({ written: true }),
      async *count({ n }: { n: number }) {
        for (let i = 0; i < n; i++) yield { i };
      },
      async wait() {
        startedWaiting();
        await gate;
        return { waited: true };
      },
      async *countThenWait() {
        yield { i: 0 };
        startedWaiting();
        await gate;
        yield { i: 1 };
      },
    }),
  });
  const service = createService({
    id: 'notes',
    title: 'Notes',
    version: '1.0.0',
    auth: tokens.auth,
    abilities: [notes],
    logger: false,
  });
  const fixture: NotesFixture = {
    tokens,
    service,
    waiting: () => started,
    release: () => release(),
    session: (transport, requestToken, scopes = ['notes.read']) =>
      abilitySession<NotesApi>({
        abilityId: 'notes.store',
        callerServiceId: 'billing',
        targetServiceId: 'notes',
        scopes,
        requestToken,
        transport,
      }),
  };
  return fixture;
}
