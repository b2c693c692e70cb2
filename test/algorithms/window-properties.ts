/**
 * Properties shared by the three window algorithms (fixed window, sliding window counter,
 * sliding log), whose params are `{ limit, windowMs }`. Each `<name>.property.test.ts`
 * names its tests and calls these with its algorithm.
 */
import fc from 'fast-check';
import { expect } from 'vitest';
import type { Algorithm } from '../../src/algorithms/algorithm.js';
import type { WindowParams } from '../../src/algorithms/fixed-window.js';
import { describeInvariants, NUM_RUNS, run, scenarioArb } from './invariants.js';

export const windowParamsArb: fc.Arbitrary<WindowParams> = fc.record({
  limit: fc.integer({ min: 1, max: 1_000 }),
  windowMs: fc.constantFrom(1, 10, 1_000, 60_000, 3_600_000),
});

/** Window params with up to `maxLength` steps scaled to the window and the limit. */
export const windowScenario = (maxLength: number) =>
  scenarioArb(
    windowParamsArb,
    (p) => p.windowMs,
    (p) => p.limit,
    maxLength,
  );

/** Run starts: the harness's default, and a real clock reading (doubles ~2.4e-4 ms apart). */
const STARTS_MS = [1_000_000, 1_700_000_000_000] as const;
/** At least one ulp of `ms`. */
export const ulps = (ms: number): number => Math.max(1, Math.abs(ms)) * Number.EPSILON;

/** The invariants of docs/design.md#algorithms-and-their-invariants over window params. */
export function describeWindowInvariants<S>(alg: Algorithm<WindowParams, S>): void {
  describeInvariants(alg, windowParamsArb, (p) => p.windowMs);
}

/**
 * Admitted units per fixed window [w * windowMs, (w + 1) * windowMs) never exceed the
 * limit, also when time moves backwards.
 */
export function checkAtMostLimitPerFixedWindow<S>(alg: Algorithm<WindowParams, S>): void {
  fc.assert(
    fc.property(windowScenario(80), ({ params, steps }) => {
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
}

/**
 * Retry-after is exact: asked until denied, asking again at nowMs + retryAfterMs +
 * `lateMs` admits, and asking `earlierMs(params, nowMs)` before nowMs + retryAfterMs does
 * not (when the wait is longer than that).
 */
export function checkExactRetryAfter<S>(
  alg: Algorithm<WindowParams, S>,
  lateMs: number,
  earlierMs: (params: WindowParams, nowMs: number) => number,
): void {
  fc.assert(
    fc.property(
      windowScenario(40),
      fc.constantFrom(...STARTS_MS),
      fc.nat(),
      ({ params, steps }, startMs, c) => {
        const { state, nowMs } = run(alg, params, steps, startMs);
        const cost = 1 + (c % params.limit);
        // Ask until denied: each admission takes >= 1 unit, so a correct algorithm denies
        // within limit + 1 asks; the bound keeps a broken one from looping forever.
        let s: S | undefined = state;
        let d = alg.transition(s, nowMs, cost, params);
        for (let asks = 1; d.decision.allowed && asks <= params.limit; asks++) {
          s = d.state;
          d = alg.transition(s, nowMs, cost, params);
        }
        expect(d.decision.allowed).toBe(false);
        const retry = d.decision.retryAfterMs;
        expect(alg.transition(s, nowMs + retry + lateMs, cost, params).decision.allowed).toBe(true);
        const earlier = earlierMs(params, nowMs);
        if (retry > earlier) {
          expect(alg.transition(s, nowMs + retry - earlier, cost, params).decision.allowed).toBe(
            false,
          );
        }
      },
    ),
    { numRuns: NUM_RUNS },
  );
}
