/**
 * The REST facade's route table: one route per published, non-streaming method with `rest`
 * metadata, built from the catalog (the same for every caller), and the matcher that finds the
 * routes of a request path.
 *
 * Matching works on the raw path, one `/`-separated segment at a time: a segment is
 * percent-decoded once and is data, so an encoded `/` or `..` inside a variable never reaches
 * another route; an empty segment never matches a variable (`/items/`, `/items//`). A literal
 * segment is preferred to a variable for the same method (`GET /items/search` before
 * `GET /items/{id}`).
 *
 * Which routes exist is `publishedRestRoutes`' decision, shared with the OpenAPI document: a
 * route at one of the plane's own paths, or one that another service also declares under the
 * same method and shape, is refused when the table is built (logged as `svc.rest.route_refused`).
 *
 * @module
 */
import type { SvcEventLog } from '../../core/logging.ts';
import type { InvocationTarget } from '../invocation.ts';
import { queryFallbackFields, type QueryFallbackKind } from './query-fallback.ts';
import type {
  PublishedRestRoute,
  PublishedRestRoutes,
  RefusedRestRoute,
} from './published-routes.ts';

/** Logged once per refused route each time the table is built. */
export const REST_ROUTE_REFUSED_EVENT = 'svc.rest.route_refused';

/** One route of the facade. */
export interface RestRoute {
  /** The HTTP method, upper case (`QUERY` for `rest.method: 'query'`). */
  httpMethod: string;
  /** The template as published (`/items/{id}`). */
  path: string;
  /** The published method this route invokes. */
  target: InvocationTarget;
  /** The success status (`rest.status`, default 200). */
  status: number;
  /** The ability's scopes plus the method's (reported in `svcInvocation`). */
  scopes: readonly string[];
  /** Whether a request body is read as input (never for GET and DELETE). */
  readsBody: boolean;
  /** Top-level string and string-array input fields a query parameter may fill. */
  queryFallbacks: ReadonlyMap<string, QueryFallbackKind>;
  /** The route as the catalog publishes it. */
  published: PublishedRestRoute;
}

/** A route matched for a request path, with its path variables decoded. */
export interface RestMatch {
  route: RestRoute;
  params: Record<string, string>;
}

interface TrieNode {
  literals: Map<string, TrieNode>;
  variable?: { name: string; node: TrieNode };
  routes: Map<string, RestRoute>;
}

const newNode = (): TrieNode => ({ literals: new Map(), routes: new Map() });

/** Identifies a refused route across rebuilds, so each is reported once while it lasts. */
export function refusalKey(refused: RefusedRestRoute): string {
  return `${refused.serviceId} ${refused.method} ${refused.path} ${refused.reason}`;
}

/** The route table, built by {@link buildRestRoutes}. */
export interface RestRouteTable {
  /** Every mounted route. */
  readonly routes: readonly RestRoute[];
  /**
   * The routes serving `pathname` (raw, percent-encoded), one per HTTP method, with their
   * variables; an empty map when no route serves the path under any method.
   */
  match(pathname: string): Map<string, RestMatch>;
}

/** The facade's view of one published route. */
function routeOf(published: PublishedRestRoute): RestRoute {
  const { method, ability, methodName, service, rest } = published;
  return {
    httpMethod: rest.method.toUpperCase(),
    path: rest.path,
    target: { serviceId: service.id, abilityId: ability.id, method: methodName },
    status: rest.status,
    scopes: [...new Set([...ability.scopes, ...method.scopes])].sort(),
    readsBody: rest.method !== 'get' && rest.method !== 'delete',
    queryFallbacks: queryFallbackFields(method.inputSchema),
    published,
  };
}

function insert(root: TrieNode, route: RestRoute): void {
  let node = root;
  if (route.path !== '/') {
    for (const segment of route.path.slice(1).split('/')) {
      if (segment.startsWith('{')) {
        node.variable ??= { name: segment.slice(1, -1), node: newNode() };
        // Variable names may differ between methods of one shape: each route reads its own.
        node = node.variable.node;
      } else {
        let next = node.literals.get(segment);
        if (next === undefined) {
          next = newNode();
          node.literals.set(segment, next);
        }
        node = next;
      }
    }
  }
  node.routes.set(route.httpMethod, route);
}

/** Decodes one segment once; `undefined` when it is not valid percent-encoding. */
function decodeSegment(segment: string): string | undefined {
  if (!segment.includes('%')) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/** Path variables of `route` from the decoded segments of the matched path. */
function paramsOf(route: RestRoute, segments: readonly string[]): Record<string, string> {
  const params: Record<string, string> = {};
  if (route.path === '/') return params;
  route.path.slice(1).split('/').forEach((segment, index) => {
    if (segment.startsWith('{')) params[segment.slice(1, -1)] = segments[index];
  });
  return params;
}

/**
 * Builds the route table from the routes the catalog publishes; each refused route not in
 * `alreadyReported` (keys of {@link refusalKey}) is logged as {@link REST_ROUTE_REFUSED_EVENT}.
 */
export function buildRestRoutes(
  published: PublishedRestRoutes,
  log: SvcEventLog,
  context?: unknown,
  alreadyReported: ReadonlySet<string> = new Set(),
): RestRouteTable {
  for (const refused of published.refused) {
    if (alreadyReported.has(refusalKey(refused))) continue;
    log({
      event: REST_ROUTE_REFUSED_EVENT,
      level: 'error',
      reason: refused.reason,
      route: `${refused.method.toUpperCase()} ${refused.path}`,
      service: refused.serviceId,
      ability: refused.abilityId,
      method: refused.methodName,
    }, context);
  }
  const root = newNode();
  const routes = published.routes.map(routeOf);
  for (const route of routes) insert(root, route);
  const match = (pathname: string): Map<string, RestMatch> => {
    const found = new Map<string, RestMatch>();
    if (!pathname.startsWith('/')) return found;
    const raw = pathname === '/' ? [] : pathname.slice(1).split('/');
    const segments: string[] = [];
    for (const segment of raw) {
      const decoded = decodeSegment(segment);
      if (decoded === undefined) return found;
      segments.push(decoded);
    }
    // Literal branches first: the first route found for a method is the most specific one.
    const visit = (node: TrieNode, index: number): void => {
      if (index === segments.length) {
        for (const [method, route] of node.routes) {
          if (!found.has(method)) found.set(method, { route, params: paramsOf(route, segments) });
        }
        return;
      }
      const segment = segments[index];
      const literal = node.literals.get(segment);
      if (literal !== undefined) visit(literal, index + 1);
      if (node.variable !== undefined && segment.length > 0) {
        visit(node.variable.node, index + 1);
      }
    };
    visit(root, 0);
    return found;
  };
  // The matches of each literal route path, found once: a request for one is answered from
  // here (the result is only read, and its variables, if another route's, are frozen).
  const literalPaths = new Map<string, Map<string, RestMatch>>();
  for (const route of routes) {
    if (route.path.includes('{') || literalPaths.has(route.path)) continue;
    const found = match(route.path);
    for (const entry of found.values()) Object.freeze(entry.params);
    literalPaths.set(route.path, found);
  }
  return {
    routes,
    match: (pathname) => literalPaths.get(pathname) ?? match(pathname),
  };
}
