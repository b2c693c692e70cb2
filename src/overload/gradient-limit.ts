import type { LimitAlgorithm, LimitSample } from './limit-algorithm.js';
import { checkRange } from './option-range.js';

/** Options of {@link GradientLimit}; every field has a default. */
export interface GradientLimitOptions {
  /** @default 20 */
  readonly initial?: number;
  /** @default 2 */
  readonly min?: number;
  /** @default 200 */
  readonly max?: number;
  /**
   * Latency inflation accepted before the limit falls: it falls while a window's mean
   * RTT is above `tolerance × minRtt`. Set it above the slowdown you want to ride out
   * without shedding. @default 1.5
   */
  readonly tolerance?: number;
  /** Share of each window's step applied, in (0, 1]. @default 1 */
  readonly smoothing?: number;
  /**
   * How often the no-load RTT is re-measured, in ms. It is the lowest RTT seen, and at
   * the end of each period it becomes the lowest RTT of that period's *unloaded* samples
   * (half the limit or less in flight); a period with none keeps the old value. @default 10_000
   */
  readonly minRttPeriodMs?: number;
  /** Bounds of one update window, in ms; a window lasts one round trip (the last window's mean RTT) within them. @default [1, 1000] */
  readonly minWindowMs?: number;
  /** @default 1000 */
  readonly maxWindowMs?: number;
  /** Factor applied for a window with a drop, in [0.5, 1). @default 0.9 */
  readonly backoffRatio?: number;
}

/**
 * A latency-gradient limit (after Netflix's Gradient2 and Envoy's gradient controller),
 * updated once per round trip, as TCP updates its window: each window of about one mean
 * RTT, the limit is multiplied by `g = tolerance × minRtt / windowRtt` (clamped to
 * [0.5, 1]) while requests queue, and grows by √limit when they do not and the window
 * came within √limit of the limit. Updating per window rather than per sample keeps a
 * burst of slow answers (all admitted before the slowdown showed) from cutting the limit
 * once per answer down to its minimum.
 *
 * Fixes over the peers' known flaws:
 * - no headroom is added while latency is inflated, so under modest overload the limit
 *   can only fall (Gradient2 adds a fixed queue of 4 to `limit × g` and grows when
 *   `g ≈ 0.8`: Netflix #134/#189);
 * - the no-load RTT is re-measured from unloaded samples only, so it cannot creep up
 *   while the service is busy (Envoy #11579; Vegas's `rtt_noload` drifting high, Netflix #165);
 * - a drop backs off and its RTT is ignored (Gradient2 ignores drops, and a drop's near-zero
 *   RTT reads as "fast": Netflix #176);
 * - it grows only when demand reached the limit (in-flight came within √limit of it, or
 *   a request found no room), and steps back toward demand when a window's in-flight
 *   peak stays more than 2·√limit below it, so a healthy limit stays close to real
 *   demand and the burst admitted before a slowdown shows is small.
 */
export class GradientLimit implements LimitAlgorithm {
  #limit: number;
  readonly #min: number;
  readonly #max: number;
  readonly #tolerance: number;
  readonly #smoothing: number;
  readonly #periodMs: number;
  readonly #minWindowMs: number;
  readonly #maxWindowMs: number;
  readonly #backoff: number;
  #recentRtt: number | undefined;
  #minRtt: number | undefined;
  #periodStartMs: number | undefined;
  #periodMin: number | undefined;
  #windowStartMs: number | undefined;
  #windowSum = 0;
  #windowCount = 0;
  #windowMaxInflight = 0;
  #windowDropped = false;
  #windowLimited = false;

  /** Throws a `PolicyError` (`SLUICE_ERR_OVERLOAD_CONFIG_INVALID`) for an option out of range. */
  constructor(options: GradientLimitOptions = {}) {
    const o = options;
    checkRange('gradient limit', 'min', o.min, 1, o.max ?? Infinity);
    checkRange('gradient limit', 'max', o.max, o.min ?? 1, Infinity);
    checkRange('gradient limit', 'initial', o.initial, 1, Infinity);
    checkRange('gradient limit', 'tolerance', o.tolerance, 1, Infinity);
    checkRange('gradient limit', 'smoothing', o.smoothing, 0, 1, true);
    checkRange('gradient limit', 'minRttPeriodMs', o.minRttPeriodMs, 0, Infinity, true);
    checkRange('gradient limit', 'minWindowMs', o.minWindowMs, 0, o.maxWindowMs ?? Infinity);
    checkRange('gradient limit', 'maxWindowMs', o.maxWindowMs, 0, Infinity, true);
    checkRange('gradient limit', 'backoffRatio', o.backoffRatio, 0.5, 0.999_999);
    this.#min = options.min ?? 2;
    this.#max = options.max ?? 200;
    this.#limit = Math.min(this.#max, Math.max(this.#min, options.initial ?? 20));
    this.#tolerance = options.tolerance ?? 1.5;
    this.#smoothing = options.smoothing ?? 1;
    this.#periodMs = options.minRttPeriodMs ?? 10_000;
    this.#minWindowMs = options.minWindowMs ?? 1;
    this.#maxWindowMs = options.maxWindowMs ?? 1000;
    this.#backoff = options.backoffRatio ?? 0.9;
  }

  get limit(): number {
    return Math.floor(this.#limit);
  }

  /** The no-load RTT estimate in ms, once a sample has been seen. */
  get minRttMs(): number | undefined {
    return this.#minRtt;
  }

  /** The last window's mean RTT in ms, once a window has closed. */
  get recentRttMs(): number | undefined {
    return this.#recentRtt;
  }

  onSample(s: LimitSample): void {
    this.#windowStartMs ??= s.nowMs;
    this.#windowMaxInflight = Math.max(this.#windowMaxInflight, s.inflight);
    if (s.limited) this.#windowLimited = true;
    if (s.dropped) {
      this.#windowDropped = true;
    } else {
      this.#windowSum += s.rttMs;
      this.#windowCount++;
      this.#trackMinRtt(s);
    }
    const windowMs = Math.min(this.#maxWindowMs, Math.max(this.#minWindowMs, this.#recentRtt ?? 0));
    if (s.nowMs - this.#windowStartMs >= windowMs) this.#update(s.nowMs);
  }

  #update(nowMs: number): void {
    if (this.#windowDropped) {
      this.#limit *= this.#backoff;
    } else if (this.#windowCount > 0) {
      const rtt = this.#windowSum / this.#windowCount;
      this.#recentRtt = rtt;
      const minRtt = this.#minRtt ?? rtt;
      // A zero RTT (a clock that did not move) is as fast as it gets: no inflation.
      const g = rtt <= 0 ? 1 : Math.min(1, Math.max(0.5, (this.#tolerance * minRtt) / rtt));
      const headroom = Math.sqrt(this.#limit);
      if (g < 1) {
        this.#limit -= this.#smoothing * this.#limit * (1 - g);
      } else if (this.#windowLimited || this.#windowMaxInflight >= this.#limit - headroom) {
        this.#limit += this.#smoothing * headroom;
      } else if (this.#windowMaxInflight + 2 * headroom < this.#limit) {
        // Demand stayed well below: step back toward it, by at most √limit per window,
        // so a limit raised by a passing burst does not stay high, ready to admit a burst
        // the next time a dependency slows.
        this.#limit = Math.max(this.#windowMaxInflight + 2 * headroom, this.#limit - headroom);
      }
    }
    this.#limit = Math.min(this.#max, Math.max(this.#min, this.#limit));
    this.#windowStartMs = nowMs;
    this.#windowSum = 0;
    this.#windowCount = 0;
    this.#windowMaxInflight = 0;
    this.#windowDropped = false;
    this.#windowLimited = false;
  }

  #trackMinRtt(s: LimitSample): void {
    if (this.#minRtt === undefined || s.rttMs < this.#minRtt) this.#minRtt = s.rttMs;
    this.#periodStartMs ??= s.nowMs;
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
