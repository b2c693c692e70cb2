import type { LimitAlgorithm, LimitSample } from './limit-algorithm.js';
import { checkRange } from './option-range.js';

/** Options of {@link AimdLimit}; every field has a default. */
export interface AimdLimitOptions {
  /** @default 20 */
  readonly initial?: number;
  /** @default 1 */
  readonly min?: number;
  /** @default 200 */
  readonly max?: number;
  /** Factor applied on a drop or a slow request, in [0.5, 1). @default 0.9 */
  readonly backoffRatio?: number;
  /** A request slower than this counts as a drop, in ms. @default 5000 */
  readonly timeoutMs?: number;
}

/**
 * Additive increase, multiplicative decrease (TCP's rule): +1 per good sample while the
 * limit is in use (at least half of it in flight), × `backoffRatio` per drop or per request
 * slower than `timeoutMs`. Cheap and predictable; it reacts only to drops and timeouts, so
 * latency below the timeout never lowers it (the gradient limit does).
 */
export class AimdLimit implements LimitAlgorithm {
  #limit: number;
  readonly #min: number;
  readonly #max: number;
  readonly #backoff: number;
  readonly #timeoutMs: number;

  /** Throws a `PolicyError` (`SLUICE_ERR_OVERLOAD_CONFIG_INVALID`) for an option out of range. */
  constructor(options: AimdLimitOptions = {}) {
    const o = options;
    checkRange('AIMD limit', 'min', o.min, 1, o.max ?? Infinity);
    checkRange('AIMD limit', 'max', o.max, o.min ?? 1, Infinity);
    checkRange('AIMD limit', 'initial', o.initial, 1, Infinity);
    checkRange('AIMD limit', 'backoffRatio', o.backoffRatio, 0.5, 0.999_999);
    checkRange('AIMD limit', 'timeoutMs', o.timeoutMs, 0, Infinity, true);
    this.#min = options.min ?? 1;
    this.#max = options.max ?? 200;
    this.#limit = Math.min(this.#max, Math.max(this.#min, options.initial ?? 20));
    this.#backoff = options.backoffRatio ?? 0.9;
    this.#timeoutMs = options.timeoutMs ?? 5000;
  }

  get limit(): number {
    return Math.floor(this.#limit);
  }

  onSample(s: LimitSample): void {
    if (s.dropped || s.rttMs > this.#timeoutMs) {
      this.#limit = Math.max(this.#min, this.#limit * this.#backoff);
    } else if (s.inflight * 2 >= this.#limit) {
      // Growing while half the limit sits idle would only raise a limit nobody tests.
      this.#limit = Math.min(this.#max, this.#limit + 1);
    }
  }
}
