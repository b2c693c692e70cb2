import { z } from 'zod';
import { algorithmOf } from '../algorithms/index.js';
import type { Policy, SettleSettings } from '../core/policy.js';

/**
 * A policy's `settle` block: how far a settle that learns of a larger actual cost than
 * was reserved may take the bucket below empty (docs/costs.md). `maxDebt` is in whole
 * units; 0 means a settle never charges beyond empty.
 */
export const settleSchema = z
  .object({
    /** Units a settle may charge beyond empty. @default the policy's capacity (burst, limit or queue size) */
    maxDebt: z
      .number()
      .int('must be a whole number')
      .min(0)
      .max(Number.MAX_SAFE_INTEGER)
      .optional(),
  })
  .strict();

/** The validated block, or `undefined` (the policy's defaults then apply). */
export function settleSettings(
  input: z.output<typeof settleSchema> | undefined,
): SettleSettings | undefined {
  if (input === undefined) return undefined;
  return input.maxDebt === undefined ? {} : { maxDebt: input.maxDebt };
}

/**
 * The most units a settle may leave a policy's bucket below empty: its `settle.maxDebt`,
 * else its capacity (`Algorithm.capacity`: burst, limit or queue size).
 */
export function maxDebtOf(policy: Policy): number {
  return policy.settle?.maxDebt ?? algorithmOf(policy.algorithm).capacity(policy.params);
}
