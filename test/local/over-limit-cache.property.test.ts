import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ALGORITHMS } from '../../src/algorithms/index.js';
import type { Policy } from '../../src/core/policy.js';
import type { AlgorithmKind } from '../../src/algorithms/index.js';
import { ALGORITHM_KINDS } from '../../src/algorithms/index.js';
import { OverLimitCache } from '../../src/local/over-limit-cache.js';
import { propertySeed } from '../support/property-seed.js';

/**
 * The over-limit cache never denies a request the global store would admit. The global
 * bucket is the algorithm's own transition; other instances take from it between this
 * instance's checks. Whenever the cache answers, the transition on the bucket as it is
 * at that instant must deny the same cost. Costs vary, so a smaller cost that fits
 * earlier is exercised (one unit below the last denial on purpose), and so are clocks
 * that step back. The seed is fixed in `npm test` and printed on failure (test/support/property-seed.ts).
 */

const userParams: Record<AlgorithmKind, fc.Arbitrary<Record<string, unknown>>> = {
  'token-bucket': fc.record({
    rate: fc.oneof(fc.integer({ min: 1, max: 50 }), fc.double({ min: 0.1, max: 50, noNaN: true })),
    period: fc.constantFrom(100, 1_000),
    burst: fc.integer({ min: 1, max: 20 }),
  }),
  gcra: fc.record({
    rate: fc.integer({ min: 1, max: 50 }),
    period: fc.constantFrom(100, 1_000),
    burst: fc.integer({ min: 1, max: 20 }),
  }),
  'leaky-bucket': fc.record({
    rate: fc.integer({ min: 1, max: 50 }),
    period: fc.constantFrom(100, 1_000),
    capacity: fc.integer({ min: 1, max: 20 }),
  }),
  'fixed-window': fc.record({
    limit: fc.integer({ min: 1, max: 20 }),
    window: fc.constantFrom(100, 250, 1_000),
  }),
  'sliding-log': fc.record({
    limit: fc.integer({ min: 1, max: 20 }),
    window: fc.constantFrom(100, 250, 1_000),
  }),
  'sliding-window-counter': fc.record({
    limit: fc.integer({ min: 1, max: 20 }),
    window: fc.constantFrom(100, 250, 1_000),
  }),
};

const step = fc.record({
  /** 'retry': come back exactly when the last store denial said to. */
  dtMs: fc.oneof(
    fc.integer({ min: 0, max: 300 }),
    fc.integer({ min: -30, max: 0 }),
    fc.constant('retry' as const),
  ),
  /**
   * A fraction of the capacity, so every algorithm gets costs from 0 to its capacity; or
   * 'over': one unit more than the bucket holds (denied, while one unit less fits); or
   * 'below': one unit less than the store last denied, the cost a cache that remembers
   * the wrong cost (or covers costs below it) would deny although it may fit. Both are
   * picked often, since a random share rarely lands there.
   */
  costShare: fc.oneof(
    { arbitrary: fc.double({ min: 0, max: 1, noNaN: true }), weight: 2 },
    { arbitrary: fc.constant('over' as const), weight: 1 },
    { arbitrary: fc.constant('below' as const), weight: 1 },
  ),
  /** Another instance's take from the same global bucket, before this check. */
  otherShare: fc.option(fc.double({ min: 0, max: 1, noNaN: true }), { nil: undefined }),
});

describe('OverLimitCache never denies what the global algorithm admits', () => {
  for (const kind of ALGORITHM_KINDS) {
    for (const charging of kind === 'fixed-window' ? [false, true] : [false]) {
      it(`${kind}${charging ? ' (denials charged)' : ''}`, () => {
        const algorithm = ALGORITHMS[kind];
        fc.assert(
          fc.property(
            userParams[kind],
            fc.array(step, { minLength: 1, maxLength: 40 }),
            (raw, steps) => {
              let params = algorithm.paramsSchema.parse(raw);
              if (charging) params = algorithm.chargingDenied!(params);
              const capacity = algorithm.capacity(params);
              const cache = new OverLimitCache({ maxBytes: 10_000 });
              const policy = { name: 'p', shadow: false } as Policy;
              let state: unknown = undefined;
              let nowMs = 1_700_000_000_000;
              let retryAtMs = nowMs;
              let deniedCost = 1;
              for (const s of steps) {
                nowMs = s.dtMs === 'retry' ? Math.max(nowMs, retryAtMs) : nowMs + s.dtMs;
                if (s.otherShare !== undefined) {
                  const other = Math.round(s.otherShare * capacity);
                  const t = algorithm.transition(state, nowMs, other, params);
                  if (t.decision.allowed || charging) state = t.state;
                }
                const held = () => algorithm.transition(state, nowMs, 0, params).decision.remaining;
                const cost =
                  s.costShare === 'below'
                    ? Math.max(0, deniedCost - 1)
                    : s.costShare === 'over'
                      ? Math.floor(held() + 1e-9) + 1
                      : Math.round(s.costShare * capacity);
                const item = { policy, key: 'k', capacity, cost };
                const verdict = cache.enter(item, { nowMs });
                const global = algorithm.transition(state, nowMs, cost, params);
                if (verdict !== undefined) {
                  expect(verdict.kind).toBe('answer');
                  expect(global.decision.allowed, `cache denied cost ${cost} at ${nowMs}`).toBe(
                    false,
                  );
                  continue;
                }
                if (global.decision.allowed || charging) state = global.state;
                if (!global.decision.allowed) {
                  retryAtMs = nowMs + global.decision.retryAfterMs;
                  deniedCost = cost;
                }
                cache.settle(
                  item,
                  undefined,
                  {
                    admitted: global.decision.allowed,
                    decision: { ...global.decision, policy: 'p', path: 'store' },
                  },
                  { nowMs },
                );
              }
            },
          ),
          { numRuns: 1_000, seed: propertySeed() },
        );
      });
    }
  }

  it('answers at all: a denial of cost 3 is cached for its retry time and covers costs ≥ 3', () => {
    const cache = new OverLimitCache({ maxBytes: 1_000 });
    const policy = { name: 'p', shadow: false } as Policy;
    const item = (cost: number) => ({ policy, key: 'k', capacity: 10, cost });
    cache.remember('k', 3, 1_000, {
      limit: 10,
      remaining: 1,
      retryAfterMs: 200,
      resetAfterMs: 900,
    });
    expect(cache.enter(item(3), { nowMs: 1_100 })).toEqual({
      kind: 'answer',
      decision: {
        status: 'OVER_LIMIT',
        allowed: false,
        limit: 10,
        remaining: 1,
        retryAfterMs: 100,
        resetAfterMs: 800,
      },
      path: 'cache',
    });
    // A smaller cost may fit now: it goes to the store.
    expect(cache.enter(item(2), { nowMs: 1_100 })).toBeUndefined();
    // At the retry time the entry is gone.
    expect(cache.enter(item(3), { nowMs: 1_200 })).toBeUndefined();
    expect(cache.size).toBe(0);
  });
});
