/**
 * Forwarded connection info: the remote end of the client connection the plane terminated,
 * in the shape of Hono's `ConnInfo`. It is advisory and unsigned, never gates access and is
 * never placed in a token, so the sanitiser keeps only four bounded fields and drops the rest.
 *
 * @module
 */
import { isPlainObject } from './config-values.ts';

/** Header that carries connection info over HTTP-batch and service-binding transports. */
export const SVC_CONN_INFO_HEADER = 'X-Svc-Conn-Info';

/** Query parameter that carries connection info on a WebSocket upgrade URL. */
export const SVC_CONN_INFO_QUERY_PARAM = 'conn_info';

/** Longest serialised connection info that is parsed. */
export const MAX_CONN_INFO_JSON_LENGTH = 1024;

/** The remote end of a client connection (Hono's `ConnInfo['remote']`). */
export interface ConnInfoRemote {
  /** IPv4 or IPv6 address (zone ids allowed, no brackets). */
  address?: string;
  /** Address family; kept only together with an address. */
  addressType?: 'IPv4' | 'IPv6';
  /** Remote port, 0 to 65535. */
  port?: number;
  /** Transport protocol. */
  transport?: 'tcp' | 'udp';
}

/** Connection info as handlers receive it (Hono's `ConnInfo` shape). */
export interface ConnInfo {
  /** The remote end of the client connection. */
  remote: ConnInfoRemote;
}

// Digits, letters, `.` and `:` cover IPv4 and IPv6 text forms; `%`, `_` and `-` cover zone ids.
const ADDRESS = /^[0-9A-Za-z.:%_-]{1,64}$/;

/** Reads an own data property only: no getters run, nothing comes from a prototype. */
function ownValue(record: Record<string, unknown>, key: string): unknown {
  const descriptor = Object.getOwnPropertyDescriptor(record, key);
  return descriptor !== undefined && 'value' in descriptor ? descriptor.value : undefined;
}

function sanitizeAddress(value: unknown): string | undefined {
  return typeof value === 'string' && ADDRESS.test(value) ? value : undefined;
}

function sanitizeAddressType(value: unknown): 'IPv4' | 'IPv6' | undefined {
  return value === 'IPv4' || value === 'IPv6' ? value : undefined;
}

function sanitizePort(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= 65535
    ? value
    : undefined;
}

function sanitizeTransport(value: unknown): 'tcp' | 'udp' | undefined {
  return value === 'tcp' || value === 'udp' ? value : undefined;
}

function sanitizeRemote(record: Record<string, unknown>): ConnInfoRemote | undefined {
  const remote: ConnInfoRemote = {};
  const address = sanitizeAddress(ownValue(record, 'address'));
  if (address !== undefined) {
    remote.address = address;
    // A family without the address it describes says nothing, and an address that failed the
    // charset check takes its claimed family with it.
    const addressType = sanitizeAddressType(ownValue(record, 'addressType'));
    if (addressType !== undefined) remote.addressType = addressType;
  }
  const port = sanitizePort(ownValue(record, 'port'));
  if (port !== undefined) remote.port = port;
  const transport = sanitizeTransport(ownValue(record, 'transport'));
  if (transport !== undefined) remote.transport = transport;
  return Object.keys(remote).length > 0 ? remote : undefined;
}

/**
 * Keeps only the four known remote fields of received connection info, each checked on its
 * own: `address` (1 to 64 of `[0-9A-Za-z.:%_-]`, else dropped with its `addressType`),
 * `addressType` (`IPv4`/`IPv6`), `port` (integer number 0 to 65535) and `transport`
 * (`tcp`/`udp`). Accepts `{ remote: {...} }` or the flat remote fields. Returns `undefined` when
 * the input is not a plain object or nothing survives.
 */
export function sanitizeConnInfo(value: unknown): ConnInfo | undefined {
  if (!isPlainObject(value)) return undefined;
  const nested = Object.hasOwn(value, 'remote') ? ownValue(value, 'remote') : value;
  if (!isPlainObject(nested)) return undefined;
  const remote = sanitizeRemote(nested);
  return remote === undefined ? undefined : { remote };
}

/**
 * Parses connection info from a header or query value (JSON text of at most 1024 characters)
 * and sanitises it. Anything unparseable, oversized or empty after sanitising is `undefined`.
 */
export function parseConnInfo(raw: string | null | undefined): ConnInfo | undefined {
  if (typeof raw !== 'string' || raw.length === 0 || raw.length > MAX_CONN_INFO_JSON_LENGTH) {
    return undefined;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return undefined;
  }
  return sanitizeConnInfo(parsed);
}

/**
 * Serialises connection info for forwarding as flat remote JSON
 * (`{"address":…,"addressType":…,"port":…,"transport":…}`). The value is sanitised first, so
 * only the known fields leave; nothing valid yields `{}`.
 */
export function serializeConnInfo(info: ConnInfo): string {
  const remote = sanitizeConnInfo(info)?.remote ?? {};
  const flat: ConnInfoRemote = {};
  if (remote.address !== undefined) flat.address = remote.address;
  if (remote.addressType !== undefined) flat.addressType = remote.addressType;
  if (remote.port !== undefined) flat.port = remote.port;
  if (remote.transport !== undefined) flat.transport = remote.transport;
  return JSON.stringify(flat);
}
