import { systemClock, type Clock } from '../core/clock.js';
import { DEFAULT_CRITICALITY, type Criticality } from '../core/criticality.js';
import type { LimitAlgorithm } from './limit-algorithm.js';
import { LoadShedder } from './load-shedder.js';

/**
 * How an admitted request ended:
 * - `success`: it was served;
 * - `failure`: it failed for its own reasons (a 500): its latency still counts;
 * - `dropped`: it timed out or the dependency was overloaded (a 503, 504): back off;
 * - `ignore`: it says nothing about capacity (the client went away): no sample.
 */
export type PermitOutcome = 'success' | 'failure' | 'dropped' | 'ignore';

/** A slot in the concurrency limit. Release it exactly once; later calls do nothing. */
export interface ConcurrencyPermit {
  readonly criticality: Criticality;
  /** When it was granted, in ms on the limiter's clock. */
  readonly startMs: number;
  release(outcome: PermitOutcome): void;
}

/** Options of {@link ConcurrencyLimiter}. */
export interface ConcurrencyLimiterOptions {
  readonly algorithm: LimitAlgorithm;
  /** The per-criticality ceilings. @default new LoadShedder() (DEFAULT_SHARES) */
  readonly shedder?: LoadShedder;
  /** @default systemClock */
  readonly clock?: Clock;
}

/**
 * Bounds requests in flight by a limit algorithm's limit, with a ceiling per criticality
 * (see {@link LoadShedder}).
 *
 * `tryAcquire` checks and takes the slot in one synchronous step, so no interleaving of
 * callers can pass the check together and overshoot: the race of Netflix #234, where two
 * threads both read "9 of 10" and both enter, cannot happen on one event loop as long as
 * nothing awaits between the check and the increment, and nothing does. When the limit
 * falls below the current in-flight count, no request is admitted until enough have left.
 */
export class ConcurrencyLimiter {
  readonly #algorithm: LimitAlgorithm;
  readonly #shedder: LoadShedder;
  readonly #clock: Clock;
  #inflight = 0;
  #limited = false;
  #meanRttMs: number | undefined;
  #onRelease: (() => void) | undefined;

  constructor(options: ConcurrencyLimiterOptions) {
    this.#algorithm = options.algorithm;
    this.#shedder = options.shedder ?? new LoadShedder();
    this.#clock = options.clock ?? systemClock;
  }

  /** The algorithm's current limit. */
  get limit(): number {
    return this.#algorithm.limit;
  }

  /** Permits held now. */
  get inflight(): number {
    return this.#inflight;
  }

  /** Mean time a permit is held (EMA over about 20 releases), in ms; undefined before any. */
  get meanRttMs(): number | undefined {
    return this.#meanRttMs;
  }

  /** The most requests in flight at which one of level `c` is still admitted. */
  ceiling(c: Criticality): number {
    return this.#shedder.ceiling(this.#algorithm.limit, c);
  }

  /** Called after every release (the boundary hands freed slots to waiting requests). */
  set onRelease(listener: (() => void) | undefined) {
    this.#onRelease = listener;
  }

  /** A permit when fewer than `ceiling(c)` are in flight, else `undefined`. */
  tryAcquire(c: Criticality = DEFAULT_CRITICALITY): ConcurrencyPermit | undefined {
    if (this.#inflight >= this.ceiling(c)) {
      this.#limited = true;
      return undefined;
    }
    this.#inflight++;
    const inflight = this.#inflight;
    const startMs = this.#clock.nowMs();
    let released = false;
    return {
      criticality: c,
      startMs,
      release: (outcome) => {
        if (released) return;
        released = true;
        this.#inflight--;
        if (outcome !== 'ignore') {
          const nowMs = this.#clock.nowMs();
          const rttMs = Math.max(0, nowMs - startMs);
          const dropped = outcome === 'dropped';
          if (!dropped) {
            this.#meanRttMs =
              this.#meanRttMs === undefined
                ? rttMs
                : this.#meanRttMs + 0.1 * (rttMs - this.#meanRttMs);
          }
          const limited = this.#limited;
          this.#limited = false;
          this.#algorithm.onSample({ nowMs, rttMs, inflight, dropped, limited });
        }
        this.#onRelease?.();
      },
    };
  }
}
