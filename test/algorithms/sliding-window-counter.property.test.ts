import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  slidingWindowCounter,
  type SlidingWindowCounterParams,
  type SlidingWindowCounterState,
} from '../../src/algorithms/sliding-window-counter.js';
import { describeInvariants, NUM_RUNS, run, stepsArb } from './invariants.js';

const alg = slidingWindowCounter;

const paramsArb: fc.Arbitrary<SlidingWindowCounterParams> = fc.record({
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

describeInvariants(alg, paramsArb, (p) => p.windowMs);

describe('sliding-window-counter: specific properties', () => {
  it('admits at most limit within any one fixed window, also when time moves backwards', () => {
    fc.assert(
      fc.property(scenario(80), ({ params, steps }) => {
        const r = run(alg, params, steps);
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

  it('retry-after is exact: asking at exactly nowMs + retryAfterMs admits, a moment earlier does not', () => {
    fc.assert(
      fc.property(
        scenario(40),
        fc.constantFrom(...STARTS_MS),
        fc.nat(),
        ({ params, steps }, startMs, c) => {
          const { state, nowMs } = run(alg, params, steps, startMs);
          const cost = 1 + (c % params.limit);
          // Ask until denied: each admission takes >= 1 unit, so a correct algorithm denies
          // within limit + 1 asks; the bound keeps a broken one from looping forever.
          let s: SlidingWindowCounterState | undefined = state;
          let d = alg.transition(s, nowMs, cost, params);
          for (let asks = 1; d.decision.allowed && asks <= params.limit; asks++) {
            s = d.state;
            d = alg.transition(s, nowMs, cost, params);
          }
          expect(d.decision.allowed).toBe(false);
          const retry = d.decision.retryAfterMs;
          expect(alg.transition(s, nowMs + retry, cost, params).decision.allowed).toBe(true);
          // The estimate falls >= 1 unit per window, so 1e-6 of a window earlier it is >= 1e-6
          // units too high (far above FIT_EPSILON); plus a few ulps of the instant, which is
          // all the rounding margin retry-after may add.
          const earlierMs = 1e-6 * params.windowMs + 16 * ulps(nowMs);
          if (retry > earlierMs) {
            expect(
              alg.transition(s, nowMs + retry - earlierMs, cost, params).decision.allowed,
            ).toBe(false);
          }
        },
      ),
      { numRuns: NUM_RUNS },
    );
  });
});
