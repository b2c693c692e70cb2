const UNIT_MS: Readonly<Record<string, number>> = {
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

const DURATION = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)$/;

/**
 * Parses a duration: a number of milliseconds, or a string such as `"500ms"`, `"1s"`,
 * `"1.5m"`, `"1h"`, `"1d"`. Returns `undefined` when the input is not a duration, so
 * callers can report the problem with its location.
 */
export function parseDurationMs(input: unknown): number | undefined {
  if (typeof input === 'number') return Number.isFinite(input) ? input : undefined;
  if (typeof input !== 'string') return undefined;
  const m = DURATION.exec(input.trim());
  if (!m) return undefined;
  return Number(m[1]) * UNIT_MS[m[2]!]!;
}
