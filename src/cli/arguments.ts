/**
 * Command-line arguments: positionals, `--name value`, `--name=value` and boolean flags, checked
 * against what the command accepts so a misspelt option is refused instead of ignored.
 *
 * @module
 */

/** A usage mistake: the command line itself is wrong (exit code 2). */
export class CliUsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CliUsageError';
  }
}

/** What a command accepts besides positionals. */
export interface OptionSpec {
  /** Options taking a value (`--kid k1`, `--kid=k1`). */
  values?: readonly string[];
  /** Options that may repeat, each taking a value (`--scope a --scope b`). */
  repeated?: readonly string[];
  /** Flags without a value (`--pem`). */
  flags?: readonly string[];
}

/** Parsed arguments of one command. */
export interface ParsedArguments {
  positionals: string[];
  values: Map<string, string>;
  repeated: Map<string, string[]>;
  flags: Set<string>;
}

/** Every command takes `--json` (machine output) and `--help`. */
const COMMON_FLAGS = ['json', 'help'];

/** Parses `args` for a command accepting `spec`; throws {@link CliUsageError} on a mistake. */
export function parseArguments(args: readonly string[], spec: OptionSpec): ParsedArguments {
  const parsed: ParsedArguments = {
    positionals: [],
    values: new Map(),
    repeated: new Map(),
    flags: new Set(),
  };
  const flags = new Set([...COMMON_FLAGS, ...(spec.flags ?? [])]);
  const values = new Set(spec.values ?? []);
  const repeated = new Set(spec.repeated ?? []);
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (!arg.startsWith('--') || arg === '--') {
      parsed.positionals.push(arg);
      continue;
    }
    const equals = arg.indexOf('=');
    const name = arg.slice(2, equals === -1 ? undefined : equals);
    if (flags.has(name)) {
      if (equals !== -1) throw new CliUsageError(`--${name} takes no value`);
      parsed.flags.add(name);
      continue;
    }
    if (!values.has(name) && !repeated.has(name)) {
      throw new CliUsageError(`unknown option --${name}`);
    }
    const value = equals === -1 ? args[++i] : arg.slice(equals + 1);
    if (value === undefined || (equals === -1 && value.startsWith('--'))) {
      throw new CliUsageError(`--${name} needs a value`);
    }
    if (repeated.has(name)) {
      parsed.repeated.set(name, [...(parsed.repeated.get(name) ?? []), value]);
    } else parsed.values.set(name, value);
  }
  return parsed;
}

/** The positionals, refused unless there are between `least` and `most` of them. */
export function positionals(
  parsed: ParsedArguments,
  least: number,
  most: number,
  usage: string,
): string[] {
  const given = parsed.positionals;
  if (given.length < least || given.length > most) throw new CliUsageError(`usage: ${usage}`);
  return given;
}
