/**
 * `svcplane call <service-url> <ability.method> [json] (--token <jwt> | <credentials>)`: one call
 * through a real caller session, over HTTP-batch or WebSocket (`--transport`). The service's
 * discovery document gives the RPC path, the transports and the scopes to request. A streaming
 * method prints each item as one JSON line (NDJSON) on stdout and a running count on stderr.
 *
 * @module
 */
import process from 'node:process';
import { wsWebSocketFactory } from '../../adapters/ws-client.ts';
import {
  abilitySession,
  disposeAbilitySession,
  type ProofSigner,
  type TokenRequester,
} from '../../caller/ability-session.ts';
import { httpBatchRpc } from '../../caller/transports/http-batch.ts';
import type { RpcTransportFactory } from '../../caller/transports/outbound-metadata.ts';
import { websocketRpc } from '../../caller/transports/websocket.ts';
import type { AbilityDiscoveryEntry } from '../../service/discovery.ts';
import { CliUsageError, parseArguments, type ParsedArguments, positionals } from '../arguments.ts';
import type { CliOutput } from '../output.ts';
import { CREDENTIAL_OPTIONS, CREDENTIAL_USAGE, requesterFrom } from './credentials.ts';
import { fetchServiceDocument } from './service-document.ts';

export const CALL_USAGE = 'svcplane call <service-url> <ability.method> [<json input>] ' +
  `(--token <jwt> | --caller <service id> ${CREDENTIAL_USAGE}) ` +
  '[--scope <scope>...] [--transport http-batch|websocket] [--json]';

/** `orders.catalog.list` → ability `orders.catalog`, method `list`. */
function splitTarget(target: string): { abilityId: string; method: string } {
  const dot = target.lastIndexOf('.');
  if (dot <= 0 || dot === target.length - 1) {
    throw new CliUsageError(`${JSON.stringify(target)} is not <ability id>.<method>`);
  }
  return { abilityId: target.slice(0, dot), method: target.slice(dot + 1) };
}

function parseInput(text: string | undefined): unknown {
  if (text === undefined) return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new CliUsageError(`the input is not JSON: ${text}`);
  }
}

/** The `sub` of a token given as-is: the caller it was issued to. */
function subjectOf(token: string): string {
  try {
    const payload = token.split('.')[1].replaceAll('-', '+').replaceAll('_', '/');
    const sub = JSON.parse(atob(payload)).sub;
    if (typeof sub === 'string' && sub.length > 0) return sub;
  } catch {
    // Reported below.
  }
  throw new CliUsageError('--token is not a capability token (no readable sub claim)');
}

function chooseTransport(
  ability: AbilityDiscoveryEntry,
  wanted: string | undefined,
  streaming: boolean,
  url: string,
): RpcTransportFactory {
  const offered = ability.rpc.transports as string[];
  if (wanted !== undefined && wanted !== 'http-batch' && wanted !== 'websocket') {
    throw new CliUsageError('--transport must be http-batch or websocket');
  }
  // A stream flows item by item over a socket; a batch would hold it until the end.
  const preferred = wanted ??
    (streaming && offered.includes('websocket') ? 'websocket' : offered[0]);
  if (!offered.includes(preferred)) {
    throw new CliUsageError(`${ability.id} offers ${offered.join(', ')}, not ${preferred}`);
  }
  return preferred === 'websocket'
    ? websocketRpc(url, { createWebSocket: wsWebSocketFactory() })
    : httpBatchRpc(url);
}

function tokenSource(
  parsed: ParsedArguments,
): { requester: TokenRequester & { proveTokenPossession?: ProofSigner }; caller: string } {
  const token = parsed.values.get('token');
  if (token !== undefined) {
    return { requester: () => Promise.resolve(token), caller: subjectOf(token) };
  }
  const caller = parsed.values.get('caller');
  if (caller === undefined) throw new CliUsageError(`usage: ${CALL_USAGE}`);
  return { requester: requesterFrom(parsed), caller };
}

async function printStream(stream: ReadableStream<unknown>, output: CliOutput): Promise<number> {
  const reader = stream.getReader();
  const live = process.stderr.isTTY === true;
  let count = 0;
  for (let next = await reader.read(); !next.done; next = await reader.read()) {
    output.line(JSON.stringify(next.value));
    count++;
    if (live) process.stderr.write(`\r${count} items`);
  }
  if (live) process.stderr.write('\r');
  output.note(`${count} items`);
  return count;
}

/** Runs `call`. */
export async function call(args: readonly string[], output: CliOutput): Promise<number> {
  const parsed = parseArguments(args, {
    values: ['token', 'caller', 'transport', ...CREDENTIAL_OPTIONS],
    repeated: ['scope'],
  });
  const [serviceUrl, target, inputText] = positionals(parsed, 2, 3, CALL_USAGE);
  const { abilityId, method } = splitTarget(target);
  const input = parseInput(inputText);
  const { requester, caller } = tokenSource(parsed);
  const { document, origin } = await fetchServiceDocument(serviceUrl);
  const ability = document.abilities.find((entry) => entry.id === abilityId);
  const entry = ability?.methods[method];
  if (ability === undefined || entry === undefined) {
    throw new CliUsageError(`${document.id} has no method ${target} (see: svcplane discover)`);
  }
  const scopes = parsed.repeated.get('scope') ??
    [...new Set([...ability.scopes, ...entry.scopes])];
  if (scopes.length === 0) {
    throw new CliUsageError(`${target} names no scope: pass --scope with one you are granted`);
  }
  const streaming = entry.stream === true;
  const transport = chooseTransport(
    ability,
    parsed.values.get('transport'),
    streaming,
    new URL(ability.rpc.path, origin).href,
  );
  const session = abilitySession<Record<string, (input: unknown) => Promise<unknown>>>({
    abilityId,
    callerServiceId: caller,
    targetServiceId: document.id,
    scopes,
    requestToken: requester,
    transport,
    // A JWK client's tokens are bound to its key: each session proves it holds the key.
    ...(requester.proveTokenPossession !== undefined
      ? { proveTokenPossession: requester.proveTokenPossession }
      : {}),
  });
  try {
    const result = await session[method](input);
    if (streaming) await printStream(result as ReadableStream<unknown>, output);
    else output.data(result, output.json);
  } finally {
    disposeAbilitySession(session);
  }
  return 0;
}
