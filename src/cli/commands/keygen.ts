/**
 * `svcplane keygen [--kid <id>] [--pem]`: a fresh control-plane signing key, printed as a ready
 * `signingKeys` entry and as the two environment lines the README's plane reads
 * (`SVC_SIGNING_KID`, `SVC_SIGNING_KEY`), so the entry's kid and the key's own kid always agree.
 *
 * @module
 */
import { generateSigningKeyEntry } from '../../plane/signing-keys.ts';
import { parseArguments, positionals } from '../arguments.ts';
import type { CliOutput } from '../output.ts';

/** The environment variable holding the signing key's kid. */
export const SIGNING_KID_ENV = 'SVC_SIGNING_KID';
/** The environment variable holding the signing key's secret (JWK JSON or PKCS#8 PEM). */
export const SIGNING_KEY_ENV = 'SVC_SIGNING_KEY';

export const KEYGEN_USAGE = 'svcplane keygen [--kid <id>] [--pem] [--json]';

/** A value as a shell- and dotenv-safe assignment (single quotes; a PEM in double quotes). */
function envLine(name: string, value: string): string {
  return value.includes("'") || value.includes('\n')
    ? `${name}="${value.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`
    : `${name}='${value}'`;
}

/** Runs `keygen`. */
export async function keygen(args: readonly string[], output: CliOutput): Promise<number> {
  const parsed = parseArguments(args, { values: ['kid'], flags: ['pem'] });
  positionals(parsed, 0, 0, KEYGEN_USAGE);
  const kid = parsed.values.get('kid');
  const entry = await generateSigningKeyEntry({
    ...(kid !== undefined ? { kid } : {}),
    format: parsed.flags.has('pem') ? 'pem' : 'jwk',
  });
  const env = { [SIGNING_KID_ENV]: entry.kid, [SIGNING_KEY_ENV]: entry.secret };
  if (output.json) {
    output.data({ kid: entry.kid, secret: entry.secret, env });
    return 0;
  }
  output.line('# signingKeys entry (the first entry signs; keep the secret on the control plane):');
  output.line(JSON.stringify({ kid: entry.kid, secret: entry.secret }));
  output.line('');
  output.line(
    `# or as environment, read by signingKeys: [{ kid: env.${SIGNING_KID_ENV}, ` +
      `secret: env.${SIGNING_KEY_ENV} }]:`,
  );
  for (const [name, value] of Object.entries(env)) output.line(envLine(name, value));
  output.note(
    'Rotation: add a new key LAST (published only), wait one JWKS cache window, then move it ' +
      'first to sign.',
  );
  return 0;
}
