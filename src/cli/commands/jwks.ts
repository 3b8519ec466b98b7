/**
 * `svcplane jwks [<file> | -]`: the public JWKS a plane with these signing keys publishes, from
 * a `signingKeys` list (or one entry) in a JSON file or on stdin, or from `SVC_SIGNING_KID` and
 * `SVC_SIGNING_KEY` when no file is named. Keys are checked as the plane checks them.
 *
 * @module
 */
import { readFileSync } from 'node:fs';
import process from 'node:process';
import { loadSigningAuthority, type SigningKeyEntry } from '../../plane/signing-keys.ts';
import { CliUsageError, parseArguments, positionals } from '../arguments.ts';
import type { CliOutput } from '../output.ts';
import { SIGNING_KEY_ENV, SIGNING_KID_ENV } from './keygen.ts';

export const JWKS_USAGE = 'svcplane jwks [<signing-keys.json> | -] [--json]';

function entriesFromText(text: string, source: string): SigningKeyEntry[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new CliUsageError(`${source} is not JSON: expected a signingKeys list or one entry`);
  }
  return (Array.isArray(parsed) ? parsed : [parsed]) as SigningKeyEntry[];
}

function entriesFromEnv(): SigningKeyEntry[] {
  const kid = process.env[SIGNING_KID_ENV];
  const secret = process.env[SIGNING_KEY_ENV];
  if (kid === undefined || secret === undefined) {
    throw new CliUsageError(
      `usage: ${JWKS_USAGE}\n(without a file, ${SIGNING_KID_ENV} and ${SIGNING_KEY_ENV} are read)`,
    );
  }
  return [{ kid, secret }];
}

/** Runs `jwks`. */
export async function jwks(args: readonly string[], output: CliOutput): Promise<number> {
  const parsed = parseArguments(args, {});
  const [file] = positionals(parsed, 0, 1, JWKS_USAGE);
  const entries = file === undefined
    ? entriesFromEnv()
    : entriesFromText(readFileSync(file === '-' ? 0 : file, 'utf8'), file === '-' ? 'stdin' : file);
  const authority = await loadSigningAuthority(entries);
  output.data(authority.jwks, output.json);
  return 0;
}
