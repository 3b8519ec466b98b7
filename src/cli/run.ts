/**
 * The `svcplane` command: dispatches to a subcommand and turns any failure into its taxonomy
 * code, reason and exit code (see `failure.ts`).
 *
 * @module
 */
import { CliUsageError } from './arguments.ts';
import { call, CALL_USAGE } from './commands/call.ts';
import { catalog, CATALOG_USAGE } from './commands/catalog.ts';
import { discover, DISCOVER_USAGE } from './commands/discover.ts';
import { jwks, JWKS_USAGE } from './commands/jwks.ts';
import { keygen, KEYGEN_USAGE } from './commands/keygen.ts';
import { TOKEN_INSPECT_USAGE, tokenInspect } from './commands/token-inspect.ts';
import { TOKEN_REQUEST_USAGE, tokenRequest } from './commands/token-request.ts';
import { reportFailure } from './failure.ts';
import { type CliOutput, processOutput } from './output.ts';

type Command = (args: readonly string[], output: CliOutput) => Promise<number>;

const COMMANDS: Record<string, { run: Command; usage: string }> = {
  keygen: { run: keygen, usage: KEYGEN_USAGE },
  jwks: { run: jwks, usage: JWKS_USAGE },
  'token inspect': { run: tokenInspect, usage: TOKEN_INSPECT_USAGE },
  'token request': { run: tokenRequest, usage: TOKEN_REQUEST_USAGE },
  discover: { run: discover, usage: DISCOVER_USAGE },
  call: { run: call, usage: CALL_USAGE },
  catalog: { run: catalog, usage: CATALOG_USAGE },
};

/** The help text: every command's usage and the exit codes. */
export function helpText(): string {
  return [
    'svcplane: capability tokens, services and control planes from the command line',
    '',
    ...Object.values(COMMANDS).map((command) => `  ${command.usage}`),
    '',
    'Human output by default; --json prints one JSON document for scripts.',
    'Errors print their taxonomy code and reason. Exit codes: 0 ok, 1 internal (unreachable,',
    'unexpected answer), 2 usage, 3 configuration, 4 capability_auth (refused or not granted;',
    'token inspect: refused), 5 ability_validation, 6 timeout, 7 handler.',
  ].join('\n');
}

/** The command named by the leading arguments, and the arguments left. */
function resolve(args: readonly string[]): { name: string; rest: readonly string[] } | undefined {
  const two = args.slice(0, 2).join(' ');
  if (COMMANDS[two] !== undefined) return { name: two, rest: args.slice(2) };
  if (COMMANDS[args[0]] !== undefined) return { name: args[0], rest: args.slice(1) };
  return undefined;
}

/** Runs the command line `args` (without the program name) and returns the exit code. */
export async function runCli(args: readonly string[]): Promise<number> {
  const output = processOutput(args.includes('--json'));
  if (args.length === 0 || args[0] === '--help' || args[0] === 'help' || args[0] === '-h') {
    output.line(helpText());
    return args.length === 0 ? 2 : 0;
  }
  const command = resolve(args);
  try {
    if (command === undefined) {
      throw new CliUsageError(`unknown command ${JSON.stringify(args.join(' '))}\n\n${helpText()}`);
    }
    if (command.rest.includes('--help')) {
      output.line(`usage: ${COMMANDS[command.name].usage}`);
      return 0;
    }
    return await COMMANDS[command.name].run(command.rest, output);
  } catch (error) {
    return reportFailure(error, output);
  }
}
