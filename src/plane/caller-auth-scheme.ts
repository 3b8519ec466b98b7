/**
 * What the built-in caller authenticators (HMAC and JWK) share around their own verification:
 * refusing bad configuration, the registry of clients by id, the refusal that remembers which
 * registered client it concerns, and the `warn` event every refusal emits.
 *
 * @module
 */
import { firstUnknownKey, unknownKeyProblem } from '../core/unknown-keys.ts';
import { SvcConfigurationError } from '../core/errors.ts';
import { createEventLog, type SvcLogOption } from '../core/logging.ts';
import { isWellFormedClientId } from '../caller/token-request-signing.ts';
import {
  type AuthenticatedCaller,
  type CallerAuthContext,
  type CallerAuthenticator,
  CallerAuthError,
} from './caller-auth.ts';

/** Throws a configuration error whose message starts with the authenticator's name. */
export type ConfigurationRefuser = (message: string) => never;

/** A refuser for the authenticator named `label` (e.g. `hmacServiceClientAuth`). */
export function configurationRefuser(label: string): ConfigurationRefuser {
  return (message) => {
    throw new SvcConfigurationError(`${label}: ${message}`, { reason: 'invalid_caller_auth' });
  };
}

/** A value made on first use; `value` holds it once it arrived. */
export interface Once<T> {
  (): Promise<T>;
  value?: T;
}

/**
 * Runs `make` on first use and keeps its promise: one key import for the life of the plane. The
 * value is also kept as such, so a request arriving after the import reads it without waiting.
 */
export function once<T>(make: () => Promise<T>): Once<T> {
  let pending: Promise<T> | undefined;
  const get: Once<T> = () => (pending ??= make().then((value) => (get.value = value)));
  return get;
}

/**
 * Refuses an option the authenticator does not have. A replay store in particular: none ships
 * and none is accepted (the contract narrows replay with the timestamp and assertion windows),
 * so one passed anyway must not look as if it protected anything.
 */
export function refuseUnknownOptions(
  options: object,
  known: readonly string[],
  refuse: ConfigurationRefuser,
): void {
  const name = firstUnknownKey(options, known);
  if (name === undefined) return;
  refuse(
    `${unknownKeyProblem(name, known)}. No replay store is accepted: ` +
      'narrow the replay window with the timestamp or assertion lifetime option instead',
  );
}

/** An optional integer option in `1..max`; `fallback` when absent. */
export function boundedIntegerOption(
  value: unknown,
  fallback: number,
  max: number,
  name: string,
  refuse: ConfigurationRefuser,
): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
    refuse(`\`${name}\` must be an integer in 1..${max}`);
  }
  return value;
}

/**
 * Checks a `clients` option (an object by client id, each an object with a non-empty
 * `serviceId` and no field beyond `fields`) and returns it as a Map, so a client id such as
 * `constructor` or `__proto__` never reaches a prototype. `register` checks and prepares the
 * scheme's own credentials of one client.
 */
export function registeredClients<Credentials>(
  clients: unknown,
  fields: readonly string[],
  refuse: ConfigurationRefuser,
  register: (clientId: string, client: Record<string, unknown>) => Credentials,
): Map<string, { serviceId: string } & Credentials> {
  const shape = `{ ${fields.join(', ')} }`;
  if (clients === null || typeof clients !== 'object' || Array.isArray(clients)) {
    refuse(`\`clients\` must be an object of ${shape} by client id`);
  }
  const registered = new Map<string, { serviceId: string } & Credentials>();
  for (const [clientId, client] of Object.entries(clients as Record<string, unknown>)) {
    if (!isWellFormedClientId(clientId)) {
      refuse(`client id ${JSON.stringify(clientId)} is not 1..200 visible ASCII characters`);
    }
    if (client === null || typeof client !== 'object' || Array.isArray(client)) {
      refuse(`client ${clientId} must be ${shape}`);
    }
    const record = client as Record<string, unknown>;
    const unknown = firstUnknownKey(record, fields);
    if (unknown !== undefined) {
      refuse(`client ${clientId}: ${unknownKeyProblem(unknown, fields, 'field')}`);
    }
    const serviceId = record.serviceId;
    if (typeof serviceId !== 'string' || serviceId.length === 0) {
      refuse(`client ${clientId} needs a non-empty serviceId`);
    }
    registered.set(clientId, { serviceId, ...register(clientId, record) });
  }
  return registered;
}

/** One refusal: the error for the caller plus, once known, the registered client for the log. */
export class CallerAuthRefusal extends CallerAuthError {
  constructor(
    reason: string,
    message: string,
    challenge: string,
    readonly clientId?: string,
  ) {
    super(message, { reason, challenge });
  }
}

/** The parts of a built-in authenticator that differ from one scheme to another. */
export interface RefusalLoggingAuthenticatorInput {
  /** The `Authorization` scheme. */
  scheme: string;
  /** The `WWW-Authenticate` challenge of its refusals. */
  challenge: string;
  /** The event every refusal emits. */
  event: string;
  /** The `log` option and the label that names it in a configuration error. */
  log: SvcLogOption;
  logLabel: string;
  /** The scheme's verification: returns the caller or throws a refusal. */
  verify(
    request: Request,
    body: Uint8Array,
    context: CallerAuthContext,
  ): AuthenticatedCaller | Promise<AuthenticatedCaller>;
}

/**
 * A caller authenticator around `verify` whose every refusal emits `event` at level `warn` with
 * `requestId`, `reason` and, for a {@link CallerAuthRefusal} naming one, `clientId`. Anything
 * `verify` throws that is not a refusal is the plane's own failure: logged with reason
 * `verification_failed`, then surfaced as is.
 */
export function refusalLoggingAuthenticator(
  input: RefusalLoggingAuthenticatorInput,
): CallerAuthenticator {
  const log = createEventLog(input.log, input.logLabel);

  function emit(reason: string, context: CallerAuthContext, clientId?: string): void {
    log({
      event: input.event,
      level: 'warn',
      ...(context.requestId !== undefined ? { requestId: context.requestId } : {}),
      reason,
      ...(clientId !== undefined ? { clientId } : {}),
    }, context.requestContext);
  }

  return {
    scheme: input.scheme,
    challenge: input.challenge,
    async authenticate(request, body, context) {
      try {
        return await input.verify(request, body, context);
      } catch (error) {
        const refusal = error instanceof CallerAuthRefusal ? error : undefined;
        const reason = error instanceof CallerAuthError ? error.reason! : 'verification_failed';
        emit(reason, context, refusal?.clientId);
        throw error;
      }
    },
    reportRefusal(reason, context) {
      emit(reason, context);
    },
  };
}
