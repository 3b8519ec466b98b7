/**
 * How the command writes: human text by default, JSON with `--json`, tables for lists.
 *
 * @module
 */
import process from 'node:process';

/** Where a command writes and in which form. */
export interface CliOutput {
  /** `--json` was given: one JSON document on stdout, for scripts. */
  readonly json: boolean;
  /** Writes a line to stdout. */
  line(text?: string): void;
  /** Writes a line to stderr (notes, progress, errors). */
  note(text: string): void;
  /** Writes `value` as JSON on stdout (indented unless `compact`). */
  data(value: unknown, compact?: boolean): void;
}

/** The process's own output. */
export function processOutput(json: boolean): CliOutput {
  return {
    json,
    line: (text = '') => void process.stdout.write(`${text}\n`),
    note: (text) => void process.stderr.write(`${text}\n`),
    data: (value, compact = false) =>
      void process.stdout.write(`${JSON.stringify(value, null, compact ? undefined : 2)}\n`),
  };
}

/** Rows as aligned columns under a header; an empty cell prints as `-`. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const cells = [header, ...rows.map((row) => row.map((cell) => (cell === '' ? '-' : cell)))];
  const widths = header.map((_, column) =>
    Math.max(...cells.map((row) => (row[column] ?? '').length))
  );
  return cells.map((row) =>
    row.map((cell, column) => cell.padEnd(widths[column])).join('  ').trimEnd()
  );
}
