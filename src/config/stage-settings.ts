import { algorithmOf } from '../algorithms/index.js';
import { z } from 'zod';
import { capacityUnits, durationMs } from '../algorithms/params.js';
import { tokenBucket } from '../algorithms/token-bucket.js';
import type { ErrorCode } from '../core/error-codes.js';
import type { AlgorithmKind } from '../algorithms/index.js';
import type { BatchSettings, LocalSettings } from '../core/policy.js';

/**
 * A policy's `local` block: the token bucket's own fields (`rate`, `period` default "1s",
 * `burst` default ceil(rate)), since the local stage runs a token bucket.
 */
export const localSchema: z.ZodType<LocalSettings> = tokenBucket.paramsSchema;

/** Default `batch.ttl`, in ms. */
export const DEFAULT_BATCH_TTL_MS = 1_000;

/** A policy's `batch` block: `size` units per reservation at most, spent within `ttl`. */
export const batchSchema = z
  .object({
    size: capacityUnits,
    ttl: durationMs.default(DEFAULT_BATCH_TTL_MS),
  })
  .strict()
  .transform((b): BatchSettings => ({ size: b.size, ttlMs: b.ttl }));

/** The issue code of a field's problems: the block it sits in. */
export function stageFieldCode(field: PropertyKey | undefined): ErrorCode | undefined {
  if (field === 'local') return 'SLUICE_ERR_LOCAL_INVALID';
  if (field === 'batch') return 'SLUICE_ERR_BATCH_INVALID';
  return undefined;
}

/** What the cross-checks need to know of the policy around the blocks. */
export interface StageSettingsBasis {
  readonly algorithm: AlgorithmKind;
  readonly params: Readonly<Record<string, unknown>>;
  /** The policy's capacity (`Algorithm.capacity`). */
  readonly capacity: number;
  /** The largest cost the policy asks (default and rules). */
  readonly maxCost: number;
  readonly shadow: boolean;
}

/** A problem found by {@link stageSettingsProblems}. */
export interface StageSettingsProblem {
  /** Path below the policy, e.g. `['local', 'burst']`. */
  readonly path: readonly string[];
  readonly message: string;
  readonly code: ErrorCode;
}

/**
 * The checks that relate `local` and `batch` to the rest of the policy; every problem is
 * returned. A local burst below the policy's largest cost would deny that cost on every
 * instance, always; a batch larger than the capacity could never be reserved; a shadow
 * policy never blocks, so units reserved for it would be held for nothing; a leaky bucket
 * that delays (mode "delay") hands out waits that a reserve cannot give.
 */
export function stageSettingsProblems(
  basis: StageSettingsBasis,
  local: LocalSettings | undefined,
  batch: BatchSettings | undefined,
): StageSettingsProblem[] {
  const out: StageSettingsProblem[] = [];
  if (local !== undefined && local.burst < basis.maxCost) {
    out.push({
      path: ['local', 'burst'],
      message: `local burst ${local.burst} is below the policy's cost ${basis.maxCost}: every instance would deny that cost, always`,
      code: 'SLUICE_ERR_LOCAL_INVALID',
    });
  }
  if (batch !== undefined) {
    if (batch.size > basis.capacity) {
      out.push({
        path: ['batch', 'size'],
        message: `batch size ${batch.size} exceeds the policy's capacity ${basis.capacity}: it could never be reserved`,
        code: 'SLUICE_ERR_BATCH_INVALID',
      });
    }
    if (basis.shadow) {
      out.push({
        path: ['batch'],
        message:
          'does not apply to a shadow policy (it never blocks, so reserved units would be held for nothing)',
        code: 'SLUICE_ERR_BATCH_INVALID',
      });
    }
    if (algorithmOf(basis.algorithm).answersWithDelay?.(basis.params) === true) {
      out.push({
        path: ['batch'],
        message:
          'does not apply to a leaky bucket in mode "delay" (a reserve cannot hand out its waits)',
        code: 'SLUICE_ERR_BATCH_INVALID',
      });
    }
  }
  return out;
}
