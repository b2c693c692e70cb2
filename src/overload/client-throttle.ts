import { systemClock, type Clock } from '../core/clock.js';
import { checkRange } from './option-range.js';
import { WindowCounter } from './window-counter.js';

/** Options of {@link ClientThrottle}; every field has a default. */
export interface ClientThrottleOptions {
  /**
   * Accepts multiplier K: the client sends about K requests per request the backend
   * accepts before refusing locally. 2 keeps about one refused request reaching the
   * backend per accepted one (a fresh signal); 1.1 is more aggressive. @default 2
   */
  readonly k?: number;
  /** The window `requests` and `accepts` are counted over, in ms. @default 120_000 */
  readonly windowMs?: number;
  /** Slices of the window. @default 12 */
  readonly buckets?: number;
  /** The local refusal probability never exceeds this, in [0, 1]. @default 0.9 */
  readonly maxRejectProbability?: number;
  /** @default systemClock */
  readonly clock?: Clock;
}

const FIELDS = ['requests', 'accepts'] as const;

/**
 * Client-side adaptive throttling (Google SRE, "Handling Overload"): over a sliding
 * window the client counts the requests it attempted (those it refused locally
 * included) and the ones the backend accepted, and refuses a new request locally with
 * probability `max(0, (requests − K × accepts) / (requests + 1))`. While the backend
 * accepts everything the probability is 0; once it refuses most requests, the client
 * stops sending most of them instead of making the backend spend capacity on refusals.
 */
export class ClientThrottle {
  readonly #k: number;
  readonly #max: number;
  readonly #clock: Clock;
  readonly #window: WindowCounter<(typeof FIELDS)[number]>;

  /** Throws a `PolicyError` (`SLUICE_ERR_OVERLOAD_CONFIG_INVALID`) for an option out of range. */
  constructor(options: ClientThrottleOptions = {}) {
    checkRange('adaptive throttle', 'k', options.k, 1, Infinity);
    checkRange('adaptive throttle', 'windowMs', options.windowMs, 0, Infinity, true);
    checkRange('adaptive throttle', 'buckets', options.buckets, 1, 10_000);
    checkRange('adaptive throttle', 'maxRejectProbability', options.maxRejectProbability, 0, 1);
    this.#k = options.k ?? 2;
    this.#max = options.maxRejectProbability ?? 0.9;
    this.#clock = options.clock ?? systemClock;
    this.#window = new WindowCounter(FIELDS, options.windowMs ?? 120_000, options.buckets ?? 12);
  }

  /** The probability a new request is refused locally now, in [0, maxRejectProbability]. */
  rejectProbability(): number {
    const t = this.#window.totals(this.#clock.nowMs());
    const p = (t.requests - this.#k * t.accepts) / (t.requests + 1);
    return Math.min(this.#max, Math.max(0, p));
  }

  /**
   * Decides one attempt and counts it: `true` to send it, `false` to refuse it locally.
   * @param random uniform in [0, 1)
   */
  allow(random: number): boolean {
    const p = this.rejectProbability();
    this.#window.add(this.#clock.nowMs(), 'requests');
    return random >= p;
  }

  /** Records that the backend accepted a sent request (any answer but an overload refusal). */
  accepted(): void {
    this.#window.add(this.#clock.nowMs(), 'accepts');
  }
}
