import type { Clock } from '../core/clock.js';
import type { Stage } from '../limiter/stage.js';
import type { StageRecorder } from '../metrics/stage-metrics.js';
import { LocalStage } from './local-stage.js';
import { OverLimitCache } from './over-limit-cache.js';
import { TokenBatchStage } from './token-batch.js';

/** Options of {@link localStages}. */
export interface LocalStagesOptions {
  readonly clock?: Clock;
  /**
   * Bytes of the over-limit cache (upstream's `LOCAL_CACHE_SIZE_IN_BYTES`); 0 leaves the
   * cache out. @default 0
   */
  readonly overLimitCacheBytes?: number;
  /** Most local buckets held (LocalStage `maxKeys`). @default 100_000 */
  readonly maxLocalKeys?: number;
  /** Most keys with a batch reserve (TokenBatchStage `maxKeys`). @default 10_000 */
  readonly maxBatchKeys?: number;
  /** Told the token batch's units (TokenBatchStage `metrics`). @default none */
  readonly metrics?: StageRecorder;
}

/**
 * The local stages in pipeline order (docs/design.md, "Stages"): the local bucket, the over-limit
 * cache when it has bytes, the token batch. The local and batch stages take part only in
 * checks of policies that ask for them (`local`, `batch`); the cache in every enforced
 * policy's checks.
 */
export function localStages(options: LocalStagesOptions): Stage[] {
  const bytes = options.overLimitCacheBytes ?? 0;
  return [
    new LocalStage(options.maxLocalKeys === undefined ? {} : { maxKeys: options.maxLocalKeys }),
    ...(bytes > 0 ? [new OverLimitCache({ maxBytes: bytes })] : []),
    new TokenBatchStage({
      ...(options.clock === undefined ? {} : { clock: options.clock }),
      ...(options.maxBatchKeys === undefined ? {} : { maxKeys: options.maxBatchKeys }),
      ...(options.metrics === undefined ? {} : { metrics: options.metrics }),
    }),
  ];
}
