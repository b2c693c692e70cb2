import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Decision } from '../core/decision.js';
import { LimiterMetrics } from './limiter-metrics.js';
import { RedisMetrics } from './redis-metrics.js';
import { StageMetrics } from './stage-metrics.js';
import {
  DEFAULT_NEAR_LIMIT_RATIO,
  ruleHits,
  RULE_OUTCOMES,
  type RuleOutcome,
  type RuleUsage,
} from './rule-hits.js';
import { boundedLabelValue, DEFAULT_MAX_SERIES_PER_METRIC, SeriesCap } from './series-cap.js';

/** The transport a decision arrived on. */
export type MetricsTransport = 'grpc' | 'http';

/** How a policy configuration load ended. */
export type ConfigLoadResult = 'success' | 'error';

/** Options of {@link ServiceMetrics}. */
export interface ServiceMetricsOptions {
  /**
   * Share of a rule's limit above which hits count as `near_limit`, in (0, 1]; upstream's
   * `NEAR_LIMIT_RATIO`. @default 0.8
   */
  readonly nearLimitRatio?: number;
  /**
   * Upper bounds of `sluice_decision_duration_seconds`, in seconds, ascending.
   * @default [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]
   */
  readonly durationBuckets?: readonly number[];
  /**
   * Most series (label sets) one metric family may hold; updates that would create
   * more are dropped and counted in `sluice_metric_series_dropped_total{metric}`.
   * `sluice_rule_hits_total` admits a rule's five outcomes together. @default 2000
   */
  readonly maxSeriesPerMetric?: number;
  /**
   * Whether the store's connection is up now, for `sluice_store_errors_total`'s reason
   * (see `LimiterMetricsOptions.storeConnected`). @default always up
   */
  readonly storeConnected?: () => boolean;
  /** Buckets the hot-key table keeps (`LimiterMetricsOptions.hotKeys`). @default 10 */
  readonly hotKeys?: number;
}

/** The exposition text and the `Content-Type` to serve it with. */
export interface MetricsExposition {
  readonly contentType: string;
  readonly body: string;
}

const DEFAULT_BUCKETS: readonly number[] = Object.freeze([
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
]);

const OUTCOMES: ReadonlySet<string> = new Set(RULE_OUTCOMES);

function checkHits(hits: number): void {
  if (!Number.isFinite(hits) || hits < 0) {
    throw new RangeError(`hits must be a finite number >= 0, got ${hits}`);
  }
}

/** The quota leases a service takes, as its lease gauges show them. */
export type LeaseGaugeSource = () => readonly {
  readonly policy: string;
  readonly inForce: boolean;
  /** The lease's rate, or the static fallback's; `null` under the `store` fallback. */
  readonly ratePerSecond: number | null;
}[];

const RULE_HITS = 'sluice_rule_hits_total';
const DURATION = 'sluice_decision_duration_seconds';

/**
 * Sluice's Prometheus metrics, in a registry of its own (never prom-client's global one,
 * so two instances in one process, e.g. in tests, never collide):
 *
 * - `sluice_rule_hits_total{domain, rule, outcome}`: envoyproxy/ratelimit's per-rule
 *   stats (`total_hits`, `over_limit`, `near_limit`, `within_limit`, `shadow_mode`),
 *   counted in hits (`hits_addend` units) as upstream counts them.
 * - `sluice_config_load_total{result}`: `success` or `error` per configuration load, and
 *   `sluice_config_last_success_timestamp_seconds`.
 * - `sluice_decision_duration_seconds{transport, method}`: time to answer a call.
 * - the limiter's families ({@link limiter}: decisions, check time, errors, store calls,
 *   remaining capacity, active keys, hot keys), the Redis store's ({@link redis}: per
 *   shard call time and errors) and the stages' ({@link stages}: lease and batch units).
 * - `sluice_lease_in_force{policy}` and `sluice_lease_rate_units_per_second{policy}`:
 *   the quota leases a service takes ({@link leasesFrom}).
 * - `sluice_metric_series_dropped_total{metric}`: updates dropped by the series cap.
 *
 * Labels never carry raw request values unless the configuration names them (a rule
 * with `detailed_metric` or `value_to_metric`; see `ruleMetricKey`). Each family holds
 * at most `maxSeriesPerMetric` series, and label values are at most
 * `MAX_LABEL_VALUE_LENGTH` long, so neither memory nor `/metrics` grows with what
 * clients send. Safe to share between transports: every method is synchronous except
 * {@link metrics}.
 */
export class ServiceMetrics {
  /** The registry every metric is in; register more metrics here to expose them too. */
  readonly registry = new Registry();
  readonly #nearLimitRatio: number;
  readonly #ruleHits: Counter<'domain' | 'rule' | 'outcome'>;
  readonly #configLoads: Counter<'result'>;
  readonly #configLoaded: Gauge;
  readonly #duration: Histogram<'transport' | 'method'>;
  readonly #cap: SeriesCap;
  #leases: LeaseGaugeSource | undefined;
  /** The limiter's metrics, in {@link registry}: give it to the limiter (`metrics`). */
  readonly limiter: LimiterMetrics;
  /** The Redis store's per-shard metrics, in {@link registry} (`RedisStoreOptions.observer`). */
  readonly redis: RedisMetrics;
  /** The stages' lease and batch metrics, in {@link registry}. */
  readonly stages: StageMetrics;

  /**
   * Throws `RangeError` for a `nearLimitRatio` outside (0, 1] or a `maxSeriesPerMetric`
   * that is not a positive whole number.
   */
  constructor(options: ServiceMetricsOptions = {}) {
    const ratio = options.nearLimitRatio ?? DEFAULT_NEAR_LIMIT_RATIO;
    if (!(ratio > 0 && ratio <= 1)) {
      throw new RangeError(`nearLimitRatio must be in (0, 1], got ${ratio}`);
    }
    this.#nearLimitRatio = ratio;
    this.#cap = new SeriesCap(
      options.maxSeriesPerMetric ?? DEFAULT_MAX_SERIES_PER_METRIC,
      this.registry,
    );
    const registers = [this.registry];
    const shared = {
      registry: this.registry,
      maxSeriesPerMetric: this.#cap.max,
    };
    this.limiter = new LimiterMetrics({
      ...shared,
      ...(options.storeConnected === undefined ? {} : { storeConnected: options.storeConnected }),
      ...(options.hotKeys === undefined ? {} : { hotKeys: options.hotKeys }),
    });
    this.redis = new RedisMetrics(shared);
    const limiter = this.limiter;
    this.stages = new StageMetrics({ ...shared, policyLabel: (p) => limiter.labelOf(p) });
    this.#ruleHits = new Counter({
      name: RULE_HITS,
      help: 'Hits per rate limit rule and outcome, in hits_addend units (envoyproxy/ratelimit rule stats).',
      labelNames: ['domain', 'rule', 'outcome'] as const,
      registers,
    });
    this.#configLoads = new Counter({
      name: 'sluice_config_load_total',
      help: 'Policy configuration loads by result.',
      labelNames: ['result'] as const,
      registers,
    });
    this.#configLoaded = new Gauge({
      name: 'sluice_config_last_success_timestamp_seconds',
      help: 'When the policy configuration was last loaded successfully (Unix time, seconds).',
      registers,
    });
    const leases = () => this.#leases?.() ?? [];
    new Gauge({
      name: 'sluice_lease_in_force',
      help: 'Whether a quota lease is in force for the policy (1), or its fallback applies (0).',
      labelNames: ['policy'] as const,
      registers,
      collect() {
        for (const l of leases()) this.set({ policy: l.policy }, l.inForce ? 1 : 0);
      },
    });
    new Gauge({
      name: 'sluice_lease_rate_units_per_second',
      help: "The rate the policy's quota lease, or its static fallback, admits, in units per second.",
      labelNames: ['policy'] as const,
      registers,
      collect() {
        for (const l of leases()) {
          if (l.ratePerSecond === null) this.remove({ policy: l.policy });
          else this.set({ policy: l.policy }, l.ratePerSecond);
        }
      },
    });
    this.#duration = new Histogram({
      name: DURATION,
      help: 'Time from a decision request arriving to its answer, by transport and method.',
      labelNames: ['transport', 'method'] as const,
      buckets: [...(options.durationBuckets ?? DEFAULT_BUCKETS)],
      registers,
    });
  }

  /**
   * Adds `hits` to one rule outcome. `ruleKey` is the rule's configuration key path
   * (`ruleMetricKey(parts)`), with request values only for `detailed_metric` rules.
   * `hits` 0 creates the series without counting. Throws `RangeError` for an unknown
   * outcome or a negative or non-finite `hits`.
   */
  recordRule(domain: string, ruleKey: string, outcome: RuleOutcome, hits: number): void {
    if (!OUTCOMES.has(outcome)) throw new RangeError(`unknown rule outcome "${String(outcome)}"`);
    checkHits(hits);
    const labels = this.#ruleLabels(domain, ruleKey);
    if (labels !== undefined) this.#ruleHits.inc({ ...labels, outcome }, hits);
  }

  /**
   * Records one check against one rule as upstream does: splits `usage.hits` with
   * `ruleHits` (this instance's near-limit ratio) and adds every outcome, so all five
   * series exist for the rule from its first check. Throws `RangeError` as `ruleHits`.
   */
  recordRuleCheck(domain: string, ruleKey: string, usage: RuleUsage): void {
    const split = ruleHits(usage, this.#nearLimitRatio);
    const labels = this.#ruleLabels(domain, ruleKey);
    if (labels === undefined) return;
    for (const outcome of RULE_OUTCOMES) this.#ruleHits.inc({ ...labels, outcome }, split[outcome]);
  }

  /** A rule's labels, bounded; `undefined` when the series cap drops the update. */
  #ruleLabels(domain: string, ruleKey: string): { domain: string; rule: string } | undefined {
    const d = boundedLabelValue(domain);
    const rule = boundedLabelValue(ruleKey);
    // The five outcomes are admitted together: a rule never shows some of them only.
    if (!this.#cap.admit(RULE_HITS, `${d}\u0000${rule}`, RULE_OUTCOMES.length)) return undefined;
    return { domain: d, rule };
  }

  /**
   * Where `sluice_lease_in_force{policy}` and `sluice_lease_rate_units_per_second{policy}`
   * are read from when scraped: one row per leased policy (a few, from the settings).
   */
  leasesFrom(source: LeaseGaugeSource): void {
    this.#leases = source;
  }

  /** Counts one configuration load. */
  recordConfigLoad(result: ConfigLoadResult): void {
    this.#configLoads.inc({ result });
    if (result === 'success') this.#configLoaded.set(Date.now() / 1000);
  }

  /** Counts one policy decision by its policy name, status and path (see {@link limiter}). */
  recordDecision(decision: Pick<Decision, 'policy' | 'status' | 'path'>): void {
    this.limiter.recordDecision(decision);
  }

  /**
   * Observes how long one call took, in milliseconds (exposed in seconds, as Prometheus
   * names durations). `method` names the RPC, e.g. `ShouldRateLimit` or `Check`, whichever
   * transport carried it.
   */
  observeDecisionDuration(transport: MetricsTransport, method: string, durationMs: number): void {
    if (!this.#cap.admit(DURATION, `${transport}\u0000${method}`)) return;
    this.#duration.observe({ transport, method }, durationMs / 1000);
  }

  /**
   * Counts one failed store call by its error code (`SLUICE_ERR_STORE_TIMEOUT`) and
   * reason (a `StoreFailureReason`, `deadline` or `cancelled`).
   */
  recordStoreError(code: string, reason: string): void {
    this.limiter.recordStoreError(code, reason);
  }

  /** The Prometheus text exposition of every metric in {@link registry}. */
  async metrics(): Promise<MetricsExposition> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
