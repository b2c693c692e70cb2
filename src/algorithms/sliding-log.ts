import {
  unfittableDecision,
  type Algorithm,
  type Settlement,
  type Transition,
  waitUntil,
} from './algorithm.js';
import { MEMORY_TABLE, borrowedCpu, measuredBytes } from './costs.js';
import { windowParamsSchema, type WindowParams } from './fixed-window.js';

/** Sliding log parameters (validated). */
export type SlidingLogParams = WindowParams;

/** One admitted request: when it was admitted (ms) and the units it took. */
export type SlidingLogEntry = readonly [tMs: number, cost: number];

/**
 * Sliding log state: one entry per admitted request still inside the window, oldest
 * first. Never mutated; every transition builds a new array when the log changes.
 */
export interface SlidingLogState {
  readonly entries: readonly SlidingLogEntry[];
}

/**
 * An entry counts for exactly `windowMs`: from `tMs` until `tMs + windowMs`, exclusive.
 * Written as one sum (not `tMs <= nowMs - windowMs`) so that the expiry instant and the
 * retry-after computed from it are the same double.
 */
function expiresAtMs([tMs]: SlidingLogEntry, p: SlidingLogParams): number {
  return tMs + p.windowMs;
}

function transition(
  state: SlidingLogState | undefined,
  nowMs: number,
  cost: number,
  p: SlidingLogParams,
): Transition<SlidingLogState> {
  const log = state?.entries ?? [];
  // Sorted by time, so the expired entries are a prefix.
  let firstLive = 0;
  while (firstLive < log.length && expiresAtMs(log[firstLive]!, p) <= nowMs) firstLive++;
  const entries = log.slice(firstLive);
  const used = entries.reduce((sum, [, c]) => sum + c, 0);
  const newest = entries.at(-1);
  const resetAfterMs = (last: SlidingLogEntry | undefined): number =>
    last === undefined ? 0 : expiresAtMs(last, p) - nowMs;

  if (cost > p.limit) {
    return {
      state: { entries },
      decision: unfittableDecision(p.limit, Math.max(0, p.limit - used), resetAfterMs(newest)),
    };
  }
  // Costs are whole units, so the comparison is exact: no FIT_EPSILON.
  if (used + cost <= p.limit) {
    // Cost 0 only reads: no entry, so the log holds at most `limit` entries.
    // After backwards time the entry is stamped at the newest entry's instant: the log
    // stays sorted, and no entry (this one included) expires before its turn.
    const next: readonly SlidingLogEntry[] =
      cost === 0 ? entries : [...entries, [Math.max(nowMs, newest?.[0] ?? nowMs), cost]];
    return {
      state: { entries: next },
      decision: {
        status: 'OK',
        allowed: true,
        limit: p.limit,
        remaining: p.limit - used - cost,
        retryAfterMs: 0,
        resetAfterMs: resetAfterMs(next.at(-1)),
      },
    };
  }
  // The cost fits once enough of the oldest entries have expired: find the last of those.
  let freed = 0;
  let i = 0;
  while (used - freed + cost > p.limit) freed += entries[i++]![1];
  return {
    state: { entries },
    decision: {
      status: 'OVER_LIMIT',
      allowed: false,
      limit: p.limit,
      // Past the limit only after a settle charged a debt (see `settle`).
      remaining: Math.max(0, p.limit - used),
      retryAfterMs: waitUntil(nowMs, expiresAtMs(entries[i - 1]!, p)),
      resetAfterMs: resetAfterMs(newest),
    },
  };
}

/** The live entries at `nowMs` (the expired ones are a prefix, as in `transition`). */
function live(state: SlidingLogState | undefined, nowMs: number, p: SlidingLogParams) {
  const log = state?.entries ?? [];
  let firstLive = 0;
  while (firstLive < log.length && expiresAtMs(log[firstLive]!, p) <= nowMs) firstLive++;
  return log.slice(firstLive);
}

/**
 * The index of the entry a reservation of `cost` at `consumedAtMs` wrote: one of exactly
 * `cost` units at the earliest instant `>= consumedAtMs` (entries at one instant with one
 * cost are interchangeable); -1 when none is left.
 */
function entryOf(entries: readonly SlidingLogEntry[], consumedAtMs: number, cost: number): number {
  let at = -1;
  for (let i = 0; i < entries.length; i++) {
    const [tMs, c] = entries[i]!;
    if (tMs >= consumedAtMs && c === cost && (at < 0 || tMs < entries[at]![0])) at = i;
  }
  return at;
}

/**
 * Settle (see `Algorithm.settle`): the reservation's entry keeps only `actual` units (it
 * goes at 0), while it is still in the log; an excess is a new entry stamped now (as an
 * admission is), as long as the log stays within `limit + maxDebt`. A log past the limit
 * denies until enough entries have expired.
 */
function settle(
  s: SlidingLogState | undefined,
  nowMs: number,
  reservedAtMs: number,
  estimate: number,
  actual: number,
  maxDebt: number,
  p: SlidingLogParams,
): Settlement<SlidingLogState> {
  const entries = live(s, nowMs, p);
  const delta = actual - estimate;
  let next: SlidingLogEntry[] | undefined;
  let cappedUnits = 0;
  if (delta < 0) {
    const at = entryOf(entries, reservedAtMs, estimate);
    if (at >= 0) {
      next = entries.filter((_, i) => i !== at);
      if (actual > 0) next.splice(at, 0, [entries[at]![0], actual]);
    }
  } else if (delta > 0) {
    const used = entries.reduce((sum, [, c]) => sum + c, 0);
    const charged = Math.max(0, Math.min(delta, p.limit + maxDebt - used));
    cappedUnits = delta - charged;
    next = [...entries];
    if (charged > 0) next.push([Math.max(nowMs, entries.at(-1)?.[0] ?? nowMs), charged]);
  }
  const held = next ?? entries;
  const used = held.reduce((sum, [, c]) => sum + c, 0);
  const newest = held.at(-1);
  return {
    state: next === undefined ? undefined : { entries: next },
    cappedUnits,
    debt: Math.max(0, used - p.limit),
    lifeMs: newest === undefined ? 0 : Math.ceil(Math.max(0, expiresAtMs(newest, p) - nowMs)),
  };
}

/**
 * Sliding log: at most `limit` units admitted in any `windowMs` interval — an exact
 * rolling limit with no boundary burst. An admitted request counts for exactly
 * `windowMs` after it was admitted.
 *
 * Memory: one entry per admitted request with cost > 0 in the last `windowMs`, so at
 * most `limit` entries per key (e.g. limit 10,000 can mean 10,000 entries), and every
 * transition reads the whole log. Meant for low-volume, audit-grade policies; prefer the
 * sliding window counter or token bucket for high limits.
 */
export const slidingLog: Algorithm<SlidingLogParams, SlidingLogState> = {
  kind: 'sliding-log',
  costs: {
    // Not benchmarked: it reads its whole set per decision and costs more with its limit, so
    // the token bucket's figure is a floor for it.
    redisCpuUsPerDecision: borrowedCpu(
      14.25,
      'redis/c64/zipf/tb/allow',
      "a floor: the token bucket's figure",
    ),
    redisBytesPerBucket: measuredBytes(217, 'sliding-log, 1 admitted'),
    redisBytesPerExtraUnit: {
      unit: 'B',
      value: 51.6,
      source: `${MEMORY_TABLE}, rows sliding-log 10 and 100 admitted: (5,268 − 626) / 90`,
    },
  },
  paramsSchema: windowParamsSchema,
  transition,
  ttlMs: (p) => p.windowMs,
  capacity: (p) => p.limit,
  luaCode: 6,
  scriptParams: (p) => [p.limit, p.windowMs, 0, 0],
  refillPerMs: () => 0,
  quota: (p) => ({ units: p.limit, windowMs: p.windowMs }),
  sustainedRate: (p) => ({
    perSecond: (p.limit * 1_000) / p.windowMs,
    atOnce: p.limit,
    windowMs: p.windowMs,
  }),
  refund: (s, _nowMs, consumedAtMs, cost) => {
    const at = entryOf(s.entries, consumedAtMs, cost);
    if (at < 0) return undefined;
    const next: SlidingLogEntry[] = s.entries.filter((_, i) => i !== at);
    return { entries: next };
  },
  settle,
  hasBurst: false,
  paramsFor: (units, periodMs) => ({ limit: units, window: periodMs }),
};
