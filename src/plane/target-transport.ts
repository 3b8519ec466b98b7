/**
 * Which transport the plane opens to an ability of a resolved target: what the ability offers,
 * filtered by what the endpoint can open. Shared by the in-process session and every front door.
 *
 * @module
 */
import { SvcConfigurationError } from '../core/errors.ts';
import type { AbilityDiscoveryEntry } from '../service/discovery.ts';
import type { RpcTransportFactory } from '../caller/transports/outbound-metadata.ts';
import type { EndpointRpcKind, ServiceEndpoint } from './endpoints.ts';

/** The transport a session travels on, and its kind. */
export interface SelectedTransport {
  kind: EndpointRpcKind;
  transport: RpcTransportFactory;
}

function noUsableTransport(
  ability: AbilityDiscoveryEntry,
  endpoint: ServiceEndpoint,
  why: string,
): never {
  throw new SvcConfigurationError(
    `abilitySession: ${ability.id} is served over ${ability.rpc.transports.join(', ')}, and ` +
      `the plane cannot reach it that way through service "${endpoint.id}": ${why}`,
    { reason: 'rpc_transport_unavailable' },
  );
}

/**
 * The transport the plane uses, from what the ability offers and the endpoint can open. An
 * ability with streaming methods goes over the endpoint's native binding (`abilityRpc`) or
 * WebSocket when it can (streams need a session
 * transport, as the broker's plane leg does); otherwise HTTP-batch comes first (nothing stays
 * open between calls). A session keeps its first choice ({@link keptTransport}): the ability
 * session treats batches and a long-lived session differently, so the kind must not change
 * under it. `streams` says what the session is for when the caller knows it (one unary call
 * through a front door prefers HTTP-batch even on an ability that also streams).
 */
export function selectTransport(
  endpoint: ServiceEndpoint,
  ability: AbilityDiscoveryEntry,
  streams: boolean = Object.values(ability.methods).some((method) => method.stream === true),
): SelectedTransport {
  // Endpoints and accepted documents are frozen: the choice for one pair never changes, and a
  // front door makes it for every request.
  if (!Object.isFrozen(endpoint) || !Object.isFrozen(ability)) {
    return chooseTransport(endpoint, ability, streams);
  }
  let byAbility = chosen.get(endpoint);
  if (byAbility === undefined) {
    byAbility = new WeakMap();
    chosen.set(endpoint, byAbility);
  }
  let choices = byAbility.get(ability);
  if (choices === undefined) {
    choices = {};
    byAbility.set(ability, choices);
  }
  const key = streams ? 'session' : 'batch';
  return choices[key] ??= chooseTransport(endpoint, ability, streams);
}

const chosen = new WeakMap<
  ServiceEndpoint,
  WeakMap<AbilityDiscoveryEntry, { session?: SelectedTransport; batch?: SelectedTransport }>
>();

function chooseTransport(
  endpoint: ServiceEndpoint,
  ability: AbilityDiscoveryEntry,
  streams: boolean,
): SelectedTransport {
  const offered = ability.rpc.transports;
  // The native binding is used only where the endpoint was given one (never inferred).
  const preference: EndpointRpcKind[] = streams
    ? ['cloudflare-binding-rpc', 'websocket', 'http-batch']
    : ['http-batch', 'cloudflare-binding-rpc', 'websocket'];
  const candidates = preference.filter((kind) =>
    offered.includes(kind) &&
    (kind !== 'cloudflare-binding-rpc' || endpoint.abilityRpc !== undefined)
  );
  if (candidates.length === 0) {
    return noUsableTransport(
      ability,
      endpoint,
      'the plane opens http-batch, websocket, and cloudflare-binding-rpc through abilityRpc',
    );
  }
  for (const [index, kind] of candidates.entries()) {
    const selected = openableTransport(endpoint, ability, kind, index < candidates.length - 1);
    if (selected !== undefined) return { kind, transport: selected };
  }
  return noUsableTransport(ability, endpoint, 'no offered transport can be opened');
}

/** The transport of the kind a session already uses, to the ability's current route. */
export function keptTransport(
  endpoint: ServiceEndpoint,
  ability: AbilityDiscoveryEntry,
  kind: EndpointRpcKind,
): SelectedTransport {
  if (!ability.rpc.transports.includes(kind)) {
    noUsableTransport(ability, endpoint, `the session travels over ${kind}, no longer offered`);
  }
  return { kind, transport: openableTransport(endpoint, ability, kind, false)! };
}

/**
 * The endpoint's transport of `kind` to the ability's route. A WebSocket the endpoint cannot
 * dial is `undefined` when another kind remains to try, else refused.
 */
function openableTransport(
  endpoint: ServiceEndpoint,
  ability: AbilityDiscoveryEntry,
  kind: EndpointRpcKind,
  alternativeLeft: boolean,
): RpcTransportFactory | undefined {
  try {
    return endpoint.rpcTransport(ability.rpc.path, kind);
  } catch (error) {
    // The endpoint's own refusal says why; this one also says which ability cannot be reached.
    if (error instanceof SvcConfigurationError && error.reason === 'websocket_unavailable') {
      if (alternativeLeft) return undefined;
      noUsableTransport(ability, endpoint, error.message);
    }
    throw error;
  }
}
