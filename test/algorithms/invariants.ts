/**
 * The invariants of docs/design.md#algorithms-and-their-invariants as fast-check properties, shared by every algorithm.
 * Each algorithm's `<name>.property.test.ts` calls `describeInvariants` with an
 * arbitrary for its params and adds its algorithm-specific properties.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Algorithm } from '../../src/algorithms/algorithm.js';
import type { AlgorithmDecision } from '../../src/core/decision.js';
import { dtArb } from '../support/time-steps.js';

export const NUM_RUNS = 1_000;
const EPS = 1e-6;

/** One step of a generated run: move time by `dtMs` (may be negative), then ask for `cost`. */
export interface Step {
  readonly dtMs: number;
  readonly cost: number;
}

export function deepFreeze<T>(v: T): T {
  if (typeof v === 'object' && v !== null && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const x of Object.values(v)) deepFreeze(x);
  }
  return v;
}

/** Steps whose time moves are scaled to `scaleMs` (the period/window) and costs to `capacity`. */
export function stepsArb(scaleMs: number, capacity: number, maxLength = 40): fc.Arbitrary<Step[]> {
  const dt = dtArb(scaleMs);
  const cost = fc.oneof(
    { weight: 5, arbitrary: fc.integer({ min: 1, max: Math.max(1, Math.min(capacity, 5)) }) },
    { weight: 2, arbitrary: fc.integer({ min: 0, max: capacity }) },
    { weight: 1, arbitrary: fc.constant(capacity) },
  );
  return fc.array(fc.record({ dtMs: dt, cost }), { minLength: 1, maxLength });
}

/** The same steps with time only moving forward (every dtMs made non-negative). */
export function forwardSteps(steps: readonly Step[]): Step[] {
  return steps.map((s) => ({ ...s, dtMs: Math.abs(s.dtMs) }));
}

/**
 * Generated params with steps scaled to them (`stepsArb`); with `forwardOnly`, time only
 * moves forward (`forwardSteps`).
 */
export function scenarioArb<P>(
  paramsArb: fc.Arbitrary<P>,
  scaleMs: (p: P) => number,
  capacity: (p: P) => number,
  maxLength?: number,
  forwardOnly = false,
): fc.Arbitrary<{ params: P; steps: Step[] }> {
  return paramsArb.chain((params) =>
    fc.record({
      params: fc.constant(params),
      steps: stepsArb(scaleMs(params), capacity(params), maxLength).map((steps) =>
        forwardOnly ? forwardSteps(steps) : steps,
      ),
    }),
  );
}

/** Up to 80 forward-only steps for params `{ periodMs, burst }` (token bucket, GCRA). */
export const forwardBurstScenario = <
  P extends { readonly periodMs: number; readonly burst: number },
>(
  paramsArb: fc.Arbitrary<P>,
) =>
  scenarioArb(
    paramsArb,
    (p) => p.periodMs,
    (p) => p.burst,
    80,
    true,
  );

export interface RunResult<S> {
  readonly state: S | undefined;
  /** The latest instant seen (time only moves forward from the state's point of view). */
  readonly maxNowMs: number;
  readonly nowMs: number;
  readonly decisions: readonly AlgorithmDecision[];
}

/** Applies steps from `startMs`, deep-freezing every state so a mutating transition throws. */
export function run<P, S>(
  alg: Algorithm<P, S>,
  params: P,
  steps: readonly Step[],
  startMs = 1_000_000,
  initial?: S,
): RunResult<S> {
  let state = initial;
  let nowMs = startMs;
  let maxNowMs = startMs;
  const decisions: AlgorithmDecision[] = [];
  for (const s of steps) {
    nowMs += s.dtMs;
    maxNowMs = Math.max(maxNowMs, nowMs);
    const t = alg.transition(
      state === undefined ? undefined : deepFreeze(state),
      nowMs,
      s.cost,
      params,
    );
    state = t.state;
    decisions.push(t.decision);
  }
  return { state, maxNowMs, nowMs, decisions };
}

export function expectSameDecision(a: AlgorithmDecision, b: AlgorithmDecision): void {
  expect(a.status).toBe(b.status);
  expect(a.allowed).toBe(b.allowed);
  expect(a.limit).toBe(b.limit);
  expect(a.remaining).toBeCloseTo(b.remaining, 6);
  expect(a.retryAfterMs).toBeCloseTo(b.retryAfterMs, 6);
  expect(a.resetAfterMs).toBeCloseTo(b.resetAfterMs, 6);
  expect(a.delayMs ?? 0).toBeCloseTo(b.delayMs ?? 0, 6);
}

/**
 * Same decision up to float rounding: units within 1e-6; waits within 1e-6 ms or, for waits
 * of days (rate 0.01 per hour), within 1e-12 of their size, since a double near 1e9 ms
 * only resolves 1.2e-7 ms and two algorithms may round differently.
 */
export function expectEquivalent(a: AlgorithmDecision, b: AlgorithmDecision): void {
  const closeMs = (x: number, y: number) =>
    expect(Math.abs(x - y)).toBeLessThanOrEqual(Math.max(1e-6, 1e-12 * Math.abs(y)));
  expect([a.status, a.allowed, a.limit]).toEqual([b.status, b.allowed, b.limit]);
  expect(Math.abs(a.remaining - b.remaining)).toBeLessThanOrEqual(1e-6);
  closeMs(a.retryAfterMs, b.retryAfterMs);
  closeMs(a.resetAfterMs, b.resetAfterMs);
}

/**
 * Registers the generic invariant properties for one algorithm.
 * @param scaleMs a time scale of the params (period or window) used to size time moves.
 */
export function describeInvariants<P, S>(
  alg: Algorithm<P, S>,
  paramsArb: fc.Arbitrary<P>,
  scaleMs: (p: P) => number,
): void {
  const scenario = scenarioArb(paramsArb, scaleMs, (p) => alg.capacity(p));
  const opts = { numRuns: NUM_RUNS };

  describe(`${alg.kind}: docs/design.md invariants`, () => {
    it('decisions are well-formed: 0 <= remaining <= limit = capacity, waits >= 0, allowed iff OK', () => {
      fc.assert(
        fc.property(scenario, ({ params, steps }) => {
          for (const d of run(alg, params, steps).decisions) {
            expect(d.limit).toBe(alg.capacity(params));
            expect(d.remaining).toBeGreaterThanOrEqual(0);
            expect(d.remaining).toBeLessThanOrEqual(d.limit + EPS);
            expect(d.retryAfterMs).toBeGreaterThanOrEqual(0);
            expect(d.resetAfterMs).toBeGreaterThanOrEqual(0);
            expect(d.allowed).toBe(d.status === 'OK');
            expect(['OK', 'OVER_LIMIT']).toContain(d.status);
            if (!d.allowed) expect(d.retryAfterMs).toBeGreaterThan(0);
            if (d.allowed) expect(d.retryAfterMs).toBe(0);
          }
        }),
        opts,
      );
    });

    it('an admitted cost is consumed exactly once; a denial consumes nothing', () => {
      fc.assert(
        fc.property(scenario, ({ params, steps }) => {
          const { state, nowMs } = run(alg, params, steps.slice(0, -1));
          const last = steps[steps.length - 1]!;
          const t = nowMs + last.dtMs;
          const before = alg.transition(state, t, 0, params);
          const act = alg.transition(before.state, t, last.cost, params);
          const after = alg.transition(act.state, t, 0, params);
          if (act.decision.allowed) {
            expect(after.decision.remaining).toBeCloseTo(
              Math.max(0, before.decision.remaining - last.cost),
              6,
            );
          } else {
            expect(after.decision.remaining).toBeCloseTo(before.decision.remaining, 9);
            expectSameDecision(
              alg.transition(act.state, t, last.cost, params).decision,
              act.decision,
            );
          }
        }),
        opts,
      );
    });

    it('a cost is admitted exactly when it fits the remaining capacity', () => {
      fc.assert(
        fc.property(scenario, ({ params, steps }) => {
          const { state, nowMs } = run(alg, params, steps.slice(0, -1));
          const last = steps[steps.length - 1]!;
          const t = nowMs + last.dtMs;
          const peek = alg.transition(state, t, 0, params).decision;
          const act = alg.transition(state, t, last.cost, params).decision;
          if (last.cost <= peek.remaining - EPS) expect(act.allowed).toBe(true);
          if (last.cost > peek.remaining + EPS) expect(act.allowed).toBe(false);
        }),
        opts,
      );
    });

    it('idle time refills to exactly full and never beyond', () => {
      fc.assert(
        fc.property(scenario, fc.integer({ min: 1, max: 1_000 }), ({ params, steps }, k) => {
          const { state, maxNowMs } = run(alg, params, steps);
          const cap = alg.capacity(params);
          const atTtl = alg.transition(state, maxNowMs + alg.ttlMs(params), 0, params).decision;
          const muchLater = alg.transition(
            state,
            maxNowMs + k * alg.ttlMs(params),
            0,
            params,
          ).decision;
          expect(atTtl.remaining).toBeCloseTo(cap, 6);
          expect(muchLater.remaining).toBeCloseTo(cap, 6);
          expect(muchLater.remaining).toBeLessThanOrEqual(cap + EPS);
        }),
        opts,
      );
    });

    it('after ttlMs idle, the state decides exactly like a fresh one (TTL recreation equals full)', () => {
      fc.assert(
        fc.property(
          scenario,
          fc.integer({ min: 0, max: 10_000 }),
          fc.nat(),
          ({ params, steps }, extraMs, c) => {
            const { state, maxNowMs } = run(alg, params, steps);
            const t = maxNowMs + alg.ttlMs(params) + extraMs;
            const cost = c % (alg.capacity(params) + 1);
            expectSameDecision(
              alg.transition(state, t, cost, params).decision,
              alg.transition(undefined, t, cost, params).decision,
            );
          },
        ),
        opts,
      );
    });

    it('time moving backwards creates no capacity', () => {
      fc.assert(
        fc.property(
          scenario,
          fc.integer({ min: 1, max: 10_000_000 }),
          fc.nat(),
          ({ params, steps }, backMs, c) => {
            const { state, maxNowMs } = run(alg, params, steps);
            const cost = c % (alg.capacity(params) + 1);
            const atMax = alg.transition(state, maxNowMs, cost, params);
            const earlier = alg.transition(state, maxNowMs - backMs, cost, params);
            expect(earlier.decision.remaining).toBeLessThanOrEqual(
              atMax.decision.remaining + (earlier.decision.allowed ? 0 : cost) + EPS,
            );
            if (earlier.decision.allowed) expect(atMax.decision.allowed).toBe(true);
            // Going back and forward again is never better than staying at maxNow.
            const back = alg.transition(state, maxNowMs - backMs, 0, params).state;
            const again = alg.transition(back, maxNowMs, 0, params).decision;
            const direct = alg.transition(state, maxNowMs, 0, params).decision;
            expect(again.remaining).toBeLessThanOrEqual(direct.remaining + EPS);
          },
        ),
        opts,
      );
    });

    for (const startMs of [1_000_000, 1_700_000_000_000.25]) {
      it(`retry-after is honest: asking again at nowMs + retryAfterMs admits (start ${startMs})`, () => {
        fc.assert(
          fc.property(scenario, ({ params, steps }) => {
            const { state, nowMs } = run(alg, params, steps.slice(0, -1), startMs);
            const last = steps[steps.length - 1]!;
            const t = nowMs + Math.max(0, last.dtMs);
            const denied = alg.transition(state, t, last.cost, params);
            if (denied.decision.allowed) return;
            const later = alg.transition(
              denied.state,
              t + denied.decision.retryAfterMs,
              last.cost,
              params,
            );
            expect(later.decision.allowed).toBe(true);
          }),
          opts,
        );
      });
    }

    it('a cost above capacity is INVALID_POLICY and changes nothing', () => {
      fc.assert(
        fc.property(scenario, fc.integer({ min: 1, max: 1_000 }), ({ params, steps }, over) => {
          const { state, nowMs } = run(alg, params, steps);
          const cap = alg.capacity(params);
          const t = alg.transition(state, nowMs, cap + over, params);
          expect(t.decision.status).toBe('INVALID_POLICY');
          expect(t.decision.allowed).toBe(false);
          // No wait makes it fit, but the state still refills or empties: its reset is
          // the one a read reports (an RLS answer's duration_until_reset), not 0.
          expect(t.decision.resetAfterMs).toBe(
            alg.transition(state, nowMs, 0, params).decision.resetAfterMs,
          );
          expectSameDecision(
            alg.transition(t.state, nowMs, 0, params).decision,
            alg.transition(state, nowMs, 0, params).decision,
          );
        }),
        opts,
      );
    });
  });
}
