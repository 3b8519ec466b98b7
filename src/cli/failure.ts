/**
 * How a failed command ends: the taxonomy code and reason on stderr, and an exit code by class,
 * so a script can tell a refusal from an outage without reading text.
 *
 * Exit codes: 0 success; 1 internal failure (unreachable service or plane, unexpected answer,
 * a bug); 2 usage (the command line is wrong); 3 configuration (a key, URL or option refused);
 * 4 capability_auth (a token refused or not granted, including `token inspect`'s verdict);
 * 5 ability_validation; 6 timeout; 7 handler (the service's handler failed).
 *
 * @module
 */
import { SvcConfigurationError, svcErrorInfo, type ValidationIssue } from '../core/errors.ts';
import { isAbilityValidationError } from '../core/validation-issues.ts';
import { CliUsageError } from './arguments.ts';
import type { CliOutput } from './output.ts';

/** Exit codes by failure class (see the module documentation). */
export const EXIT_CODES = Object.freeze({
  ok: 0,
  internal: 1,
  usage: 2,
  configuration: 3,
  capability_auth: 4,
  ability_validation: 5,
  timeout: 6,
  handler: 7,
});

/** The exit code for `error`. */
export function exitCodeOf(error: unknown): number {
  if (error instanceof CliUsageError) return EXIT_CODES.usage;
  if (error instanceof SvcConfigurationError) return EXIT_CODES.configuration;
  return EXIT_CODES[svcErrorInfo(error).code];
}

/** Writes the failure to stderr (JSON with `--json`) and returns its exit code. */
export function reportFailure(error: unknown, output: CliOutput): number {
  const code = exitCodeOf(error);
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof CliUsageError) {
    output.note(output.json ? JSON.stringify({ error: { code: 'usage', message } }) : message);
    return code;
  }
  const info = svcErrorInfo(error);
  const kind = error instanceof SvcConfigurationError ? 'configuration' : info.code;
  const issues = isAbilityValidationError(error) ? error.issues : undefined;
  if (output.json) {
    output.note(JSON.stringify({ error: { ...info, kind, message, ...(issues && { issues }) } }));
  } else {
    const reason = info.reason !== undefined ? ` ${info.reason}` : '';
    const retry = info.retryable ? ', retryable' : '';
    output.note(`error: ${kind}${reason} (status ${info.status}${retry}): ${printable(message)}`);
    for (const issue of issues ?? []) output.note(`  ${printable(issueLine(issue))}`);
  }
  return code;
}

// C0 and C1 controls, DEL included: a peer's text must not drive the terminal (escapes, erasure).
// deno-lint-ignore no-control-regex
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f-\u009f]/g;

/** `text` with its control characters shown as `\u001b`-style escapes. */
function printable(text: string): string {
  return text.replace(
    CONTROL_CHARACTERS,
    (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** `at items.0.name: Required`, or the message alone for an issue without a path. */
function issueLine(issue: ValidationIssue): string {
  if (issue.path === undefined || issue.path.length === 0) return issue.message;
  return `at ${issue.path.join('.')}: ${issue.message}`;
}
