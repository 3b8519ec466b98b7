/**
 * HMAC caller authentication (the shared-secret fallback): `Authorization: Svc-HMAC-SHA256
 * <base64url signature>` with `X-Svc-Client-Id`, `X-Svc-Timestamp` and `X-Request-Id`.
 *
 * The signature covers method, path with query, the SHA-256 of the raw body bytes, client id,
 * request id and timestamp, so a captured request cannot be edited, retargeted, widened or moved
 * to another client. Replay is bounded by the timestamp window only (no replay store).
 *
 * @module
 */
import { decodeBase64Url } from '../core/base64url.ts';
import type { HmacSha256Key } from '../core/sha256.ts';
import type { SvcLogOption } from '../core/logging.ts';
import { acceptRequestId, SVC_REQUEST_ID_HEADER } from '../core/request-id.ts';
import {
  encodedRequestBodyHash,
  HMAC_CALLER_AUTH_SCHEME,
  hmacSignedString,
  isWellFormedClientId,
  prepareHmacClientSecret,
  requestPathWithQuery,
  SVC_CLIENT_ID_HEADER,
  SVC_TIMESTAMP_HEADER,
} from '../caller/token-request-signing.ts';
import {
  type AuthenticatedCaller,
  type CallerAuthenticator,
  parseAuthorization,
} from './caller-auth.ts';
import {
  boundedIntegerOption,
  CallerAuthRefusal,
  type ConfigurationRefuser,
  configurationRefuser,
  refusalLoggingAuthenticator,
  refuseUnknownOptions,
  registeredClients,
} from './caller-auth-scheme.ts';

export {
  HMAC_CALLER_AUTH_SCHEME,
  hmacSignedString,
  signHmacTokenRequest,
  type SignHmacTokenRequestInput,
  SVC_CLIENT_ID_HEADER,
  SVC_TIMESTAMP_HEADER,
} from '../caller/token-request-signing.ts';

/** Default accepted distance between the request timestamp and the plane clock. */
export const DEFAULT_HMAC_MAX_SKEW_SECONDS = 60;
/** Largest `maxSkewSeconds` accepted: a wider window is a longer replay window. */
export const MAX_HMAC_MAX_SKEW_SECONDS = 3600;
/** Event emitted for every refused HMAC token request. */
export const HMAC_UNAUTHORIZED_EVENT = 'svc.caller_auth.hmac_unauthorized';

/** One registered HMAC client. */
export interface HmacServiceClient {
  /** The service the client acts for. */
  serviceId: string;
  /** The shared secret (its UTF-8 bytes are the HMAC key). */
  secret: string;
}

/** Options of {@link hmacServiceClientAuth}. */
export interface HmacServiceClientAuthOptions {
  /** Registered clients by client id. */
  clients: Record<string, HmacServiceClient>;
  /** Accepted timestamp skew in seconds, both directions; default 60. */
  maxSkewSeconds?: number;
  /** Sink of `svc.caller_auth.hmac_unauthorized` events. */
  log?: SvcLogOption;
  /** Clock in milliseconds; default `Date.now`. */
  now?: () => number;
}

const CHALLENGE = `${HMAC_CALLER_AUTH_SCHEME} realm="svc-capability-token"`;
const SIGNATURE_BYTES = 32;
const TIMESTAMP_PATTERN = /^[0-9]{1,12}$/;

interface RegisteredClient {
  serviceId: string;
  key: HmacSha256Key;
}

const refuseConfig: ConfigurationRefuser = configurationRefuser('hmacServiceClientAuth');

function hmacClients(clients: unknown): Map<string, RegisteredClient> {
  return registeredClients(clients, ['serviceId', 'secret'], refuseConfig, (clientId, client) => {
    const { secret } = client;
    if (typeof secret !== 'string' || secret.length === 0) {
      refuseConfig(`client ${clientId} needs a non-empty secret`);
    }
    // Prepared now: it is synchronous and cheap, and verification then never waits for a key.
    return { key: prepareHmacClientSecret(secret, `hmacServiceClientAuth: client ${clientId}`) };
  });
}

/** One refusal: the error for the caller and the event fields for the log. */
class HmacRefusal extends CallerAuthRefusal {
  constructor(reason: string, message: string, clientId?: string) {
    super(reason, message, CHALLENGE, clientId);
  }
}

function clientIdFrom(request: Request, clients: Map<string, RegisteredClient>): string {
  const clientId = request.headers.get(SVC_CLIENT_ID_HEADER);
  if (clientId === null) throw new HmacRefusal('client_id_missing', 'No client id was sent');
  if (!isWellFormedClientId(clientId)) {
    throw new HmacRefusal('client_id_malformed', 'The client id header is malformed');
  }
  if (!clients.has(clientId)) throw new HmacRefusal('unknown_client', 'Unknown client');
  return clientId;
}

function timestampFrom(request: Request, nowSeconds: number, maxSkew: number, clientId: string) {
  const timestamp = request.headers.get(SVC_TIMESTAMP_HEADER);
  if (timestamp === null) {
    throw new HmacRefusal('timestamp_missing', 'No timestamp was sent', clientId);
  }
  if (!TIMESTAMP_PATTERN.test(timestamp)) {
    throw new HmacRefusal('timestamp_malformed', 'The timestamp is not Unix seconds', clientId);
  }
  if (Math.abs(Number(timestamp) - nowSeconds) > maxSkew) {
    throw new HmacRefusal(
      'timestamp_out_of_window',
      'The timestamp is outside the accepted window',
      clientId,
    );
  }
  return timestamp;
}

function requestIdFrom(request: Request, clientId: string): string {
  const raw = request.headers.get(SVC_REQUEST_ID_HEADER);
  if (raw === null) throw new HmacRefusal('request_id_missing', 'No request id was sent', clientId);
  const requestId = acceptRequestId(raw);
  if (requestId === undefined) {
    throw new HmacRefusal('request_id_malformed', 'The request id is malformed', clientId);
  }
  return requestId;
}

function signatureFrom(value: string): Uint8Array {
  const signature = decodeBase64Url(value);
  if (signature === undefined || signature.length !== SIGNATURE_BYTES) {
    throw new HmacRefusal('signature_malformed', 'The signature is not a base64url HMAC-SHA256');
  }
  return signature;
}

/**
 * Caller authentication with a shared secret per client. Every refusal is a 401 with the
 * `Svc-HMAC-SHA256` challenge and emits `svc.caller_auth.hmac_unauthorized` (level `warn`,
 * `requestId`, `reason`, and `clientId` once it names a registered client). Neither the secret
 * nor the received signature is ever logged. Signatures are compared in constant time.
 */
export function hmacServiceClientAuth(options: HmacServiceClientAuthOptions): CallerAuthenticator {
  if (options === null || typeof options !== 'object') refuseConfig('options object required');
  refuseUnknownOptions(options, ['clients', 'maxSkewSeconds', 'log', 'now'], refuseConfig);
  const clients = hmacClients(options.clients);
  const maxSkew = boundedIntegerOption(
    options.maxSkewSeconds,
    DEFAULT_HMAC_MAX_SKEW_SECONDS,
    MAX_HMAC_MAX_SKEW_SECONDS,
    'maxSkewSeconds',
    refuseConfig,
  );
  const now = options.now ?? Date.now;

  function verify(request: Request, body: Uint8Array): AuthenticatedCaller {
    const { value } = parseAuthorization(request.headers.get('Authorization'), CHALLENGE);
    const signature = signatureFrom(value);
    const clientId = clientIdFrom(request, clients);
    const client = clients.get(clientId)!;
    const timestamp = timestampFrom(request, Math.floor(now() / 1000), maxSkew, clientId);
    const requestId = requestIdFrom(request, clientId);
    const signed = hmacSignedString({
      method: request.method.toUpperCase(),
      pathWithQuery: requestPathWithQuery(request.url),
      bodyHash: encodedRequestBodyHash(body),
      clientId,
      requestId,
      timestamp,
    });
    if (!client.key.verify(signed, signature)) {
      throw new HmacRefusal('signature_mismatch', 'The signature does not match', clientId);
    }
    return { clientId, serviceId: client.serviceId };
  }

  return refusalLoggingAuthenticator({
    scheme: HMAC_CALLER_AUTH_SCHEME,
    challenge: CHALLENGE,
    event: HMAC_UNAUTHORIZED_EVENT,
    log: options.log,
    logLabel: 'hmacServiceClientAuth: `log`',
    verify,
  });
}
