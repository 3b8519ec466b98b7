/**
 * A stand-in for the ability gateway in transport tests: `authenticate(token, proof?)` checks a
 * fixed token and returns a small ability with `echo`, `sleep`, `fail`, `ticks` and `whoami`.
 * It records what it saw (tokens, proofs, request metadata) so tests can assert on the wire.
 */
import { RpcTarget } from 'capnweb';
import { AbilityHandlerError, CapabilityAuthError } from '../../src/core/errors.ts';
import type { RpcMainMeta } from '../../src/service/rpc-serve.ts';
import { serveRpc, type ServeRpcOptions } from '../../src/service/rpc-serve.ts';
import { abilitySession } from '../../src/caller/ability-session.ts';
import type { RpcTransportFactory } from '../../src/caller/transports/outbound-metadata.ts';

/** The only unbound token the fake main accepts. */
export const FAKE_TOKEN = 'fake-token';

function base64UrlJson(value: unknown): string {
  const bytes = new TextEncoder().encode(JSON.stringify(value));
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** A JWT-shaped token (unsigned: the fake main never verifies) with the given claims. */
export function fakeJwt(claims: Record<string, unknown>): string {
  return `${base64UrlJson({ alg: 'ES256', typ: 'JWT' })}.${base64UrlJson(claims)}.c2ln`;
}

/** A bound token (carries `cnf`) the fake main accepts only with a proof. */
export const FAKE_BOUND_TOKEN = fakeJwt({ sub: 'caller', aud: 'target', cnf: { jkt: 'thumb' } });

/** An unbound JWT-shaped token the fake main accepts. */
export const FAKE_UNBOUND_JWT = fakeJwt({ sub: 'caller', aud: 'target' });

/**
 * A token the fake main accepts whatever its claims, told apart by a `fake: 'renewable'` claim:
 * lets a test give a session a series of distinct tokens with the expiries it needs.
 */
export function renewableFakeJwt(claims: Record<string, unknown>): string {
  return fakeJwt({ sub: 'caller', aud: 'target', ...claims, fake: 'renewable' });
}

function isRenewableFakeJwt(token: unknown): token is string {
  if (typeof token !== 'string') return false;
  try {
    const payload = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return JSON.parse(atob(payload)).fake === 'renewable';
  } catch {
    return false;
  }
}

/** What the fake main saw, across every session it served. */
export interface FakeMainRecord {
  authenticated: { token: string; proof: unknown }[];
  sessions: { transport: string; headers: Record<string, string>; query: Record<string, string> }[];
  calls: string[];
}

/** A fresh, empty record. */
export function newFakeRecord(): FakeMainRecord {
  return { authenticated: [], sessions: [], calls: [] };
}

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The ability a successful `authenticate` returns. */
export class FakeAbility extends RpcTarget {
  #record: FakeMainRecord;
  #meta: RpcMainMeta;

  constructor(record: FakeMainRecord, meta: RpcMainMeta) {
    super();
    this.#record = record;
    this.#meta = meta;
  }

  echo(input: unknown): unknown {
    this.#record.calls.push('echo');
    return input;
  }

  whoami(): { transport: string } {
    this.#record.calls.push('whoami');
    return { transport: this.#meta.transport };
  }

  async sleep(input: { ms: number }): Promise<{ slept: number }> {
    this.#record.calls.push('sleep');
    await delay(input.ms);
    return { slept: input.ms };
  }

  fail(): never {
    this.#record.calls.push('fail');
    throw new AbilityHandlerError('The fake ability failed on purpose', {
      reason: 'fake_failure',
      status: 503,
      retryable: true,
    });
  }

  ticks(input: { n: number }): ReadableStream<{ i: number }> {
    this.#record.calls.push('ticks');
    let i = 0;
    return new ReadableStream<{ i: number }>({
      pull(controller) {
        if (i >= input.n) controller.close();
        else controller.enqueue({ i: i++ });
      },
    });
  }
}

/** The main object: `authenticate(token, proof?)`. */
export class FakeMain extends RpcTarget {
  #record: FakeMainRecord;
  #meta: RpcMainMeta;

  constructor(record: FakeMainRecord, meta: RpcMainMeta) {
    super();
    this.#record = record;
    this.#meta = meta;
  }

  authenticate(token: unknown, proof?: unknown): FakeAbility {
    if (
      token !== FAKE_TOKEN && token !== FAKE_UNBOUND_JWT && token !== FAKE_BOUND_TOKEN &&
      !isRenewableFakeJwt(token)
    ) {
      throw new CapabilityAuthError('Unknown capability token', { reason: 'token_invalid' });
    }
    if (token === FAKE_BOUND_TOKEN && typeof proof !== 'string') {
      throw new CapabilityAuthError('A bound token needs a proof', { reason: 'proof_missing' });
    }
    this.#record.authenticated.push({ token, proof });
    this.#meta.authenticated?.();
    return new FakeAbility(this.#record, this.#meta);
  }
}

function recordSession(record: FakeMainRecord, meta: RpcMainMeta): void {
  const headers: Record<string, string> = {};
  meta.request.headers.forEach((value, key) => (headers[key] = value));
  const query: Record<string, string> = {};
  new URL(meta.request.url).searchParams.forEach((value, key) => (query[key] = value));
  record.sessions.push({ transport: meta.transport, headers, query });
}

/** `createMain` for serveRpc, recording each session's metadata. */
export function fakeMainFactory(record: FakeMainRecord): (meta: RpcMainMeta) => RpcTarget {
  return (meta) => {
    recordSession(record, meta);
    return new FakeMain(record, meta);
  };
}

/**
 * An in-process RPC endpoint serving the fake main: a `fetch` function that counts requests.
 * `serve` options override the defaults (both transports enabled).
 */
export function fakeRpcEndpoint(
  record: FakeMainRecord = newFakeRecord(),
  serve: Partial<ServeRpcOptions> = {},
): { fetch: (request: Request, env?: unknown) => Promise<Response>; requests: Request[] } {
  const requests: Request[] = [];
  return {
    requests,
    fetch(request, env) {
      requests.push(request);
      return serveRpc(request, {
        transports: ['http-batch', 'websocket'],
        createMain: fakeMainFactory(record),
        runtime: env,
        ...serve,
      });
    },
  };
}

/**
 * A caller session with the fake ability (`fake.echo`) over `transport`, its token from
 * `requestToken` (the fake token by default).
 */
export function fakeAbilitySession<Api>(
  transport: RpcTransportFactory,
  requestToken: () => Promise<string> = () => Promise.resolve(FAKE_TOKEN),
) {
  return abilitySession<Api>({
    abilityId: 'fake.echo',
    callerServiceId: 'caller',
    targetServiceId: 'fake',
    scopes: ['read'],
    requestToken,
    transport,
  });
}
