import type { LimitAlgorithm, LimitSample } from './limit-algorithm.js';

/** Options of {@link GradientLimit}; every field has a default. */
export interface GradientLimitOptions {
  /** @default 20 */
  readonly initial?: number;
  /** @default 2 */
  readonly min?: number;
  /** @default 200 */
  readonly max?: number;
  /**
   * Latency inflation accepted before the limit falls: it falls while the recent RTT is
   * above `tolerance × minRtt`. Set it above the slowdown you want to ride out without
   * shedding. @default 1.5
   */
  readonly tolerance?: number;
  /** Share of each step applied per sample, in (0, 1]. @default 0.2 */
  readonly smoothing?: number;
  /** Samples the recent-RTT average spans (EMA with factor 2/(n+1)). @default 10 */
  readonly recentSamples?: number;
  /**
   * How often the no-load RTT is re-measured, in ms. It is the lowest RTT seen, and at
   * the end of each period it becomes the lowest RTT of that period's *unloaded* samples
   * (half the limit or less in flight); a period with none keeps the old value. @default 10_000
   */
  readonly minRttPeriodMs?: number;
  /** Factor applied on a drop, in [0.5, 1). @default 0.9 */
  readonly backoffRatio?: number;
}

/**
 * A latency-gradient limit (after Netflix's Gradient2 and Envoy's gradient controller):
 * the limit shrinks by `g = tolerance × minRtt / recentRtt` (clamped to [0.5, 1]) while
 * requests queue, and grows by √limit (smoothed) per sample when they do not.
 *
 * Three fixes over the peers' known flaws:
 * - no headroom is added while latency is inflated, so under modest overload the limit
 *   can only fall (Gradient2 adds a fixed queue of 4 to `limit × g` and grows when
 *   `g ≈ 0.8`: Netflix #134/#189);
 * - the no-load RTT is re-measured from unloaded samples only, so it cannot creep up
 *   while the service is busy (Envoy #11579; Vegas's `rtt_noload` drifting high, Netflix #165);
 * - a drop backs off and its RTT is ignored (Gradient2 ignores drops, and a drop's near-zero
 *   RTT reads as "fast": Netflix #176).
 * It does not grow while less than half of it is in use (an idle limit proves nothing).
 */
export class GradientLimit implements LimitAlgorithm {
  #limit: number;
  readonly #min: number;
  readonly #max: number;
  readonly #tolerance: number;
  readonly #smoothing: number;
  readonly #alpha: number;
  readonly #periodMs: number;
  readonly #backoff: number;
  #recentRtt: number | undefined;
  #minRtt: number | undefined;
  #periodStartMs: number | undefined;
  #periodMin: number | undefined;

  constructor(options: GradientLimitOptions = {}) {
    this.#min = options.min ?? 2;
    this.#max = options.max ?? 200;
    this.#limit = Math.min(this.#max, Math.max(this.#min, options.initial ?? 20));
    this.#tolerance = options.tolerance ?? 1.5;
    this.#smoothing = options.smoothing ?? 0.2;
    this.#alpha = 2 / ((options.recentSamples ?? 10) + 1);
    this.#periodMs = options.minRttPeriodMs ?? 10_000;
    this.#backoff = options.backoffRatio ?? 0.9;
  }

  get limit(): number {
    return Math.floor(this.#limit);
  }

  /** The no-load RTT estimate in ms, once a sample has been seen. */
  get minRttMs(): number | undefined {
    return this.#minRtt;
  }

  /** The recent RTT (EMA) in ms, once a sample has been seen. */
  get recentRttMs(): number | undefined {
    return this.#recentRtt;
  }

  onSample(s: LimitSample): void {
    if (s.dropped) {
      this.#limit = Math.max(this.#min, this.#limit * this.#backoff);
      return;
    }
    const rtt = s.rttMs;
    this.#recentRtt =
      this.#recentRtt === undefined ? rtt : this.#recentRtt + this.#alpha * (rtt - this.#recentRtt);
    this.#trackMinRtt(s);
    const minRtt = this.#minRtt ?? rtt;
    // A zero RTT (a clock that did not move) is as fast as it gets: no inflation.
    const g =
      this.#recentRtt <= 0
        ? 1
        : Math.min(1, Math.max(0.5, (this.#tolerance * minRtt) / this.#recentRtt));
    if (g < 1) {
      this.#limit -= this.#smoothing * this.#limit * (1 - g);
    } else if (s.inflight * 2 >= this.#limit) {
      this.#limit += this.#smoothing * Math.sqrt(this.#limit);
    }
    this.#limit = Math.min(this.#max, Math.max(this.#min, this.#limit));
  }

  #trackMinRtt(s: LimitSample): void {
    if (this.#minRtt === undefined || s.rttMs < this.#minRtt) this.#minRtt = s.rttMs;
    if (this.#periodStartMs === undefined) this.#periodStartMs = s.nowMs;
    if (s.inflight * 2 <= this.#limit) {
      this.#periodMin = Math.min(this.#periodMin ?? Infinity, s.rttMs);
    }
    if (s.nowMs - this.#periodStartMs >= this.#periodMs) {
      if (this.#periodMin !== undefined) this.#minRtt = this.#periodMin;
      this.#periodMin = undefined;
      this.#periodStartMs = s.nowMs;
    }
  }
}
