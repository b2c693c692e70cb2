import { Counter, Histogram, Registry } from 'prom-client';
import type { StoreError } from '../core/errors.js';
import type { RedisCallObserver, RedisScriptName } from '../stores/redis/call-observer.js';
import { boundedLabelValue, DEFAULT_MAX_SERIES_PER_METRIC, SeriesCap } from './series-cap.js';

/** Options of {@link RedisMetrics}. */
export interface RedisMetricsOptions {
  /** @default a new `Registry` of its own */
  readonly registry?: Registry;
  /** Most series per metric family (see `SeriesCap`). @default 2000 */
  readonly maxSeriesPerMetric?: number;
  /** Upper bounds of the call-time histogram, in seconds. @default 0.0001 … 1 */
  readonly durationBuckets?: readonly number[];
}

const DEFAULT_BUCKETS: readonly number[] = Object.freeze([
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
]);

const DURATION = 'sluice_redis_call_duration_seconds';
const ERRORS = 'sluice_redis_errors_total';

/**
 * A RedisStore's calls per shard, for `RedisStoreOptions.observer`:
 *
 * - `sluice_redis_call_duration_seconds{shard, script}`: time of each script call on the
 *   wire (`applyBatches`, `refundBatch`), answered or failed: the script's execution time
 *   as the client sees it (Redis runs one script at a time, so it includes the queue on
 *   the node);
 * - `sluice_redis_errors_total{shard, reason}`: failed calls by reason (timeout,
 *   connection, oom, wrongtype, readonly, overloaded, …), sent or not.
 *
 * `shard` is the node's `host:port`: as many as the Cluster has primaries, and capped
 * by the series cap like every family.
 */
export class RedisMetrics implements RedisCallObserver {
  readonly registry: Registry;
  readonly #cap: SeriesCap;
  readonly #duration: Histogram<'shard' | 'script'>;
  readonly #errors: Counter<'shard' | 'reason'>;
  readonly #bucketSeries: number;

  constructor(options: RedisMetricsOptions = {}) {
    const registry = (this.registry = options.registry ?? new Registry());
    this.#cap = new SeriesCap(
      options.maxSeriesPerMetric ?? DEFAULT_MAX_SERIES_PER_METRIC,
      registry,
    );
    const buckets = [...(options.durationBuckets ?? DEFAULT_BUCKETS)];
    this.#bucketSeries = buckets.length + 3;
    this.#duration = new Histogram({
      name: DURATION,
      help: 'Time of each Redis script call on the wire (applyBatches, refundBatch), by shard (host:port).',
      labelNames: ['shard', 'script'] as const,
      buckets,
      registers: [registry],
    });
    this.#errors = new Counter({
      name: ERRORS,
      help: 'Failed Redis calls by shard (host:port) and reason (timeout, connection, oom, wrongtype, readonly, overloaded, …).',
      labelNames: ['shard', 'reason'] as const,
      registers: [registry],
    });
  }

  scriptCall(script: RedisScriptName, shard: string, durationMs: number, error?: StoreError): void {
    const s = boundedLabelValue(shard);
    if (this.#cap.admit(DURATION, `${s}\u0000${script}`, this.#bucketSeries)) {
      this.#duration.observe({ shard: s, script }, durationMs / 1000);
    }
    if (error !== undefined) this.#error(s, error);
  }

  notSent(shard: string, error: StoreError): void {
    this.#error(boundedLabelValue(shard), error);
  }

  #error(shard: string, error: StoreError): void {
    if (!this.#cap.admit(ERRORS, `${shard}\u0000${error.reason}`)) return;
    this.#errors.inc({ shard, reason: error.reason });
  }
}
