/**
 * Fetching and accepting one target's discovery document: the request (through the endpoint),
 * a bounded body read, and the registry acceptance rule. The catalog adds timeouts, caching and
 * collapsing on top.
 *
 * Each failure is a {@link DiscoveryFailure}: the typed refusal a caller sees (which names the
 * target and nothing else) plus a detail for the log only, because network errors and parser
 * messages can reveal internal addresses.
 *
 * @module
 */
import { readBoundedBytes } from '../core/bounded-body.ts';
import { CapabilityAuthError, SvcInternalError } from '../core/errors.ts';
import { describeErrorForLog } from '../core/logging.ts';
import {
  parseServiceDiscoveryDocument,
  type ServiceDiscoveryDocument,
} from '../service/discovery.ts';
import type { ServiceEndpoint } from './endpoints.ts';

/** The largest discovery document body read; a larger one is rejected. */
export const MAX_DISCOVERY_DOCUMENT_BYTES = 4 * 1024 * 1024;

/**
 * 403 `unknown_target`: no accepted service by that id. A target that answered with a document
 * the registry does not accept (another id, not JSON, too large, malformed) gets this refusal
 * too: its discovery failed, so the registry knows no service by that id (Caller authentication
 * r7). Only a target that cannot be reached gets a 500.
 */
export function unknownTarget(targetServiceId: string): CapabilityAuthError {
  return new CapabilityAuthError(`Unknown target service "${targetServiceId}"`, {
    status: 403,
    reason: 'unknown_target',
  });
}

/** 500 `target_unreachable`: the request failed, timed out or did not answer 200. */
export function targetUnreachable(targetServiceId: string): SvcInternalError {
  return new SvcInternalError(`Target service "${targetServiceId}" is unreachable`, {
    reason: 'target_unreachable',
  });
}

/** A failed resolution: `refusal` is what the caller sees, `detail` goes to the log only. */
export class DiscoveryFailure extends Error {
  constructor(readonly refusal: Error, readonly detail: string) {
    super(detail);
  }
}

async function readDocumentText(response: Response, targetServiceId: string): Promise<string> {
  const bytes = await readBoundedBytes(response, MAX_DISCOVERY_DOCUMENT_BYTES);
  if (bytes === undefined) {
    throw new DiscoveryFailure(
      unknownTarget(targetServiceId),
      `document larger than ${MAX_DISCOVERY_DOCUMENT_BYTES} bytes`,
    );
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new DiscoveryFailure(unknownTarget(targetServiceId), 'document is not UTF-8');
  }
}

/**
 * The registry acceptance rule: the endpoint configuration is the identity authority, so a
 * document claiming another id (or a catalog naming another service) is not that service.
 */
function checkClaimedIdentity(value: unknown, targetServiceId: string): void {
  if (value === null || typeof value !== 'object') return;
  const record = value as Record<string, unknown>;
  if (typeof record.id === 'string' && record.id !== targetServiceId) {
    throw new DiscoveryFailure(
      unknownTarget(targetServiceId),
      `document id ${JSON.stringify(record.id.slice(0, 128))} differs from the endpoint id`,
    );
  }
  const capabilities = record.capabilities as Record<string, unknown> | null | undefined;
  if (capabilities !== null && typeof capabilities === 'object') {
    const serviceId = capabilities.serviceId;
    if (typeof serviceId === 'string' && serviceId !== targetServiceId) {
      throw new DiscoveryFailure(
        unknownTarget(targetServiceId),
        `capabilities.serviceId ${
          JSON.stringify(serviceId.slice(0, 128))
        } differs from the endpoint id`,
      );
    }
  }
}

/**
 * Documents this module accepted (and froze). A registry cache that hands one back by reference
 * (the process-local cache does) is returning exactly what passed the acceptance rule, so only
 * the id needs comparing; anything else is checked in full.
 */
const acceptedDocuments = new WeakSet<object>();

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key]);
  }
  return value;
}

/** Accepts a received (or cached) document for a target, or throws a {@link DiscoveryFailure}. */
export function acceptDocument(value: unknown, targetServiceId: string): ServiceDiscoveryDocument {
  checkClaimedIdentity(value, targetServiceId);
  let document: ServiceDiscoveryDocument;
  try {
    document = deepFreeze(parseServiceDiscoveryDocument(value, targetServiceId));
  } catch (error) {
    const { message } = describeErrorForLog(error);
    throw new DiscoveryFailure(unknownTarget(targetServiceId), `document refused: ${message}`);
  }
  acceptedDocuments.add(document);
  return document;
}

/** A document this module already accepted for `targetServiceId`, or `undefined`. */
export function alreadyAccepted(
  value: unknown,
  targetServiceId: string,
): ServiceDiscoveryDocument | undefined {
  if (value === null || typeof value !== 'object' || !acceptedDocuments.has(value)) {
    return undefined;
  }
  const document = value as ServiceDiscoveryDocument;
  return document.id === targetServiceId ? document : undefined;
}

/**
 * GETs and accepts one target's discovery document, honouring `signal`. Throws a
 * {@link DiscoveryFailure} on any failure.
 */
export async function fetchDocument(
  endpoint: ServiceEndpoint,
  signal: AbortSignal,
  requestId: string | undefined,
): Promise<ServiceDiscoveryDocument> {
  let response: Response;
  try {
    response = await endpoint.fetchDiscovery({
      signal,
      ...(requestId !== undefined ? { requestId } : {}),
    });
  } catch (error) {
    const { name, message } = describeErrorForLog(error);
    throw new DiscoveryFailure(
      targetUnreachable(endpoint.id),
      `request failed: ${name}: ${message}`,
    );
  }
  if (!(response instanceof Response)) {
    throw new DiscoveryFailure(
      targetUnreachable(endpoint.id),
      'fetchDiscovery returned no Response',
    );
  }
  if (response.status !== 200) {
    await response.body?.cancel().catch(() => {});
    throw new DiscoveryFailure(targetUnreachable(endpoint.id), `answered HTTP ${response.status}`);
  }
  let text: string;
  try {
    text = await readDocumentText(response, endpoint.id);
  } catch (error) {
    if (error instanceof DiscoveryFailure) throw error;
    const { message } = describeErrorForLog(error);
    throw new DiscoveryFailure(targetUnreachable(endpoint.id), `body read failed: ${message}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new DiscoveryFailure(unknownTarget(endpoint.id), 'document is not valid JSON');
  }
  return acceptDocument(value, endpoint.id);
}
