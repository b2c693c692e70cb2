import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { DECISION_PATHS, type Decision, type DecisionPath } from '../core/decision.js';
import { ERROR_CODES } from '../core/error-codes.js';
import { SluiceError, type StoreError } from '../core/errors.js';
import { STATUSES, type Status } from '../core/status.js';
import { BucketHistogram, type HistogramCell } from './bucket-histogram.js';
import type { CheckRecorder, StoreCallEndedBy } from './check-recorder.js';
import { DistinctCount } from './distinct-count.js';
import { hashedKey } from './hashed-key.js';
import { identityHash } from '../stores/identity-hash.js';
import { hashTagOf } from '../stores/key.js';
import { boundedLabelValue, DEFAULT_MAX_SERIES_PER_METRIC, SeriesCap } from './series-cap.js';
import { TopK } from './top-k.js';

/** Options of {@link LimiterMetrics}. */
export interface LimiterMetricsOptions {
  /** The registry to register in. @default a new `Registry` of its own (see `registry`) */
  readonly registry?: Registry;
  /** Most series per metric family (see `SeriesCap`). @default 2000 */
  readonly maxSeriesPerMetric?: number;
  /**
   * The `policy` label of a policy name. The service passes its rules' public names here
   * (its policies have internal names). @default the name itself
   */
  readonly policyLabel?: (policy: string) => string;
  /** Keys the hot-key table keeps (space-saving top-k); 0 turns it off. @default 10 */
  readonly hotKeys?: number;
  /**
   * The window of `sluice_active_keys`: keys seen in the last one to two windows are
   * counted. @default 60_000
   */
  readonly activeKeyWindowMs?: number;
  /**
   * Whether the store's connection is up now: a timeout while it is down is counted as
   * `connection` (calls wait for a reconnect within their deadline). @default always up
   */
  readonly storeConnected?: () => boolean;
  /** Upper bounds of the duration histograms, in seconds. @default 0.0001 … 2.5 */
  readonly durationBuckets?: readonly number[];
}

/** One entry of {@link LimiterMetrics.hotKeys}. */
export interface HotKeyEntry {
  /** First 16 hex digits of SHA-256 of the bucket key; never the key. */
  readonly key: string;
  /** The policy label of the bucket. */
  readonly policy: string;
  /** Estimated units asked of the bucket since the process started (an upper bound). */
  readonly count: number;
  /** `count - error` is a lower bound. */
  readonly error: number;
}

/** One entry of {@link LimiterMetrics.hotPolicies}. */
export interface HotPolicyEntry {
  readonly policy: string;
  /** Decisions of the policy since the process started. */
  readonly decisions: number;
  /** Of which denied (OVER_LIMIT or UNAVAILABLE). */
  readonly denied: number;
}

const DEFAULT_BUCKETS: readonly number[] = Object.freeze([
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
]);

/** Bounds of `sluice_remaining_ratio`: the share of a bucket left after a decision. */
const RATIO_BUCKETS = [0, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 1];

const DECISIONS = 'sluice_decisions_total';
const ERRORS = 'sluice_limiter_errors_total';
const STORE_ERRORS = 'sluice_store_errors_total';
const REMAINING = 'sluice_remaining_ratio';
const ACTIVE = 'sluice_active_keys';

/** Outcome label of a check's duration. */
type CheckOutcome = 'ok' | 'over_limit' | 'unavailable' | 'invalid';
const OUTCOME_OF: Record<Status, CheckOutcome> = {
  OK: 'ok',
  OVER_LIMIT: 'over_limit',
  UNAVAILABLE: 'unavailable',
  INVALID_POLICY: 'invalid',
};

/** Active keys of one policy: the current window's sketch and the one before. */
interface ActiveKeys {
  current: DistinctCount;
  previous: DistinctCount;
  windowStart: number;
}

const PATHS: readonly DecisionPath[] = DECISION_PATHS;
const STATUS_INDEX = new Map(STATUSES.map((s, i) => [s, i]));
const PATH_INDEX = new Map(PATHS.map((p, i) => [p, i]));

/**
 * What one policy label has counted. Decisions are plain numbers, written into the
 * counter at each scrape: a prom-client `inc` hashes and validates its label object
 * (about 0.5 µs), more than a memory-store check costs.
 */
interface PolicyRecord {
  readonly label: string;
  /** By `status × PATHS.length + path`. */
  readonly decisions: Float64Array;
  /** Which of those label sets the series cap admitted, and which it refused. */
  readonly admitted: Uint8Array;
  /** `null` once the series cap refused the label's remaining-ratio histogram. */
  remaining: HistogramCell | null | undefined;
  /** `null` once the series cap refused the label's active-keys gauge. */
  active: ActiveKeys | null | undefined;
}

/** Admission states of a record's label sets. */
const UNSEEN = 0;
const ADMITTED = 1;
const REFUSED = 2;

/**
 * The limiter's Prometheus metrics, for library users (`createLimiter({ metrics })`,
 * and so the HTTP middleware) and the service alike. Families (docs/metrics.md):
 *
 * - `sluice_decisions_total{policy, status, path}`: one per policy decision; `path` is
 *   one of store, fail-open, fail-closed, stale, shadow, local, cache, batch, lease;
 * - `sluice_check_duration_seconds{outcome}`: time to decide one check (ok, over_limit,
 *   unavailable, invalid);
 * - `sluice_limiter_errors_total{code}`: every error code a check met (refused input,
 *   failed store calls);
 * - `sluice_store_call_duration_seconds{result}` (ok, error) and
 *   `sluice_store_errors_total{code, reason}`: every store call the limiter waited on;
 * - `sluice_remaining_ratio{policy}`: remaining ÷ limit after each store decision;
 * - `sluice_active_keys{policy}`: distinct buckets seen in the last one to two windows
 *   (HyperLogLog, 1 KiB per window per policy);
 * - `sluice_hot_key_units{rank, policy, key}`: the top-k buckets by units asked, keys as
 *   16 hex digits of SHA-256 (space-saving, `hotKeys` entries).
 *
 * No label carries a request value: the policy label is a configured name, bounded by the
 * series cap, and hot keys are hashed and at most `hotKeys` series.
 */
export class LimiterMetrics implements CheckRecorder {
  /** The registry every family is in. */
  readonly registry: Registry;
  readonly #cap: SeriesCap;
  readonly #label: (policy: string) => string;
  readonly #connected: () => boolean;
  readonly #windowMs: number;
  readonly #checkDuration: BucketHistogram;
  /** `sluice_check_duration_seconds` by outcome. */
  readonly #checkCells: Readonly<Record<CheckOutcome, HistogramCell>>;
  readonly #errors: Counter<'code'>;
  readonly #storeDuration: Histogram<'result'>;
  readonly #storeErrors: Counter<'code' | 'reason'>;
  readonly #remaining: BucketHistogram;
  readonly #hot: TopK<string> | undefined;
  /** By label; at most as many as the series cap admits decision labels. */
  readonly #records = new Map<string, PolicyRecord>();
  /** Policy name → its record, so a check finds it with one lookup. */
  readonly #byName = new Map<string, PolicyRecord>();
  /** Policy name → label, so a hot check computes each label once. */
  readonly #labels = new Map<string, string>();

  /** Throws `RangeError` for an invalid option. */
  constructor(options: LimiterMetricsOptions = {}) {
    const registry = (this.registry = options.registry ?? new Registry());
    this.#cap = new SeriesCap(
      options.maxSeriesPerMetric ?? DEFAULT_MAX_SERIES_PER_METRIC,
      registry,
    );
    this.#label = options.policyLabel ?? ((p) => p);
    this.#connected = options.storeConnected ?? (() => true);
    const windowMs = options.activeKeyWindowMs ?? 60_000;
    if (!(windowMs > 0)) {
      throw new RangeError(`activeKeyWindowMs must be a positive number, got ${windowMs}`);
    }
    this.#windowMs = windowMs;
    const k = options.hotKeys ?? 10;
    this.#hot = k === 0 ? undefined : new TopK<string>(k);
    const buckets = [...(options.durationBuckets ?? DEFAULT_BUCKETS)];
    const registers = [registry];
    const records = this.#records;
    new Counter({
      name: DECISIONS,
      help: 'Policy decisions by policy, status (OK, OVER_LIMIT, UNAVAILABLE) and the path that produced them (store, fail-open, fail-closed, stale, shadow, local, cache, batch, lease).',
      labelNames: ['policy', 'status', 'path'] as const,
      registers,
      collect() {
        this.reset();
        for (const r of records.values()) {
          for (let i = 0; i < r.admitted.length; i++) {
            if (r.admitted[i] !== ADMITTED) continue;
            const status = STATUSES[Math.floor(i / PATHS.length)]!;
            this.inc({ policy: r.label, status, path: PATHS[i % PATHS.length]! }, r.decisions[i]!);
          }
        }
      },
    });
    this.#checkDuration = new BucketHistogram({
      name: 'sluice_check_duration_seconds',
      help: 'Time the limiter took to decide one check, by outcome (ok, over_limit, unavailable, invalid).',
      buckets,
      registry,
    });
    const d = this.#checkDuration;
    this.#checkCells = {
      ok: d.cell({ outcome: 'ok' }),
      over_limit: d.cell({ outcome: 'over_limit' }),
      unavailable: d.cell({ outcome: 'unavailable' }),
      invalid: d.cell({ outcome: 'invalid' }),
    };
    this.#errors = new Counter({
      name: ERRORS,
      help: 'Errors the limiter met, by SLUICE_ERR_* code: refused checks and failed store calls.',
      labelNames: ['code'] as const,
      registers,
    });
    this.#storeDuration = new Histogram({
      name: 'sluice_store_call_duration_seconds',
      help: 'Time of each store call the limiter waited on, by result (ok, error).',
      labelNames: ['result'] as const,
      buckets,
      registers,
    });
    this.#storeErrors = new Counter({
      name: STORE_ERRORS,
      help: 'Failed store calls by error code and reason (timeout, connection, oom, wrongtype, …; deadline and cancelled when the caller ended the wait).',
      labelNames: ['code', 'reason'] as const,
      registers,
    });
    this.#remaining = new BucketHistogram({
      name: REMAINING,
      help: 'Share of the bucket left (remaining / limit) after each store decision, by policy.',
      buckets: RATIO_BUCKETS,
      registry,
    });
    new Gauge({
      name: ACTIVE,
      help: 'Estimated distinct buckets (keys) checked per policy in the last one to two activeKeyWindowMs (HyperLogLog, ±3.25%).',
      labelNames: ['policy'] as const,
      registers,
      collect() {
        this.reset();
        for (const r of records.values()) {
          const a = r.active;
          if (a === null || a === undefined) continue;
          const both = new DistinctCount();
          both.merge(a.current);
          both.merge(a.previous);
          this.set({ policy: r.label }, both.estimate());
        }
      },
    });
    const hot = this.#hot;
    new Gauge({
      name: 'sluice_hot_key_units',
      help: 'The busiest buckets by units asked since start (space-saving top-k, an upper bound); key is 16 hex digits of SHA-256 of the bucket key, rank 1 is the busiest.',
      labelNames: ['rank', 'policy', 'key'] as const,
      registers,
      collect() {
        this.reset();
        if (hot === undefined) return;
        hot.top().forEach((e, i) => {
          this.set({ rank: String(i + 1), policy: e.tag, key: hashedKey(e.item) }, e.count);
        });
      },
    });
  }

  /** The `policy` label of a policy name (see `policyLabel`), bounded. */
  labelOf(name: string): string {
    return this.#policy(name);
  }

  /**
   * The record of a policy name; `undefined` when its label is new and the series cap
   * is full (the update is then counted as dropped).
   */
  #record(name: string): PolicyRecord | undefined {
    const known = this.#byName.get(name);
    if (known !== undefined) return known;
    const label = this.#policy(name);
    let r = this.#records.get(label);
    if (r === undefined) {
      // At most as many labels as one family may hold series: records stay bounded
      // however many policy names (request-supplied limits) pass.
      if (this.#records.size >= this.#cap.max) {
        this.#cap.drop(DECISIONS);
        return undefined;
      }
      const n = STATUSES.length * PATHS.length;
      r = {
        label,
        decisions: new Float64Array(n),
        admitted: new Uint8Array(n),
        remaining: undefined,
        active: undefined,
      };
      this.#records.set(label, r);
    }
    if (this.#byName.size < this.#cap.max) this.#byName.set(name, r);
    return r;
  }

  /** The label of a policy name, bounded, computed once per name. */
  #policy(name: string): string {
    let label = this.#labels.get(name);
    if (label === undefined) {
      label = boundedLabelValue(this.#label(name));
      // Names come from configuration; the map is bounded like the decision series.
      if (this.#labels.size < this.#cap.max) this.#labels.set(name, label);
    }
    return label;
  }

  bucket(policy: string, key: string, cost: number, nowMs: number): void {
    const r = this.#record(policy);
    if (r === undefined) return;
    this.#hot?.add(key, r.label, cost === 0 ? 1 : cost);
    let a = r.active;
    if (a === null) return;
    if (a === undefined) {
      if (!this.#cap.admit(ACTIVE, r.label)) {
        r.active = null;
        return;
      }
      a = r.active = {
        current: new DistinctCount(),
        previous: new DistinctCount(),
        windowStart: nowMs,
      };
    }
    if (nowMs - a.windowStart >= this.#windowMs) {
      // A gap of two windows or more leaves nothing of the old ones active.
      const swap = a.previous;
      swap.clear();
      if (nowMs - a.windowStart < 2 * this.#windowMs) {
        a.previous = a.current;
        a.current = swap;
      } else {
        a.current.clear();
      }
      a.windowStart = nowMs;
    }
    a.current.add(key);
  }

  decided(status: Status, decisions: readonly Decision[], durationMs: number): void {
    this.#checkDuration.observe(this.#checkCells[OUTCOME_OF[status]], durationMs / 1000);
    for (let i = 0; i < decisions.length; i++) this.recordDecision(decisions[i]!);
  }

  /**
   * Counts one policy decision (`sluice_decisions_total`, the remaining ratio of a store
   * decision, the hot-policy table). `decision.policy` goes through `policyLabel`.
   */
  recordDecision(decision: Pick<Decision, 'policy' | 'status' | 'path'> & Partial<Decision>): void {
    const r = this.#record(decision.policy);
    if (r === undefined) return;
    const { status, path } = decision;
    const i = STATUS_INDEX.get(status)! * PATHS.length + PATH_INDEX.get(path)!;
    const state = r.admitted[i];
    if (state === ADMITTED) r.decisions[i]!++;
    else if (state === UNSEEN || state === REFUSED) {
      if (this.#cap.admit(DECISIONS, `${r.label}\u0000${status}\u0000${path}`)) {
        r.admitted[i] = ADMITTED;
        r.decisions[i]!++;
      } else {
        r.admitted[i] = REFUSED; // each later update is counted as dropped too
      }
    }
    const limit = decision.limit;
    if (path === 'store' && limit !== undefined && limit > 0 && decision.remaining !== undefined) {
      let cell = r.remaining;
      if (cell === undefined) {
        cell = r.remaining = this.#cap.admit(REMAINING, r.label, RATIO_BUCKETS.length + 3)
          ? this.#remaining.cell({ policy: r.label })
          : null;
      }
      if (cell !== null) {
        this.#remaining.observe(cell, Math.min(1, Math.max(0, decision.remaining / limit)));
      }
    }
  }

  refused(error: unknown, durationMs: number): void {
    this.#checkDuration.observe(this.#checkCells.invalid, durationMs / 1000);
    this.#errors.inc({ code: codeOf(error) });
  }

  storeCall(durationMs: number, error?: StoreError, endedBy: StoreCallEndedBy = 'store'): void {
    this.#storeDuration.observe(
      { result: error === undefined ? 'ok' : 'error' },
      durationMs / 1000,
    );
    if (error === undefined) return;
    this.#errors.inc({ code: codeOf(error) });
    const reason =
      endedBy === 'cancel'
        ? 'cancelled'
        : endedBy === 'deadline'
          ? 'deadline'
          : error.reason === 'timeout' && !this.#connected()
            ? 'connection'
            : error.reason;
    this.recordStoreError(error.code, reason);
  }

  /** Counts one failed store call by code and reason (`sluice_store_errors_total`). */
  recordStoreError(code: string, reason: string): void {
    if (!this.#cap.admit(STORE_ERRORS, `${code}\u0000${reason}`)) return;
    this.#storeErrors.inc({ code, reason });
  }

  /**
   * The busiest buckets since the process started, busiest first (at most `hotKeys`),
   * keys hashed: for a status page. Empty when `hotKeys` is 0.
   */
  hotKeys(): HotKeyEntry[] {
    return (this.#hot?.top() ?? []).map((e) => ({
      key: hashedKey(e.item),
      policy: e.tag,
      count: e.count,
      error: e.error,
    }));
  }

  /**
   * The busiest identities among the hot buckets, busiest first: each bucket key's
   * identity (its hash tag) hashed as the decision log hashes it (`identityHash`), one
   * entry per identity with the largest count among its buckets (a check of one identity
   * under several policies counts once). For the service's status page.
   */
  hotIdentities(): { hash: string; count: number }[] {
    const byHash = new Map<string, number>();
    for (const e of this.#hot?.top() ?? []) {
      const hash = identityHash(hashTagOf(e.item));
      byHash.set(hash, Math.max(byHash.get(hash) ?? 0, e.count));
    }
    return [...byHash]
      .map(([hash, count]) => ({ hash, count }))
      .sort((a, b) => b.count - a.count || (a.hash < b.hash ? -1 : 1));
  }

  /** Policies by decisions since start, busiest first, at most `n`. */
  hotPolicies(n = 10): HotPolicyEntry[] {
    const ok = STATUS_INDEX.get('OK')!;
    return [...this.#records.values()]
      .map((r) => {
        let decisions = 0;
        let denied = 0;
        r.decisions.forEach((count, i) => {
          decisions += count;
          if (Math.floor(i / PATHS.length) !== ok) denied += count;
        });
        return { policy: r.label, decisions, denied };
      })
      .filter((p) => p.decisions > 0)
      .sort((a, b) => b.decisions - a.decisions || (a.policy < b.policy ? -1 : 1))
      .slice(0, n);
  }
}

/** A known SLUICE_ERR_* code, or `other`: the label stays within the registry's codes. */
function codeOf(error: unknown): string {
  if (error instanceof SluiceError && Object.hasOwn(ERROR_CODES, error.code)) return error.code;
  return 'other';
}
