/**
 * `svcplane token request --caller <id> --target <id> --ability <id> --scope <s>... [--ttl <s>]
 * <credentials>`: asks the plane for a capability token through the shipped requesters and
 * prints it (only the token on stdout, so it can be captured; its claims on stderr).
 *
 * @module
 */
import { CliUsageError, parseArguments, positionals } from '../arguments.ts';
import type { CliOutput } from '../output.ts';
import { CREDENTIAL_OPTIONS, CREDENTIAL_USAGE, requesterFrom } from './credentials.ts';

export const TOKEN_REQUEST_USAGE = 'svcplane token request --caller <service id> ' +
  `--target <service id> --ability <ability id> --scope <scope>... [--ttl <seconds>] ` +
  CREDENTIAL_USAGE +
  ' [--json]';

function claimsOf(token: string): Record<string, unknown> {
  const payload = token.split('.')[1] ?? '';
  const text = atob(payload.replaceAll('-', '+').replaceAll('_', '/'));
  return JSON.parse(text);
}

/** Runs `token request`. */
export async function tokenRequest(args: readonly string[], output: CliOutput): Promise<number> {
  const parsed = parseArguments(args, {
    values: ['caller', 'target', 'ability', 'ttl', ...CREDENTIAL_OPTIONS],
    repeated: ['scope'],
  });
  positionals(parsed, 0, 0, TOKEN_REQUEST_USAGE);
  const callerServiceId = parsed.values.get('caller');
  const targetServiceId = parsed.values.get('target');
  const scopes = parsed.repeated.get('scope') ?? [];
  const abilityId = parsed.values.get('ability');
  if (
    callerServiceId === undefined || targetServiceId === undefined || abilityId === undefined ||
    scopes.length === 0
  ) {
    throw new CliUsageError(`usage: ${TOKEN_REQUEST_USAGE}`);
  }
  const ttl = parsed.values.get('ttl');
  if (ttl !== undefined && !/^[1-9][0-9]{0,8}$/.test(ttl)) {
    throw new CliUsageError('--ttl must be a positive number of seconds');
  }
  const token = await requesterFrom(parsed)({
    callerServiceId,
    targetServiceId,
    scopes,
    abilityId,
    ...(ttl !== undefined ? { ttlSeconds: Number(ttl) } : {}),
  });
  const claims = claimsOf(token);
  if (output.json) {
    const exp = typeof claims.exp === 'number' ? new Date(claims.exp * 1000).toISOString() : null;
    output.data({ token, claims, expiresAt: exp });
  } else {
    output.line(token);
    output.note(`claims: ${JSON.stringify(claims)}`);
  }
  return 0;
}
