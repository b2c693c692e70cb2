import { InvalidArgumentError } from 'commander';
import { formatIssue, PolicyError, SluiceError } from '../core/errors.js';

/**
 * How every `sluice` command prints an error, so that one problem reads the same from
 * `serve`, `check` and `validate`: `sluice: <file>: <path>: <problem> [<code>]`, or, for
 * several issues, a count line with the code and one indented `file: path: problem` line
 * each. Ends with a newline.
 */
export function errorText(error: unknown): string {
  const code = error instanceof SluiceError ? ` [${error.code}]` : '';
  if (error instanceof PolicyError && error.issues.length > 1) {
    const lines = error.issues.map((i) => `  ${formatIssue(i)}`);
    return `sluice: ${error.issues.length} problems${code}:\n${lines.join('\n')}\n`;
  }
  const message =
    error instanceof PolicyError && error.issues[0] !== undefined
      ? formatIssue(error.issues[0])
      : error instanceof Error
        ? error.message
        : String(error);
  return `sluice: ${message}${code}\n`;
}

/**
 * Exit status for an error: 1 for invalid configuration or input (a `PolicyError`
 * family, or arguments that do not go together), 2 for anything else.
 */
export function exitCodeOf(error: unknown): number {
  if (error instanceof InvalidArgumentError) return 1;
  return error instanceof SluiceError && error.family === 'policy' ? 1 : 2;
}
