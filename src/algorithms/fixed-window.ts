import { z } from 'zod';
import { benchedCpu, measuredBytes } from './costs.js';
import {
  decide,
  type DecisionCell,
  pureTransition,
  unfittable,
  waitUntil,
  type Algorithm,
  type InPlaceStep,
  type Settlement,
  type Writable,
} from './algorithm.js';
import { capacityUnits, durationMs } from './params.js';

/**
 * Parameters (validated) shared by the window algorithms: fixed window, sliding log and
 * sliding window counter.
 */
export interface WindowParams {
  /** The most units admitted per window. */
  readonly limit: number;
  /** Window length. Windows are epoch-aligned: window `w` is `[w * windowMs, (w + 1) * windowMs)`. */
  readonly windowMs: number;
}

/** Fixed window parameters (validated). */
export interface FixedWindowParams extends WindowParams {
  /**
   * Denied requests are charged too (`fixedWindow.chargingDenied`, never a policy field):
   * the count can pass `limit`, and the window then denies until it ends.
   */
  readonly chargeDenied?: true;
}

/**
 * Fixed window state: units counted in window number `window` (`floor(nowMs / windowMs)`).
 * The count is at most `limit`, unless denied requests are charged.
 */
export interface FixedWindowState {
  readonly window: number;
  readonly count: number;
}

/** Strict schema of the window algorithms' user-facing fields. */
export const windowParamsSchema = z
  .object({
    /** Units admitted per window, e.g. 100. Required. */
    limit: capacityUnits,
    /** The window length, e.g. `"1s"` or `1000`. Required. */
    window: durationMs,
  })
  .strict()
  .transform((p): WindowParams => ({ limit: p.limit, windowMs: p.window }));

function step(
  state: FixedWindowState | undefined,
  nowMs: number,
  cost: number,
  p: FixedWindowParams,
  next: Writable<FixedWindowState>,
  out: DecisionCell,
): void {
  const nowWindow = Math.floor(nowMs / p.windowMs);
  // A later window starts empty. An earlier one (time went backwards) is read as the
  // state's window, count kept: stepping back over a boundary must not reopen a window
  // that was already spent, nor forget the later window's count.
  const window = state === undefined ? nowWindow : Math.max(state.window, nowWindow);
  const count = state !== undefined && state.window === window ? state.count : 0;
  // From the effective window, so after backwards time this can exceed windowMs.
  const untilEndMs = waitUntil(nowMs, (window + 1) * p.windowMs);
  next.window = window;
  next.count = count;

  const charge = p.chargeDenied === true;
  if (cost > p.limit && !charge) {
    unfittable(out, p.limit, Math.max(0, p.limit - count), count > 0 ? untilEndMs : 0);
    return;
  }
  // Counts are whole units, so the comparison is exact: no FIT_EPSILON.
  if (count + cost <= p.limit) {
    const used = count + cost;
    next.count = used;
    decide(out, 'OK', p.limit, p.limit - used, 0, used > 0 ? untilEndMs : 0);
    return;
  }
  // A denial reports the capacity it found (none, once a charged count passed the limit).
  const found = Math.max(0, p.limit - count);
  if (charge) {
    next.count = count + cost;
    // A cost above the limit never fits; any other fits the next window, which starts empty.
    const retryMs = cost > p.limit ? Infinity : untilEndMs;
    decide(out, 'OVER_LIMIT', p.limit, found, retryMs, untilEndMs);
    return;
  }
  decide(out, 'OVER_LIMIT', p.limit, found, untilEndMs, count > 0 ? untilEndMs : 0);
}

/** The refund: only the window the units were taken in holds them; a later one never did. */
function refund(
  s: FixedWindowState,
  consumedAtMs: number,
  cost: number,
  p: FixedWindowParams,
): FixedWindowState | undefined {
  return s.window === Math.floor(consumedAtMs / p.windowMs)
    ? { window: s.window, count: Math.max(0, s.count - cost) }
    : undefined;
}

/**
 * Settle (see `Algorithm.settle`): `estimate - actual` comes back from the reservation's
 * window while that window lasts (the refund); an excess is charged to the window of
 * `nowMs`, up to `limit + maxDebt`. A count past the limit denies until its window ends,
 * so a fixed window's debt is never carried into the next window.
 */
function settle(
  s: FixedWindowState | undefined,
  nowMs: number,
  reservedAtMs: number,
  estimate: number,
  actual: number,
  maxDebt: number,
  p: FixedWindowParams,
): Settlement<FixedWindowState> {
  const delta = actual - estimate;
  const nowWindow = Math.floor(nowMs / p.windowMs);
  let next: FixedWindowState | undefined;
  let cappedUnits = 0;
  if (delta < 0) next = s === undefined ? undefined : refund(s, reservedAtMs, -delta, p);
  else if (delta > 0) {
    // As a transition reads it: a later window starts empty, an earlier one is the state's.
    const window = s === undefined ? nowWindow : Math.max(s.window, nowWindow);
    const count = s !== undefined && s.window === window ? s.count : 0;
    const wanted = count + delta;
    const charged = Math.max(count, Math.min(wanted, p.limit + maxDebt));
    cappedUnits = wanted - charged;
    next = { window, count: charged };
  }
  const held = next ?? s;
  const lifeMs = held === undefined ? 0 : Math.max(0, (held.window + 1) * p.windowMs - nowMs);
  const debt = next !== undefined && next.window >= nowWindow ? next.count - p.limit : 0;
  return { state: next, cappedUnits, debt: Math.max(0, debt), lifeMs: Math.ceil(lifeMs) };
}

const inPlace: InPlaceStep<FixedWindowParams, FixedWindowState> = {
  step,
  blank: () => ({ window: 0, count: 0 }),
  copy: (from, to) => {
    to.window = from.window;
    to.count = from.count;
  },
};

/**
 * Fixed window: at most `limit` units per epoch-aligned window of `windowMs`; the count
 * resets when a new window starts. One counter per key, the cheapest algorithm; but a
 * client can spend a full window's limit just before a boundary and again just after it,
 * so up to 2x `limit` can pass within a few milliseconds (token bucket and the sliding
 * algorithms do not have this boundary burst).
 */
export const fixedWindow: Algorithm<FixedWindowParams, FixedWindowState> = {
  kind: 'fixed-window',
  costs: {
    redisCpuUsPerDecision: benchedCpu(15.95, 'redis/c64/zipf/fw/allow'),
    redisBytesPerBucket: measuredBytes(189, 'fixed-window'),
  },
  paramsSchema: windowParamsSchema,
  transition: pureTransition(inPlace),
  ttlMs: (p) => p.windowMs,
  capacity: (p) => p.limit,
  chargingDenied: (p) => Object.freeze({ ...p, chargeDenied: true as const }),
  chargesDenied: (p) => p.chargeDenied === true,
  inPlace,
  luaCode: 4,
  scriptParams: (p) => [p.limit, p.windowMs, p.chargeDenied === true ? 1 : 0, 0],
  refillPerMs: () => 0,
  quota: (p) => ({ units: p.limit, windowMs: p.windowMs }),
  // Twice the limit can pass across a window boundary.
  sustainedRate: (p) => ({
    perSecond: (p.limit * 1_000) / p.windowMs,
    atOnce: 2 * p.limit,
    windowMs: p.windowMs,
  }),
  refund: (s, _nowMs, consumedAtMs, cost, p) => refund(s, consumedAtMs, cost, p),
  settle,
  hasBurst: false,
  paramsFor: (units, periodMs) => ({ limit: units, window: periodMs }),
};
