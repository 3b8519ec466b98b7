/**
 * A stand-in for a `createService` result that answers over `fetch` only, for tests that hand
 * the plane a made-up discovery document, a failing service or a recording wrapper.
 * `localService` asks for a `discovery` method to tell a service from a control plane; the plane
 * reads the document over `fetch`, so this one is never called and fails if it is.
 *
 * @module
 */

/** What `localService` accepts as its `service`. */
export interface FetchOnlyService {
  fetch(request: Request, env?: unknown, ctx?: unknown): Promise<Response>;
  discovery(): never;
}

/** Wraps `fetch` as a local service whose `discovery()` must never be called. */
export function fetchOnlyService(
  fetch: (request: Request, env?: unknown, ctx?: unknown) => Promise<Response>,
): FetchOnlyService {
  return {
    fetch,
    discovery() {
      throw new Error('the control plane reads the discovery document over fetch');
    },
  };
}
