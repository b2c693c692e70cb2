import { systemClock, type Clock } from '../core/clock.js';
import { checkRange } from './option-range.js';
import { WindowCounter } from './window-counter.js';

/** Options of {@link RetryBudget}; every field has a default. */
export interface RetryBudgetOptions {
  /** Retries allowed per first attempt over the window, in [0, 1]. @default 0.1 */
  readonly ratio?: number;
  /** Retries always allowed per window, whatever the traffic. @default 10 */
  readonly minRetries?: number;
  /** @default 10_000 */
  readonly windowMs?: number;
  /** @default systemClock */
  readonly clock?: Clock;
}

const FIELDS = ['requests', 'retries'] as const;

/**
 * A retry budget: retries in the window stay below `max(minRetries, ratio × first
 * attempts)`. Per-request retry caps alone multiply load under overload (3 retries per
 * request is 4× the traffic); a budget keeps the client's extra load to `ratio` (SRE:
 * under 10 %) when every request fails, while a rare failure still gets its retry.
 */
export class RetryBudget {
  readonly #ratio: number;
  readonly #min: number;
  readonly #clock: Clock;
  readonly #window: WindowCounter<(typeof FIELDS)[number]>;

  /** Throws a `PolicyError` (`SLUICE_ERR_OVERLOAD_CONFIG_INVALID`) for an option out of range. */
  constructor(options: RetryBudgetOptions = {}) {
    checkRange('retry budget', 'ratio', options.ratio, 0, 1);
    checkRange('retry budget', 'minRetries', options.minRetries, 0, Infinity);
    checkRange('retry budget', 'windowMs', options.windowMs, 0, Infinity, true);
    this.#ratio = options.ratio ?? 0.1;
    this.#min = options.minRetries ?? 10;
    this.#clock = options.clock ?? systemClock;
    this.#window = new WindowCounter(FIELDS, options.windowMs ?? 10_000, 10);
  }

  /** Counts a first attempt. */
  request(): void {
    this.#window.add(this.#clock.nowMs(), 'requests');
  }

  /** Takes one retry from the budget: `true` when allowed (and counted), `false` when spent. */
  tryRetry(): boolean {
    const nowMs = this.#clock.nowMs();
    const t = this.#window.totals(nowMs);
    if (t.retries >= Math.max(this.#min, this.#ratio * t.requests)) return false;
    this.#window.add(nowMs, 'retries');
    return true;
  }
}
