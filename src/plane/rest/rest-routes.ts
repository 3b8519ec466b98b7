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
 * A route that would shadow one of the plane's own routes, or that another service also
 * declares under the same method and shape, is refused when the table is built (logged as
 * `svc.rest.route_refused`): neither service is served at an ambiguous route.
 *
 * @module
 */
import type { SvcEventLog } from '../../core/logging.ts';
import { parseRestPath, restRouteKey, topLevelInputProperties } from '../../service/rest-path.ts';
import type { InvocationTarget, PublishedMethod } from '../invocation.ts';

/** Logged once per refused route each time the table is built. */
export const REST_ROUTE_REFUSED_EVENT = 'svc.rest.route_refused';

/** How a query parameter may fill a top-level input field (REST r2). */
export type QueryFallback = 'string' | 'string-array';

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
  queryFallbacks: ReadonlyMap<string, QueryFallback>;
  /** The method as the catalog describes it. */
  published: PublishedMethod;
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

function fallbackOf(schema: unknown): QueryFallback | undefined {
  if (schema === null || typeof schema !== 'object') return undefined;
  const record = schema as Record<string, unknown>;
  if (record.type === 'string') return 'string';
  if (record.type !== 'array') return undefined;
  const items = record.items as Record<string, unknown> | undefined;
  return items !== null && typeof items === 'object' && items.type === 'string'
    ? 'string-array'
    : undefined;
}

/** The top-level string and string-array fields of an input schema (REST r2). */
export function queryFallbackFields(
  inputSchema: Record<string, unknown>,
): Map<string, QueryFallback> {
  const fields = new Map<string, QueryFallback>();
  for (const [name, schema] of Object.entries(topLevelInputProperties(inputSchema))) {
    const fallback = fallbackOf(schema);
    if (fallback !== undefined) fields.set(name, fallback);
  }
  return fields;
}

/** The REST route of one published method, or `undefined` when it projects none. */
function routeOf(published: PublishedMethod): RestRoute | undefined {
  const { method, ability, methodName, serviceId } = published;
  if (method.rest === undefined || method.stream === true) return undefined;
  return {
    httpMethod: method.rest.method.toUpperCase(),
    path: method.rest.path,
    target: { serviceId, abilityId: ability.id, method: methodName },
    status: method.rest.status,
    scopes: [...new Set([...ability.scopes, ...method.scopes])].sort(),
    readsBody: method.rest.method !== 'get' && method.rest.method !== 'delete',
    queryFallbacks: queryFallbackFields(method.inputSchema as Record<string, unknown>),
    published,
  };
}

/** Whether a template would match a fixed path (a variable matches any non-empty segment). */
function templateMatchesPath(template: string, path: string): boolean {
  const wanted = template.split('/');
  const actual = path.split('/');
  if (wanted.length !== actual.length) return false;
  return wanted.every((segment, index) =>
    /^\{[^/{}]+\}$/.test(segment) ? actual[index].length > 0 : segment === actual[index]
  );
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
 * Builds the route table from the catalog's published methods. `reservedPaths` are the plane's
 * own routes; a route that would match one of them is refused, as is a route two published
 * methods declare under the same HTTP method and shape.
 */
export function buildRestRoutes(
  published: readonly PublishedMethod[],
  reservedPaths: readonly string[],
  log: SvcEventLog,
  context?: unknown,
): RestRouteTable {
  const byKey = new Map<string, RestRoute[]>();
  for (const entry of published) {
    const route = routeOf(entry);
    // Accepted discovery documents carry checked templates; anything else is not a route.
    if (route === undefined || typeof parseRestPath(route.path) === 'string') continue;
    const key = restRouteKey(route.httpMethod.toLowerCase(), route.path);
    byKey.set(key, [...(byKey.get(key) ?? []), route]);
  }
  const refuse = (route: RestRoute, reason: string, detail: string) =>
    log({
      event: REST_ROUTE_REFUSED_EVENT,
      level: 'error',
      reason,
      route: `${route.httpMethod} ${route.path}`,
      service: route.target.serviceId,
      ability: route.target.abilityId,
      method: route.target.method,
      detail,
    }, context);
  const root = newNode();
  const routes: RestRoute[] = [];
  for (const candidates of byKey.values()) {
    if (candidates.length > 1) {
      for (const route of candidates) {
        refuse(
          route,
          'rest_route_conflict',
          `declared by ${candidates.map((other) => other.target.abilityId).join(', ')}`,
        );
      }
      continue;
    }
    const route = candidates[0];
    const shadowed = reservedPaths.find((path) => templateMatchesPath(route.path, path));
    if (shadowed !== undefined) {
      refuse(route, 'rest_route_shadows_plane_route', `would shadow the plane route ${shadowed}`);
      continue;
    }
    insert(root, route);
    routes.push(route);
  }
  return {
    routes,
    match(pathname) {
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
    },
  };
}
