import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  slidingLog,
  type SlidingLogParams,
  type SlidingLogState,
} from '../../src/algorithms/sliding-log.js';
import { describeInvariants, NUM_RUNS, run, stepsArb } from './invariants.js';

const paramsArb: fc.Arbitrary<SlidingLogParams> = fc.record({
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

describeInvariants(slidingLog, paramsArb, (p) => p.windowMs);

describe('sliding-log: specific properties', () => {
  it('exact rolling limit: for each admitted request at t, admitted cost in (t - window, t] <= limit', () => {
    fc.assert(
      fc.property(scenario(80), ({ params, steps }) => {
        const forward = steps.map((s) => ({ ...s, dtMs: Math.abs(s.dtMs) }));
        const r = run(slidingLog, params, forward, 0);
        const admitted: { tMs: number; cost: number }[] = [];
        let nowMs = 0;
        forward.forEach((s, i) => {
          nowMs += s.dtMs;
          if (r.decisions[i]!.allowed) admitted.push({ tMs: nowMs, cost: s.cost });
        });
        for (const { tMs } of admitted) {
          // `u.tMs + windowMs > tMs` rather than `u.tMs > tMs - windowMs`: the same double
          // arithmetic as the algorithm's expiry, so float rounding cannot disagree.
          const inWindow = admitted.filter((u) => u.tMs <= tMs && u.tMs + params.windowMs > tMs);
          expect(inWindow.reduce((sum, u) => sum + u.cost, 0)).toBeLessThanOrEqual(params.limit);
        }
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
          const { state, nowMs } = run(slidingLog, params, steps, startMs);
          const cost = 1 + (c % params.limit);
          // Ask until denied: each admission takes >= 1 unit, so a correct algorithm denies
          // within limit + 1 asks; the bound keeps a broken one from looping forever.
          let s: SlidingLogState | undefined = state;
          let d = slidingLog.transition(s, nowMs, cost, params);
          for (let asks = 1; d.decision.allowed && asks <= params.limit; asks++) {
            s = d.state;
            d = slidingLog.transition(s, nowMs, cost, params);
          }
          expect(d.decision.allowed).toBe(false);
          const retry = d.decision.retryAfterMs;
          expect(
            slidingLog.transition(s, nowMs + retry + 1e-6, cost, params).decision.allowed,
          ).toBe(true);
          // 1e-6 ms earlier, or a few ulps at clock scale where 1e-6 ms is below the spacing.
          const earlierMs = 1e-6 + 16 * ulps(nowMs);
          if (retry > earlierMs) {
            expect(
              slidingLog.transition(s, nowMs + retry - earlierMs, cost, params).decision.allowed,
            ).toBe(false);
          }
        },
      ),
      { numRuns: NUM_RUNS },
    );
  });

  it('the log stays sorted by time and never holds more than limit entries', () => {
    fc.assert(
      fc.property(scenario(80), ({ params, steps }) => {
        let state: SlidingLogState | undefined;
        let nowMs = 1_000_000;
        for (const s of steps) {
          nowMs += s.dtMs;
          state = slidingLog.transition(state, nowMs, s.cost, params).state;
          expect(state.entries.length).toBeLessThanOrEqual(params.limit);
          state.entries.forEach(([tMs], i) => {
            if (i > 0) expect(tMs).toBeGreaterThanOrEqual(state!.entries[i - 1]![0]);
          });
        }
      }),
      { numRuns: NUM_RUNS },
    );
  });
});
