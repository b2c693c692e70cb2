import { systemClock } from '../core/clock.js';
import { Limiter } from '../limiter/limiter.js';
import type { LimiterOptions } from '../limiter/limiter-options.js';
import { localStages } from './stages.js';

/**
 * Creates a {@link Limiter} with the local stages (over-limit cache), then `moreStages`,
 * unless `stages` are given. It lives above `limiter/` so that the limiter takes its stages and knows none
 * of them. Throws a `PolicyError` when plain policy inputs are invalid.
 */
export function createLimiter(options: LimiterOptions): Limiter {
  if (options.stages !== undefined) return new Limiter(options);
  const stages = [
    ...localStages({
      clock: options.clock ?? systemClock,
      overLimitCacheBytes: options.overLimitCacheBytes ?? 0,
      ...(options.stageMetrics === undefined ? {} : { metrics: options.stageMetrics }),
    }),
    ...(options.moreStages ?? []),
  ];
  return new Limiter({ ...options, stages });
}
