import type { AlgorithmKind } from '../core/policy.js';
import type { FixedWindowState, WindowParams } from './fixed-window.js';
import type { GcraParams, GcraState } from './gcra.js';
import type { LeakyBucketParams, LeakyBucketState } from './leaky-bucket.js';
import type { SlidingLogEntry, SlidingLogState } from './sliding-log.js';
import type { SlidingWindowCounterState } from './sliding-window-counter.js';
import type { TokenBucketParams, TokenBucketState } from './token-bucket.js';

/**
 * Gives back `cost` units that an admitted transition at `consumedAtMs` took, at `nowMs`
 * (shortly after). Used when one check spans several Redis Cluster slots and a later slot
 * denies: the earlier slots' consumption is undone. Pure; `state` is never mutated.
 * Returns the state to write, or `undefined` when nothing of that consumption is still
 * counted (no state, or its window has passed), so nothing is written.
 *
 * Every refund is bounded: capacity never rises above its maximum and counts never go
 * below zero, so a refund can at worst give back less than was taken (when the units were
 * already refilled or expired), never more. Per algorithm:
 *
 * - token bucket: refill to `nowMs`, then `tokens = min(burst, tokens + cost)`;
 * - GCRA: `tat = max(nowMs, tat - cost * periodMs / rate)`;
 * - leaky bucket: leak to `nowMs`, then `level = max(0, level - cost)`;
 * - fixed window: `count - cost` (floored at 0) only if the state is still the window of
 *   `consumedAtMs`; a later window never held those units;
 * - sliding window counter: `current - cost` if the state is the window of
 *   `consumedAtMs`, `previous - cost` if it has moved one window on, nothing after that;
 * - sliding log: removes one entry of exactly `cost` units stamped at the earliest instant
 *   `>= consumedAtMs` that has one (entries at one instant with one cost are
 *   interchangeable, so which one goes does not matter).
 *
 * `params` are the algorithm's validated params, as for `transition`.
 */
export function refundState(
  kind: AlgorithmKind,
  state: unknown,
  nowMs: number,
  consumedAtMs: number,
  cost: number,
  params: unknown,
): unknown {
  if (state === undefined || cost <= 0) return undefined;
  switch (kind) {
    case 'token-bucket': {
      const s = state as TokenBucketState;
      const p = params as TokenBucketParams;
      const elapsedMs = Math.max(0, nowMs - s.tsMs);
      const tokens = Math.min(p.burst, s.tokens + (elapsedMs * p.rate) / p.periodMs);
      return { tokens: Math.min(p.burst, tokens + cost), tsMs: Math.max(s.tsMs, nowMs) };
    }
    case 'gcra': {
      const s = state as GcraState;
      const p = params as GcraParams;
      return { tatMs: Math.max(nowMs, s.tatMs - (cost * p.periodMs) / p.rate) };
    }
    case 'leaky-bucket': {
      const s = state as LeakyBucketState;
      const p = params as LeakyBucketParams;
      const elapsedMs = Math.max(0, nowMs - s.tsMs);
      const level = Math.max(0, s.level - (elapsedMs * p.rate) / p.periodMs);
      return { level: Math.max(0, level - cost), tsMs: Math.max(s.tsMs, nowMs) };
    }
    case 'fixed-window': {
      const s = state as FixedWindowState;
      const p = params as WindowParams;
      if (s.window !== Math.floor(consumedAtMs / p.windowMs)) return undefined;
      return { window: s.window, count: Math.max(0, s.count - cost) };
    }
    case 'sliding-window-counter': {
      const s = state as SlidingWindowCounterState;
      const p = params as WindowParams;
      const w = Math.floor(consumedAtMs / p.windowMs);
      if (s.window === w) return { ...s, current: Math.max(0, s.current - cost) };
      if (s.window === w + 1) return { ...s, previous: Math.max(0, s.previous - cost) };
      return undefined;
    }
    case 'sliding-log': {
      const entries = (state as SlidingLogState).entries;
      let at = -1;
      for (let i = 0; i < entries.length; i++) {
        const [tMs, c] = entries[i]!;
        if (tMs >= consumedAtMs && c === cost && (at < 0 || tMs < entries[at]![0])) at = i;
      }
      if (at < 0) return undefined;
      const next: SlidingLogEntry[] = entries.filter((_, i) => i !== at);
      return { entries: next };
    }
  }
}
