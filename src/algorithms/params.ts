import { z } from 'zod';
import { parseDurationMs } from '../core/duration.js';

/** A duration field: ms as a positive integer, or a string such as `"1s"`, `"250ms"`, `"1h"`. */
export const durationMs = z.union([z.number(), z.string()]).transform((input, ctx) => {
  const ms = parseDurationMs(input);
  if (ms === undefined || !Number.isInteger(ms) || ms < 1) {
    ctx.addIssue({
      code: 'custom',
      message: `expected a duration of at least 1ms as whole ms (number) or a string like "500ms", "1s", "1m", "1h", "1d"; got ${JSON.stringify(input)}`,
    });
    return z.NEVER;
  }
  return ms;
});

/** A positive, finite rate (units per period); fractions allowed (0.5 per second). */
export const positiveRate = z.number().positive().finite();

/** A capacity in whole units, at least 1. */
export const capacityUnits = z.number().int().min(1).max(Number.MAX_SAFE_INTEGER);
