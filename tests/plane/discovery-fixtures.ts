/**
 * Fake services for the catalog, grant and endpoint tests: real discovery documents (built by
 * the service's own projection, so the plane's parser accepts them) served by a `fetch` function
 * whose behaviour a test chooses (answer, hang, fail, invalid JSON...), with a fetch counter.
 */
import { z } from 'zod';
import { defineAbility } from '../../src/service/ability.ts';
import { defineCapabilities } from '../../src/service/capabilities.ts';
import {
  type ServiceDiscoveryDocument,
  serviceDiscoveryDocument,
} from '../../src/service/discovery.ts';
import { abilityMethod } from '../../src/service/method.ts';
import { httpService, type ServiceEndpoint, type ServiceGrant } from '../../src/plane/endpoints.ts';

/**
 * The ability `<id>.main`: ability scope `<id>.use`, method `read` (scope `<id>.read`, REST
 * `GET /items/{key}`) and method `write` (scope `<id>.write`).
 */
export function mainAbility(id: string) {
  return defineAbility({
    id: `${id}.main`,
    exposure: 'published',
    scopes: [`${id}.use`],
    methods: {
      read: abilityMethod({
        input: z.object({ key: z.string() }),
        output: z.object({ value: z.string() }),
        scopes: [`${id}.read`],
        rest: { method: 'get', path: '/items/{key}' },
      }),
      write: abilityMethod({
        input: z.object({ key: z.string(), value: z.string() }),
        output: z.object({ ok: z.boolean() }),
        scopes: [`${id}.write`],
      }),
    },
    handler: () => ({
      read: ({ key }: { key: string }) => ({ value: key }),
      write: () => ({ ok: true }),
    }),
  });
}

/** The capability catalog of `id`: it publishes `<id>.admin` besides the ability scopes. */
export function capabilitiesFor(id: string) {
  return defineCapabilities({
    serviceId: id,
    scopes: { [`${id}.admin`]: { description: 'administer' } },
  });
}

/** The discovery document of a service `id` publishing {@link mainAbility} and its catalog. */
export function discoveryDocumentFor(id: string): ServiceDiscoveryDocument {
  const ability = mainAbility(id);
  const capabilities = capabilitiesFor(id);
  // Through JSON, as the plane would receive it.
  return JSON.parse(
    JSON.stringify(
      serviceDiscoveryDocument({
        id,
        title: `Service ${id}`,
        version: '1.0.0',
        capabilities,
        abilities: [ability],
      }),
    ),
  );
}
/** What a fake service does when its discovery document is requested. */
export type FakeBehaviour =
  | { kind: 'document'; body?: unknown; delayMs?: number }
  | { kind: 'hang' }
  | { kind: 'throw' }
  | { kind: 'status'; status: number }
  | { kind: 'text'; body: string };

/** A fake service: an `httpService` endpoint over a `fetch` function, and what it saw. */
export interface FakeService {
  endpoint: ServiceEndpoint;
  /** Discovery requests received. */
  requests: Request[];
  /** Changes what the next requests get. */
  behave(behaviour: FakeBehaviour): void;
  /** Releases every request currently hanging or delayed (answering them with the document). */
  release(): void;
}

/** A fake service `id` answering with its document (or the chosen behaviour). */
export function fakeService(
  id: string,
  options: { behaviour?: FakeBehaviour; grants?: ServiceGrant[] } = {},
): FakeService {
  let behaviour: FakeBehaviour = options.behaviour ?? { kind: 'document' };
  const requests: Request[] = [];
  const waiting = new Set<() => void>();
  const document = discoveryDocumentFor(id);
  const answer = (body: unknown) =>
    new Response(JSON.stringify(body), { headers: { 'content-type': 'application/json' } });
  const wait = (ms: number | undefined) =>
    new Promise<void>((resolve) => {
      const done = () => {
        waiting.delete(done);
        if (timer !== undefined) clearTimeout(timer);
        resolve();
      };
      const timer = ms === undefined ? undefined : setTimeout(done, ms);
      waiting.add(done);
    });
  const fetch = async (request: Request): Promise<Response> => {
    requests.push(request);
    const current = behaviour;
    switch (current.kind) {
      case 'document':
        if (current.delayMs !== undefined) await wait(current.delayMs);
        return answer(current.body ?? document);
      case 'hang':
        // Ignores the abort signal on purpose: the catalog must not depend on it.
        await wait(undefined);
        return answer(document);
      case 'throw':
        throw new TypeError('connect ECONNREFUSED 10.1.2.3:8443');
      case 'status':
        return new Response('nope', { status: current.status });
      case 'text':
        return new Response(current.body, { headers: { 'content-type': 'application/json' } });
    }
  };
  const endpoint = httpService({
    id,
    url: `https://${id}.internal.test`,
    grants: options.grants ?? [{ caller: 'caller-1', scopes: [`${id}.read`, `${id}.use`] }],
    fetch,
  });
  return {
    endpoint,
    requests,
    behave: (next) => void (behaviour = next),
    release: () => {
      for (const done of [...waiting]) done();
    },
  };
}
