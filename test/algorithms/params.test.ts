/**
 * The duration field every algorithm's params use: whole ms, at least 1, as a number or
 * a string with a unit. (Each algorithm's own test file checks its other fields.)
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { durationMs } from '../../src/algorithms/params.js';

describe('durationMs', () => {
  it.each([
    [1, 1],
    ['1ms', 1],
    [250, 250],
    ['1.5s', 1_500],
    ['1d', 86_400_000],
  ])('accepts %j as %d ms', (input, ms) => {
    expect(durationMs.parse(input)).toBe(ms);
  });

  it.each([0, 0.5, '0.5ms', '1.5ms', -1000, '5 parsecs', 'fast'])(
    'rejects %j, saying what a duration is',
    (input) => {
      const r = durationMs.safeParse(input);
      expect(r.success).toBe(false);
      expect(r.error!.issues).toEqual([
        expect.objectContaining({
          code: 'custom',
          message: `expected a duration of at least 1ms as whole ms (number) or a string like "500ms", "1s", "1m", "1h", "1d"; got ${JSON.stringify(input)}`,
        }),
      ]);
    },
  );

  it.each([true, null, Infinity, NaN])('rejects %j as not a finite number or a string', (input) => {
    expect(z.prettifyError(durationMs.safeParse(input).error!)).toMatch(/Invalid input/);
  });
});
