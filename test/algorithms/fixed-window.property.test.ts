import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  fixedWindow,
  type FixedWindowParams,
  type FixedWindowState,
} from '../../src/algorithms/fixed-window.js';
import { describeInvariants, NUM_RUNS, run, stepsArb } from './invariants.js';

const paramsArb: fc.Arbitrary<FixedWindowParams> = fc.record({
  limit: fc.integer({ min: 1, max: 1_000 }),
  windowMs: fc.constantFrom(1, 10, 1_000, 60_000, 3_600_000),
});

const scenario = (maxLength: number) =>
  paramsArb.chain((params) =>
    fc.record({
      params: fc.constant(params),
      steps: stepsArb(params.windowMs, params.limit, maxLength),
    }),
  );

/** Run starts: the harness's default, and a real clock reading (doubles ~2.4e-4 ms apart). */
const STARTS_MS = [1_000_000, 1_700_000_000_000] as const;
/** At least one ulp of `ms`. */
const ulps = (ms: number): number => Math.max(1, Math.abs(ms)) * Number.EPSILON;

describeInvariants(fixedWindow, paramsArb, (p) => p.windowMs);

describe('fixed-window: specific properties', () => {
  it('admits at most limit per window, also when time moves backwards', () => {
    fc.assert(
      fc.property(scenario(80), ({ params, steps }) => {
        const r = run(fixedWindow, params, steps);
        // Backwards time is charged to the latest window seen, as the algorithm does.
        const admitted = new Map<number, number>();
        let nowMs = 1_000_000;
        let latestMs = -Infinity;
        steps.forEach((s, i) => {
          nowMs += s.dtMs;
          latestMs = Math.max(latestMs, nowMs);
          const w = Math.floor(latestMs / params.windowMs);
          if (r.decisions[i]!.allowed) admitted.set(w, (admitted.get(w) ?? 0) + s.cost);
        });
        for (const units of admitted.values()) expect(units).toBeLessThanOrEqual(params.limit);
      }),
      { numRuns: NUM_RUNS },
    );
  });

  it('retry-after is exact: asking at nowMs + retryAfterMs (+1e-6 ms) admits, a moment earlier does not', () => {
    fc.assert(
      fc.property(
        scenario(40),
        fc.constantFrom(...STARTS_MS),
        fc.nat(),
        ({ params, steps }, startMs, c) => {
          const { state, nowMs } = run(fixedWindow, params, steps, startMs);
          const cost = 1 + (c % params.limit);
          // Ask until denied: each admission takes >= 1 unit, so a correct algorithm denies
          // within limit + 1 asks; the bound keeps a broken one from looping forever.
          let s: FixedWindowState | undefined = state;
          let d = fixedWindow.transition(s, nowMs, cost, params);
          for (let asks = 1; d.decision.allowed && asks <= params.limit; asks++) {
            s = d.state;
            d = fixedWindow.transition(s, nowMs, cost, params);
          }
          expect(d.decision.allowed).toBe(false);
          const retry = d.decision.retryAfterMs;
          expect(
            fixedWindow.transition(s, nowMs + retry + 1e-6, cost, params).decision.allowed,
          ).toBe(true);
          // 1e-6 ms earlier, or a few ulps at clock scale where 1e-6 ms is below the spacing.
          const earlierMs = 1e-6 + 16 * ulps(nowMs);
          if (retry > earlierMs) {
            expect(
              fixedWindow.transition(s, nowMs + retry - earlierMs, cost, params).decision.allowed,
            ).toBe(false);
          }
        },
      ),
      { numRuns: NUM_RUNS },
    );
  });

  it('lets 2x limit through across a boundary: 100 at t=999ms and 100 at t=1000ms (limit 100/1s)', () => {
    const params = fixedWindow.paramsSchema.parse({ limit: 100, window: '1s' });
    let state: FixedWindowState | undefined;
    let admitted = 0;
    for (const nowMs of [999, 1_000]) {
      for (let i = 0; i < 100; i++) {
        const t = fixedWindow.transition(state, nowMs, 1, params);
        state = t.state;
        if (t.decision.allowed) admitted++;
      }
    }
    // Window 0 = [0, 1000) takes 100 at 999; window 1 starts empty at 1000 and takes 100.
    expect(admitted).toBe(200);
  });
});
