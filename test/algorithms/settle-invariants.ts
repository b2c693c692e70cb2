/**
 * Properties of `Algorithm.settle` (docs/costs.md), shared by every algorithm: the
 * invariants of docs/design.md ("Algorithms and their invariants") with a settle among the
 * steps, plus the debt bound. `settle.property.test.ts` runs them for each algorithm.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Algorithm, Settlement } from '../../src/algorithms/algorithm.js';
import {
  deepFreeze,
  expectSameDecision,
  forwardSteps,
  NUM_RUNS,
  run,
  stepsArb,
  type Step,
} from './invariants.js';

const EPS = 1e-6;

/** A history, then a reservation of `estimate` settled at `actual` after `settleDtMs`. */
interface SettleCase<P> {
  readonly params: P;
  readonly steps: Step[];
  readonly estimate: number;
  readonly actual: number;
  readonly maxDebt: number;
  readonly settleDtMs: number;
}

function settleCaseArb<P>(
  alg: Algorithm<P, unknown>,
  paramsArb: fc.Arbitrary<P>,
  scaleMs: (p: P) => number,
): fc.Arbitrary<SettleCase<P>> {
  return paramsArb.chain((params) => {
    const cap = alg.capacity(params);
    return fc.record({
      params: fc.constant(params),
      steps: stepsArb(scaleMs(params), cap, 20),
      estimate: fc.integer({ min: 1, max: cap }),
      // Below, at and above the estimate, up to three capacities (past any debt cap).
      actual: fc.oneof(
        fc.integer({ min: 0, max: cap }),
        fc.integer({ min: 0, max: 3 * cap }),
        fc.constant(0),
      ),
      maxDebt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 2 * cap }), fc.constant(cap)),
      settleDtMs: fc.oneof(
        fc.constant(0),
        fc.integer({ min: 0, max: scaleMs(params) }),
        fc.integer({ min: -scaleMs(params), max: 0 }),
      ),
    });
  });
}

/** A settlement's state as a store keeps it: the one before when there is nothing to write. */
function kept<S>(s: Settlement<S>, before: S | undefined): S | undefined {
  return s.state === undefined ? before : s.state;
}

/**
 * Registers the settle properties for one algorithm. `debtSlack` is how close the debt
 * must come to the exact figure: 1e-6 for exact counts, 1 for the sliding window counter
 * (whose charge is whole units against a fractional estimate).
 */
export function describeSettleInvariants<P, S>(
  alg: Algorithm<P, S>,
  paramsArb: fc.Arbitrary<P>,
  scaleMs: (p: P) => number,
  debtSlack = EPS,
): void {
  const cases = settleCaseArb(alg as Algorithm<P, unknown>, paramsArb, scaleMs);
  const opts = { numRuns: NUM_RUNS };
  const peek = (s: S | undefined, t: number, p: P) => alg.transition(s, t, 0, p).decision;

  /** The history's state and instant, and the reservation admitted there (or none). */
  const reserved = (c: SettleCase<P>, forward = false) => {
    const { state, nowMs } = run(alg, c.params, forward ? forwardSteps(c.steps) : c.steps);
    const t = nowMs;
    const r = alg.transition(state, t, c.estimate, c.params);
    return { state, t, r };
  };

  describe(`${alg.kind}: settle`, () => {
    it('at the reservation instant, consumes exactly the actual, or up to the debt cap and reports the rest', () => {
      fc.assert(
        fc.property(cases, (c) => {
          // Forward time: after a clock went back, a window algorithm charges the state's
          // later window, and a give-back by the reservation's instant finds nothing (it
          // then gives back less, never more: see the property below).
          const { state, t, r } = reserved(c, true);
          if (!r.decision.allowed) return;
          const before = peek(state, t, c.params).remaining;
          const s = alg.settle(
            deepFreeze(r.state),
            t,
            t,
            c.estimate,
            c.actual,
            c.maxDebt,
            c.params,
          );
          const after = peek(kept(s, r.state), t, c.params);
          if (c.actual <= before + EPS) {
            expect(after.remaining).toBeCloseTo(before - c.actual, 6);
            expect(s.debt).toBeLessThanOrEqual(EPS);
            expect(s.cappedUnits).toBeLessThanOrEqual(EPS);
          } else {
            expect(after.remaining).toBeLessThanOrEqual(debtSlack);
            const owed = c.actual - before;
            expect(Math.abs(s.debt - Math.min(owed, c.maxDebt))).toBeLessThanOrEqual(debtSlack);
            expect(Math.abs(s.cappedUnits - Math.max(0, owed - c.maxDebt))).toBeLessThanOrEqual(
              debtSlack,
            );
          }
        }),
        opts,
      );
    });

    it('the debt never passes maxDebt, and decisions stay well-formed (0 <= remaining <= limit)', () => {
      fc.assert(
        fc.property(cases, stepsArb(1_000, 5, 10), (c, later) => {
          const { t, r } = reserved(c);
          if (!r.decision.allowed) return;
          // Forward: GCRA keeps no "last seen" instant, so a clock gone back sees its TAT as
          // debt it never charged (docs/algorithms.md).
          const at = t + Math.abs(c.settleDtMs);
          const s = alg.settle(
            deepFreeze(r.state),
            at,
            t,
            c.estimate,
            c.actual,
            c.maxDebt,
            c.params,
          );
          expect(s.debt).toBeGreaterThanOrEqual(0);
          expect(s.debt).toBeLessThanOrEqual(c.maxDebt + EPS);
          expect(s.cappedUnits).toBeGreaterThanOrEqual(0);
          expect(s.lifeMs).toBeGreaterThanOrEqual(0);
          const after = run(alg, c.params, later, at, kept(s, r.state));
          for (const d of after.decisions) {
            expect(d.remaining).toBeGreaterThanOrEqual(0);
            expect(d.remaining).toBeLessThanOrEqual(d.limit + EPS);
            expect(d.retryAfterMs).toBeGreaterThanOrEqual(0);
            if (d.status === 'OVER_LIMIT') expect(d.retryAfterMs).toBeGreaterThan(0);
          }
        }),
        opts,
      );
    });

    it('later checks wait until the debt is repaid, and asking at nowMs + retryAfterMs admits', () => {
      fc.assert(
        fc.property(cases, fc.integer({ min: 1, max: 5 }), (c, k) => {
          const { t, r } = reserved(c);
          if (!r.decision.allowed) return;
          const s = alg.settle(
            deepFreeze(r.state),
            t,
            t,
            c.estimate,
            c.actual,
            c.maxDebt,
            c.params,
          );
          if (s.debt <= EPS) return;
          const cost = Math.min(k, alg.capacity(c.params));
          const denied = alg.transition(kept(s, r.state), t, cost, c.params);
          expect(denied.decision.allowed).toBe(false);
          const perMs = alg.refillPerMs(c.params);
          // A refilling bucket must first earn the debt back, then the cost.
          if (perMs > 0) {
            expect(denied.decision.retryAfterMs).toBeGreaterThanOrEqual(
              (s.debt + cost) / perMs - 1e-6 * (1 + (s.debt + cost) / perMs),
            );
          }
          const later = alg.transition(
            denied.state,
            t + denied.decision.retryAfterMs,
            cost,
            c.params,
          );
          expect(later.decision.allowed).toBe(true);
        }),
        opts,
      );
    });

    it('reserving and settling never leaves more capacity than not reserving, nor more than the maximum', () => {
      fc.assert(
        fc.property(cases, fc.integer({ min: 0, max: 3 }), (c, laterSteps) => {
          const { state, t, r } = reserved(c);
          if (!r.decision.allowed) return;
          const at = t + c.settleDtMs;
          const s = alg.settle(
            deepFreeze(r.state),
            at,
            t,
            c.estimate,
            c.actual,
            c.maxDebt,
            c.params,
          );
          const seen = Math.max(t, at) + laterSteps * (scaleMs(c.params) / 4);
          const settled = peek(kept(s, r.state), seen, c.params).remaining;
          expect(settled).toBeLessThanOrEqual(peek(state, seen, c.params).remaining + EPS);
          expect(settled).toBeLessThanOrEqual(alg.capacity(c.params) + EPS);
        }),
        opts,
      );
    });

    it('settling at the estimate changes no later decision', () => {
      fc.assert(
        fc.property(cases, stepsArb(1_000, 5, 10), (c, later) => {
          const { t, r } = reserved(c);
          if (!r.decision.allowed) return;
          const at = t + Math.abs(c.settleDtMs);
          const s = alg.settle(
            deepFreeze(r.state),
            at,
            t,
            c.estimate,
            c.estimate,
            c.maxDebt,
            c.params,
          );
          expect(s.cappedUnits).toBe(0);
          const a = run(alg, c.params, later, at, kept(s, r.state)).decisions;
          const b = run(alg, c.params, later, at, r.state).decisions;
          a.forEach((d, i) => expectSameDecision(d, b[i]!));
        }),
        opts,
      );
    });

    it('a settled state idle for max(ttlMs, lifeMs) decides like a fresh one', () => {
      fc.assert(
        fc.property(cases, fc.integer({ min: 0, max: 10_000 }), fc.nat(), (c, extraMs, k) => {
          const { t, r } = reserved(c);
          if (!r.decision.allowed) return;
          const at = t + Math.abs(c.settleDtMs);
          const s = alg.settle(
            deepFreeze(r.state),
            at,
            t,
            c.estimate,
            c.actual,
            c.maxDebt,
            c.params,
          );
          const idle = at + Math.max(alg.ttlMs(c.params), s.lifeMs) + extraMs;
          const cost = k % (alg.capacity(c.params) + 1);
          expectSameDecision(
            alg.transition(kept(s, r.state), idle, cost, c.params).decision,
            alg.transition(undefined, idle, cost, c.params).decision,
          );
        }),
        opts,
      );
    });
  });
}
