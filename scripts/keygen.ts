/**
 * `npm run keygen -- [--kid <id>] [--pem]`: prints a fresh control-plane signing key as a ready
 * `signingKeys` entry `{ kid, secret }` (JSON on stdout) and a one-line hint on stderr, so the
 * entry can be piped straight into a secret store.
 *
 * @module
 */
import {
  generateSigningKeyEntry,
  type GenerateSigningKeyOptions,
} from '../src/plane/signing-keys.ts';

const USAGE = 'usage: npm run keygen -- [--kid <id>] [--pem]';

function parseArguments(args: string[]): GenerateSigningKeyOptions {
  const options: GenerateSigningKeyOptions = {};
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === '--pem') options.format = 'pem';
    else if (arg === '--kid') {
      const kid = args[++i];
      if (kid === undefined || kid.startsWith('--')) {
        throw new Error(`--kid needs a value\n${USAGE}`);
      }
      options.kid = kid;
    } else if (arg === '--help' || arg === '-h') {
      console.log(USAGE);
      process.exit(0);
    } else throw new Error(`unknown argument ${JSON.stringify(arg)}\n${USAGE}`);
  }
  return options;
}

try {
  const entry = await generateSigningKeyEntry(parseArguments(process.argv.slice(2)));
  console.log(JSON.stringify(entry, null, 2));
  console.error(
    `# Add this entry LAST in signingKeys (published only), wait one overlap window, then move it first to sign; keep the secret on the control plane only.`,
  );
} catch (error) {
  console.error(error instanceof Error ? error.message : String(error));
  process.exit(1);
}
