import { Counter, Histogram, Registry } from 'prom-client';
import type { StoreError } from '../core/errors.js';
import type { RedisCallObserver, RedisScriptName } from '../stores/redis/call-observer.js';
import type { ScriptStats } from '../stores/redis/script-stats.js';
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

/** What {@link RedisMetrics.watchScripts} reads: `RedisStore`. */
export interface ScriptStatsSource {
  scriptStats(): Promise<ScriptStats[]>;
}

/** How long a scrape waits for `INFO commandstats`, in ms; past it the last values stay. */
const STATS_WAIT_MS = 100;
/** Scrapes within this many ms share one poll (the two families read one answer). */
const STATS_REUSE_MS = 1_000;

const DURATION = 'sluice_redis_call_duration_seconds';
const ERRORS = 'sluice_redis_errors_total';

/**
 * A RedisStore's calls per shard, for `RedisStoreOptions.observer`:
 *
 * - `sluice_redis_call_duration_seconds{shard, script}`: time of each script call on the
 *   wire (`applyBatches`, `refundBatch`, `settleBatch`), answered or failed: the script's execution time
 *   as the client sees it (Redis runs one script at a time, so it includes the queue on
 *   the node);
 * - `sluice_redis_errors_total{shard, reason}`: failed calls by reason (timeout,
 *   connection, oom, wrongtype, readonly, overloaded, …), sent or not.
 *
 * - with {@link watchScripts}, read from each node's `INFO commandstats` at scrape time:
 *   `sluice_redis_script_seconds_total{shard, command}` and
 *   `sluice_redis_script_calls_total{shard, command}` (`fcall`, `evalsha`, …), the
 *   node's own script execution time (every client of the node, since it started).
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
  #source: ScriptStatsSource | undefined;
  /** The last answer of `INFO commandstats`, kept when a poll fails. */
  #stats: readonly ScriptStats[] = [];
  #polled: { atMs: number; pending: boolean; wait: Promise<void> } | undefined;

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
      help: 'Time of each Redis script call on the wire (applyBatches, refundBatch, settleBatch), by shard (host:port).',
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
    const cap = this.#cap;
    const poll = (): Promise<readonly ScriptStats[]> => this.#poll();
    const totals = (name: string, help: string, value: (s: ScriptStats) => number): void => {
      new Counter({
        name,
        help,
        labelNames: ['shard', 'command'] as const,
        registers: [registry],
        async collect() {
          const stats = await poll();
          this.reset();
          for (const s of stats) {
            const shard = boundedLabelValue(s.shard);
            if (cap.admit(name, `${shard}\u0000${s.command}`)) {
              this.inc({ shard, command: s.command }, value(s));
            }
          }
        },
      });
    };
    totals(
      'sluice_redis_script_seconds_total',
      "Time each Redis node spent running script commands (fcall, evalsha, ...), from its INFO commandstats at scrape time; all the node's clients.",
      (s) => s.usec / 1e6,
    );
    totals(
      'sluice_redis_script_calls_total',
      "Script commands each Redis node ran, from its INFO commandstats at scrape time; all the node's clients.",
      (s) => s.calls,
    );
  }

  /**
   * Reads the nodes' script totals at each scrape from `source` (a `RedisStore`), into
   * `sluice_redis_script_seconds_total` and `sluice_redis_script_calls_total`. A node
   * that does not answer within 100 ms leaves the last values (one poll at a time).
   */
  watchScripts(source: ScriptStatsSource): void {
    this.#source = source;
  }

  /**
   * The nodes' totals for this scrape (both families' collectors run at once and share
   * one poll). One `INFO commandstats` at a time: while one is out (a frozen node),
   * scrapes answer the last values; a new one is waited for at most
   * {@link STATS_WAIT_MS}, so a scrape never stalls on Redis.
   */
  async #poll(): Promise<readonly ScriptStats[]> {
    const source = this.#source;
    if (source === undefined) return [];
    const now = performance.now();
    const last = this.#polled;
    if (last === undefined || (!last.pending && now - last.atMs > STATS_REUSE_MS)) {
      const polled = { atMs: now, pending: true, wait: Promise.resolve() };
      const done = source
        .scriptStats()
        .then(
          (stats) => {
            this.#stats = stats;
          },
          () => undefined, // not connected: keep the last values
        )
        .finally(() => (polled.pending = false));
      let timer: NodeJS.Timeout | undefined;
      polled.wait = Promise.race([
        done,
        new Promise<void>((resolve) => (timer = setTimeout(resolve, STATS_WAIT_MS))),
      ]).finally(() => clearTimeout(timer));
      this.#polled = polled;
    }
    await this.#polled!.wait;
    return this.#stats;
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
