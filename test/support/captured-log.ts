/**
 * A real pino logger whose JSON lines are kept in memory, for tests that assert what the
 * service logged (state changes, warnings) and how often.
 */
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';

/** One parsed log line: pino's fields (`level` as a number, `msg`) and the logged object. */
export type LogLine = Readonly<Record<string, unknown>> & { readonly msg?: string };

export interface CapturedLog {
  readonly logger: Logger;
  /** Every line so far, parsed. */
  readonly lines: LogLine[];
  /** The lines whose message starts with `prefix`. */
  matching(prefix: string): LogLine[];
}

/** pino's numeric levels. */
export const LOG_LEVEL = { debug: 20, info: 30, warn: 40, error: 50 } as const;

/** A logger at `level` (default `debug`) writing into {@link CapturedLog.lines}. */
export function captureLog(level = 'debug'): CapturedLog {
  const lines: LogLine[] = [];
  let partial = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      const text = partial + chunk.toString('utf8');
      const parts = text.split('\n');
      partial = parts.pop() ?? '';
      for (const p of parts) if (p !== '') lines.push(JSON.parse(p) as LogLine);
      done();
    },
  });
  const logger = pino({ level }, stream);
  return {
    logger,
    lines,
    matching: (prefix) =>
      lines.filter((l) => typeof l.msg === 'string' && l.msg.startsWith(prefix)),
  };
}
