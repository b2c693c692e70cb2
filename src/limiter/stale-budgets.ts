import { algorithmOf } from '../algorithms/index.js';
import type { AlgorithmDecision } from '../core/decision.js';
import type { Policy } from '../core/policy.js';

interface Budget {
  /** Units left as of `lastMs`. */
  remaining: number;
  lastMs: number;
  /** When the store last answered for this bucket: the stale TTL counts from here. */
  readonly reportedAtMs: number;
  readonly limit: number;
}

/**
 * Units a policy's bucket regains per ms while the store is away: its algorithm's
 * `refillPerMs` (0 for window algorithms, which keeps stale decisions on the safe side).
 */
function refillPerMs(policy: Policy): number {
  return algorithmOf(policy.algorithm).refillPerMs(policy.params);
}

/**
 * The last budget the store reported per bucket, for the `stale` failure mode: during an
 * outage a bucket keeps spending what it had, plus its refill, for `stale.ttlMs` after the
 * store's last answer. Admitted units during an outage are therefore at most the last
 * known remaining plus the refill over the TTL. Bounded: the least recently reported
 * bucket is dropped past `maxBuckets` (it then falls back).
 */
export class StaleBudgets {
  readonly #budgets = new Map<string, Budget>();
  readonly #max: number;

  constructor(maxBuckets = 100_000) {
    this.#max = maxBuckets;
  }

  /** Records what the store just said about a bucket. */
  record(key: string, decision: AlgorithmDecision, nowMs: number): void {
    this.#budgets.delete(key);
    if (this.#budgets.size >= this.#max) {
      this.#budgets.delete(this.#budgets.keys().next().value as string);
    }
    this.#budgets.set(key, {
      remaining: decision.remaining,
      lastMs: nowMs,
      reportedAtMs: nowMs,
      limit: decision.limit,
    });
  }

  /**
   * Decides from the local budget without spending it, or `undefined` when there is no
   * usable budget (never reported, or reported more than `ttlMs` ago).
   */
  peek(key: string, policy: Policy, cost: number, nowMs: number): AlgorithmDecision | undefined {
    const b = this.#budgets.get(key);
    const ttlMs = policy.stale?.ttlMs ?? 0;
    if (b === undefined || nowMs - b.reportedAtMs > ttlMs) return undefined;
    const rate = refillPerMs(policy);
    const have = Math.min(b.limit, b.remaining + Math.max(0, nowMs - b.lastMs) * rate);
    if (cost <= have + 1e-9) {
      return {
        status: 'OK',
        allowed: true,
        limit: b.limit,
        remaining: Math.max(0, have - cost),
        retryAfterMs: 0,
        resetAfterMs: 0,
      };
    }
    const untilStaleEndsMs = b.reportedAtMs + ttlMs - nowMs;
    return {
      status: 'OVER_LIMIT',
      allowed: false,
      limit: b.limit,
      remaining: have,
      retryAfterMs:
        rate > 0 ? Math.max(1e-9, (cost - have) / rate) : Math.max(1e-9, untilStaleEndsMs),
      resetAfterMs: 0,
    };
  }

  /** Spends `cost` from a bucket's local budget (after `peek` admitted it). */
  spend(key: string, policy: Policy, cost: number, nowMs: number): void {
    const b = this.#budgets.get(key);
    if (b === undefined) return;
    const have = Math.min(
      b.limit,
      b.remaining + Math.max(0, nowMs - b.lastMs) * refillPerMs(policy),
    );
    b.remaining = Math.max(0, have - cost);
    b.lastMs = Math.max(b.lastMs, nowMs);
  }
}
