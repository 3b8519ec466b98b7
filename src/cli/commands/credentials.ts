/**
 * How a command gets a capability token: as given (`--token`), or from the plane through one of
 * the shipped requesters — HMAC (`--client-id`, `--client-secret` or `SVC_CLIENT_SECRET`) or
 * JWK (`--client-id`, `--jwk <private JWK file>`, `--key-id`).
 *
 * @module
 */
import { readFileSync } from 'node:fs';
import process from 'node:process';
import type { ProofSigner, TokenRequester } from '../../caller/ability-session.ts';
import {
  controlPlaneHmacTokenRequester,
  controlPlaneJwkTokenRequester,
} from '../../caller/token-requesters.ts';
import { CliUsageError, type ParsedArguments } from '../arguments.ts';

/** The environment variable an HMAC client secret may come from (kept out of shell history). */
export const CLIENT_SECRET_ENV = 'SVC_CLIENT_SECRET';

/** The options the requesters take. */
export const CREDENTIAL_OPTIONS = [
  'plane',
  'client-id',
  'client-secret',
  'jwk',
  'key-id',
  'issuer',
] as const;

/** Usage text of the credential options. */
export const CREDENTIAL_USAGE = '--plane <url> --client-id <id> ' +
  '(--client-secret <secret> | $SVC_CLIENT_SECRET | --jwk <private-jwk.json> --key-id <kid> ' +
  '[--issuer <plane issuer>])';

function required(parsed: ParsedArguments, name: string): string {
  const value = parsed.values.get(name);
  if (value === undefined) throw new CliUsageError(`--${name} is required: ${CREDENTIAL_USAGE}`);
  return value;
}

function readJwk(file: string): JsonWebKey {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as JsonWebKey;
  } catch (error) {
    throw new CliUsageError(`--jwk ${file}: ${(error as Error).message}`);
  }
}

/**
 * The requester the options describe: JWK when `--jwk` is given, else HMAC. Its proof signer
 * (JWK: tokens are bound to the key) comes with it.
 */
export function requesterFrom(
  parsed: ParsedArguments,
): TokenRequester & { proveTokenPossession?: ProofSigner } {
  const controlPlaneUrl = required(parsed, 'plane');
  const clientId = required(parsed, 'client-id');
  const jwkFile = parsed.values.get('jwk');
  if (jwkFile !== undefined) {
    const issuer = parsed.values.get('issuer');
    return controlPlaneJwkTokenRequester({
      clientId,
      controlPlaneUrl,
      keyId: required(parsed, 'key-id'),
      privateJwk: readJwk(jwkFile),
      // The plane's issuer is the assertions' audience; a plane usually names itself by its URL.
      issuer: issuer ?? controlPlaneUrl.replace(/\/+$/, ''),
    });
  }
  const clientSecret = parsed.values.get('client-secret') ?? process.env[CLIENT_SECRET_ENV];
  if (clientSecret === undefined) {
    throw new CliUsageError(`an HMAC client needs --client-secret or ${CLIENT_SECRET_ENV}`);
  }
  return controlPlaneHmacTokenRequester({ clientId, controlPlaneUrl, clientSecret });
}
