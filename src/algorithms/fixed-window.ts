import { z } from 'zod';
import {
  decide,
  type DecisionCell,
  pureTransition,
  unfittable,
  waitUntil,
  type Algorithm,
  type InPlaceStep,
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
export type FixedWindowParams = WindowParams;

/** Fixed window state: units admitted in window number `window` (`floor(nowMs / windowMs)`). */
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

  if (cost > p.limit) {
    unfittable(out, p.limit, p.limit - count);
    return;
  }
  // Counts are whole units, so the comparison is exact: no FIT_EPSILON.
  if (count + cost <= p.limit) {
    const used = count + cost;
    next.count = used;
    decide(out, 'OK', p.limit, p.limit - used, 0, used > 0 ? untilEndMs : 0);
    return;
  }
  // The next window starts empty and cost <= limit, so it fits then.
  decide(out, 'OVER_LIMIT', p.limit, p.limit - count, untilEndMs, count > 0 ? untilEndMs : 0);
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
  paramsSchema: windowParamsSchema,
  transition: pureTransition(inPlace),
  ttlMs: (p) => p.windowMs,
  capacity: (p) => p.limit,
  inPlace,
};
