// A REST-rich service for the plane fixture (`extraServices`): every REST method including
// QUERY, path variables (a string and a number), success statuses 200, 201 and 204, query
// fallbacks (string and string-array fields, and fields that must not fall back), recursive
// schemas in both shapes libraries emit (`$ref: '#'` and `$defs`), and methods that must stay
// out of the facade (streaming, no `rest`, a private ability). Handlers are counted like the
// checklist fixture's, so a refusal can prove no handler ran.
import { z } from 'zod';
import { abilityMethod } from '../../src/service/method.ts';
import { defineAbility } from '../../src/service/ability.ts';
import { createService } from '../../src/service/service.ts';
import type { ServiceOptions, SvcService } from '../../src/service/mod.ts';
import type { FixtureStats } from './fixture-abilities.ts';

/** The id of the REST-rich fixture service. */
export const REST_SERVICE_ID = 'svc-r';

/** The scope every method of `svc-r.notes` requires. */
export const REST_SERVICE_SCOPE = 'svc-r.notes';

/** Grants of svc-r: the fixture's callers (and the plane itself) may use its one scope. */
export const REST_SERVICE_GRANTS = ['svc-caller', 'svc-plane', 'svc-robot'].map((caller) => ({
  caller,
  scopes: [REST_SERVICE_SCOPE],
}));

const bump = (stats: FixtureStats, key: string) =>
  stats.calls.set(key, (stats.calls.get(key) ?? 0) + 1);

const note = z.object({
  noteId: z.string(),
  title: z.string(),
  body: z.string().optional(),
  tags: z.array(z.string()).optional(),
});

interface Outline {
  title: string;
  children: Outline[];
}
// Root recursion: the JSON Schema refers to itself with `$ref: '#'`.
const outline: z.ZodType<Outline> = z.object({
  title: z.string(),
  get children() {
    return z.array(outline);
  },
});
// Nested recursion: the JSON Schema names it under `$defs`.
const filterInput = z.object({
  q: z.string(),
  filter: outline.optional(),
  limit: z.number().int().positive().optional(),
});

/** `svc-r.notes`: a published ability with one method per REST shape. */
export function notesAbility(stats: FixtureStats) {
  const id = `${REST_SERVICE_ID}.notes`;
  const call = (method: string) => bump(stats, `${id}#${method}`);
  return defineAbility({
    id,
    title: 'Notes',
    description: 'Notes kept by the REST fixture service.',
    exposure: 'published',
    scopes: [REST_SERVICE_SCOPE],
    rpc: { transports: ['http-batch', 'websocket'] },
    methods: {
      list: abilityMethod({
        description: 'List notes, optionally by tag',
        input: z.object({
          tag: z.string().optional(),
          tags: z.array(z.string()).optional(),
          limit: z.number().int().optional(),
        }),
        output: z.object({ notes: z.array(note) }),
        rest: { method: 'get', path: '/notes' },
      }),
      create: abilityMethod({
        description: 'Create a note',
        input: note,
        output: note,
        rest: { method: 'post', path: '/notes/{noteId}', status: 201 },
      }),
      get: abilityMethod({
        input: z.object({ noteId: z.string() }),
        output: note,
        rest: { method: 'get', path: '/notes/{noteId}' },
      }),
      replace: abilityMethod({
        input: note,
        output: note,
        idempotent: true,
        rest: { method: 'put', path: '/notes/{noteId}' },
      }),
      retitle: abilityMethod({
        input: z.object({ noteId: z.string(), title: z.string() }),
        output: note,
        rest: { method: 'patch', path: '/notes/{noteId}' },
      }),
      remove: abilityMethod({
        input: z.object({ noteId: z.string() }),
        output: z.object({}),
        rest: { method: 'delete', path: '/notes/{noteId}', status: 204 },
      }),
      search: abilityMethod({
        description: 'Search notes with a structured filter',
        input: filterInput,
        output: z.object({ hits: z.array(z.string()) }),
        rest: { method: 'query', path: '/notes/search' },
      }),
      outline: abilityMethod({
        input: z.object({ noteId: z.string() }),
        output: outline,
        rest: { method: 'get', path: '/notes/{noteId}/outline' },
      }),
      page: abilityMethod({
        // A path value is a string: the field says which strings, the handler converts.
        input: z.object({
          page: z.string().regex(/^[0-9]{1,6}$/),
          size: z.number().int().optional(),
        }),
        output: z.object({ page: z.number().int(), noteIds: z.array(z.string()) }),
        rest: { method: 'get', path: '/pages/{page}' },
      }),
      count: abilityMethod({ input: z.object({}), output: z.object({ count: z.number() }) }),
      watch: abilityMethod({
        input: z.object({ n: z.number().int().nonnegative() }),
        output: z.object({ i: z.number().int() }),
        stream: true,
      }),
    },
    handler: () => {
      stats.factories.set(id, (stats.factories.get(id) ?? 0) + 1);
      return {
        list() {
          call('list');
          return { notes: [{ noteId: 'n1', title: 'First' }] };
        },
        create(value: z.infer<typeof note>) {
          call('create');
          return value;
        },
        get({ noteId }: { noteId: string }) {
          call('get');
          return { noteId, title: `Note ${noteId}` };
        },
        replace(value: z.infer<typeof note>) {
          call('replace');
          return value;
        },
        retitle({ noteId, title }: { noteId: string; title: string }) {
          call('retitle');
          return { noteId, title };
        },
        remove() {
          call('remove');
          return {};
        },
        search({ q }: { q: string }) {
          call('search');
          return { hits: [q] };
        },
        outline({ noteId }: { noteId: string }): Outline {
          call('outline');
          return { title: noteId, children: [{ title: 'child', children: [] }] };
        },
        page({ page }: { page: string }) {
          call('page');
          return { page: Number(page), noteIds: [] };
        },
        count() {
          call('count');
          return { count: 1 };
        },
        async *watch({ n }: { n: number }) {
          call('watch');
          for (let i = 0; i < n; i++) yield { i };
        },
      };
    },
  });
}

/** `svc-r.drafts`: private, with REST metadata that must never be mounted or described. */
export function draftsAbility(stats: FixtureStats) {
  const id = `${REST_SERVICE_ID}.drafts`;
  return defineAbility({
    id,
    exposure: 'private',
    methods: {
      peek: abilityMethod({
        input: z.object({}),
        output: z.object({ secret: z.string() }),
        rest: { method: 'get', path: '/drafts' },
      }),
    },
    handler: () => ({
      peek() {
        bump(stats, `${id}#peek`);
        return { secret: stats.marker };
      },
    }),
  });
}

/** The REST-rich service, verifying tokens with `auth` like the fixture's services. */
export function restFixtureService(
  stats: FixtureStats,
  auth: ServiceOptions['auth'],
  version = '2.0.0',
): SvcService {
  return createService({
    id: REST_SERVICE_ID,
    title: 'Service R',
    version,
    auth,
    abilities: [notesAbility(stats), draftsAbility(stats)],
    logger: false,
  });
}
