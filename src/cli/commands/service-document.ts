/**
 * Fetches a service's discovery document and checks it as the plane does, for `discover` and
 * `call`.
 *
 * @module
 */
import { SvcInternalError } from '../../core/errors.ts';
import {
  parseServiceDiscoveryDocument,
  type ServiceDiscoveryDocument,
} from '../../service/discovery.ts';
import { CliUsageError } from '../arguments.ts';

const DISCOVERY_PATH = '/.well-known/svc/service.json';

/** A service's discovery document and the origin its RPC paths are relative to. */
export interface FetchedServiceDocument {
  document: ServiceDiscoveryDocument;
  origin: string;
}

/** The discovery URL for a service URL (its base, or the document's own URL). */
function discoveryUrl(serviceUrl: string): URL {
  let url: URL;
  try {
    url = new URL(serviceUrl);
  } catch {
    throw new CliUsageError(`${JSON.stringify(serviceUrl)} is not an absolute http(s) URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new CliUsageError(`${serviceUrl} is not an http(s) URL`);
  }
  if (!url.pathname.endsWith('.json')) {
    url.pathname = `${url.pathname.replace(/\/+$/, '')}${DISCOVERY_PATH}`;
  }
  return url;
}

/** Fetches and checks the discovery document of the service at `serviceUrl`. */
export async function fetchServiceDocument(serviceUrl: string): Promise<FetchedServiceDocument> {
  const url = discoveryUrl(serviceUrl);
  let response: Response;
  try {
    response = await fetch(url, { headers: { accept: 'application/json' } });
  } catch (error) {
    throw new SvcInternalError(`${url.href} could not be reached: ${(error as Error).message}`, {
      reason: 'service_unreachable',
      status: 503,
    });
  }
  if (!response.ok) {
    await response.body?.cancel();
    throw new SvcInternalError(`${url.href} answered HTTP ${response.status}`, {
      reason: 'discovery_unavailable',
      status: response.status >= 500 ? 502 : 404,
    });
  }
  const value = await response.json().catch(() => undefined) as { id?: unknown } | undefined;
  const id = typeof value?.id === 'string' ? value.id : '';
  return { document: parseServiceDiscoveryDocument(value, id), origin: url.origin };
}
