import { algorithmOf } from './index.js';

/**
 * Gives back `cost` units that an admitted transition at `consumedAtMs` took, at `nowMs`
 * (shortly after). Used when one check spans several Redis Cluster slots and a later slot
 * denies: the earlier slots' consumption is undone. Pure; `state` is never mutated.
 * Returns the state to write, or `undefined` when nothing of that consumption is still
 * counted (no state, or its window has passed), so nothing is written.
 *
 * Every refund is bounded: capacity never rises above its maximum and counts never go
 * below zero, so a refund can at worst give back less than was taken (when the units were
 * already refilled or expired), never more. Each algorithm's `refund` does it:
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
  kind: string,
  state: unknown,
  nowMs: number,
  consumedAtMs: number,
  cost: number,
  params: unknown,
): unknown {
  if (state === undefined || cost <= 0) return undefined;
  return algorithmOf(kind).refund(state, nowMs, consumedAtMs, cost, params);
}
