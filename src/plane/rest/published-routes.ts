/**
 * The REST routes the catalog publishes: one per non-streaming method with `rest` metadata of a
 * `published` ability, taken from the accepted discovery documents. The same list for every
 * caller, in a fixed order, so the facade's routes and the OpenAPI document describe one thing.
 *
 * A route is left out (and reported) when its path is one of the plane's own routes, or when two
 * services declare the same route (`restRouteKey`: the same method and the same path up to
 * variable names): neither may answer in the other's place, so both are left out.
 *
 * @module
 */
import type {
  AbilityDiscoveryEntry,
  MethodDiscoveryEntry,
  ServiceDiscoveryDocument,
} from '../../service/discovery.ts';
import {
  parseRestPath,
  REST_METHODS,
  type RestMethod,
  restRouteKey,
} from '../../service/rest-path.ts';

/** One published REST route. */
export interface PublishedRestRoute {
  /** The discovery document of the service serving it. */
  service: ServiceDiscoveryDocument;
  /** The ability the method belongs to. */
  ability: AbilityDiscoveryEntry;
  /** The method's name within the ability. */
  methodName: string;
  /** The method's discovery entry. */
  method: MethodDiscoveryEntry;
  /** The REST projection. */
  rest: { method: RestMethod; path: string; status: number };
  /** The path's `{name}` variables, in order. */
  variables: string[];
}

/** Why a declared route is not served. */
export type RefusedRestRouteReason = 'plane_route' | 'duplicate_route';

/** A declared route left out of the facade and the document. */
export interface RefusedRestRoute {
  serviceId: string;
  abilityId: string;
  methodName: string;
  method: RestMethod;
  path: string;
  reason: RefusedRestRouteReason;
}

/** The routes to serve, and those left out. */
export interface PublishedRestRoutes {
  routes: PublishedRestRoute[];
  refused: RefusedRestRoute[];
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Routes by path, then by HTTP method in `REST_METHODS` order. */
function compareRoutes(a: PublishedRestRoute, b: PublishedRestRoute): number {
  return compareText(a.rest.path, b.rest.path) ||
    REST_METHODS.indexOf(a.rest.method) - REST_METHODS.indexOf(b.rest.method);
}

function declaredRoutes(documents: readonly ServiceDiscoveryDocument[]): PublishedRestRoute[] {
  const routes: PublishedRestRoute[] = [];
  for (const service of documents) {
    for (const ability of service.abilities) {
      if (ability.exposure !== 'published') continue;
      for (const [methodName, method] of Object.entries(ability.methods)) {
        if (method.rest === undefined || method.stream === true) continue;
        const template = parseRestPath(method.rest.path);
        // Accepted documents were parsed already; a path that fails here is never served.
        if (typeof template === 'string') continue;
        routes.push({
          service,
          ability,
          methodName,
          method,
          rest: method.rest,
          variables: template.variables,
        });
      }
    }
  }
  return routes;
}

function refusal(route: PublishedRestRoute, reason: RefusedRestRouteReason): RefusedRestRoute {
  return {
    serviceId: route.service.id,
    abilityId: route.ability.id,
    methodName: route.methodName,
    method: route.rest.method,
    path: route.rest.path,
    reason,
  };
}

/**
 * The published REST routes of the accepted discovery documents (their order does not matter),
 * sorted by path and method. `planePaths` are the plane's own routes (JWKS, token endpoint,
 * `/openapi.json`, ...): a REST path equal to one of them is refused, as is every route two
 * services both declare.
 */
export function publishedRestRoutes(
  documents: readonly ServiceDiscoveryDocument[],
  planePaths: readonly string[],
): PublishedRestRoutes {
  const declared = declaredRoutes(documents);
  const owners = new Map<string, Set<string>>();
  for (const route of declared) {
    const key = restRouteKey(route.rest.method, route.rest.path);
    const services = owners.get(key) ?? new Set<string>();
    services.add(route.service.id);
    owners.set(key, services);
  }
  const reserved = new Set(planePaths);
  const routes: PublishedRestRoute[] = [];
  const refused: RefusedRestRoute[] = [];
  for (const route of declared) {
    if (reserved.has(route.rest.path)) refused.push(refusal(route, 'plane_route'));
    else if (owners.get(restRouteKey(route.rest.method, route.rest.path))!.size > 1) {
      refused.push(refusal(route, 'duplicate_route'));
    } else routes.push(route);
  }
  refused.sort((a, b) =>
    compareText(a.path, b.path) || compareText(a.method, b.method) ||
    compareText(a.serviceId, b.serviceId)
  );
  return { routes: routes.sort(compareRoutes), refused };
}
