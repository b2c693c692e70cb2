import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { allocate, type Claim } from '../../src/quota/allocation.js';

const claimArb: fc.Arbitrary<Claim> = fc.record({
  // Rates in units per second, from a thousandth up (no subnormal dust).
  demand: fc.oneof(fc.constant(0), fc.double({ min: 1e-3, max: 1_000, noNaN: true })),
  weight: fc.oneof(fc.constant(1), fc.double({ min: 0.1, max: 10, noNaN: true })),
  priority: fc.integer({ min: 0, max: 2 }),
});
const caseArb = fc.record({
  budget: fc.oneof(fc.constant(0), fc.double({ min: 1e-3, max: 5_000, noNaN: true })),
  claims: fc.array(claimArb, { maxLength: 40 }),
});
const EPS = 1e-6;

describe('allocate: weighted max-min fairness with priority bands', () => {
  it('never shares out more than the budget, and nothing negative', () => {
    fc.assert(
      fc.property(caseArb, fc.boolean(), ({ budget, claims }, spread) => {
        const shares = allocate(budget, claims, { spreadLeftover: spread });
        expect(shares).toHaveLength(claims.length);
        for (const s of shares) expect(s).toBeGreaterThanOrEqual(0);
        expect(shares.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(budget);
      }),
      { numRuns: 2_000 },
    );
  });

  it('uses min(budget, total demand) and never gives a claim more than its demand (no spreading)', () => {
    fc.assert(
      fc.property(caseArb, ({ budget, claims }) => {
        const shares = allocate(budget, claims, { spreadLeftover: false });
        const demand = claims.reduce((a, c) => a + c.demand, 0);
        shares.forEach((s, i) => expect(s).toBeLessThanOrEqual(claims[i]!.demand + EPS));
        expect(shares.reduce((a, b) => a + b, 0)).toBeCloseTo(Math.min(budget, demand), 5);
      }),
      { numRuns: 2_000 },
    );
  });

  it('is max-min fair by weight inside a band: no claim has more per weight than one left short', () => {
    fc.assert(
      fc.property(caseArb, ({ budget, claims }) => {
        const shares = allocate(budget, claims, { spreadLeftover: false });
        claims.forEach((short, i) => {
          if (shares[i]! >= short.demand - EPS) return;
          claims.forEach((other, j) => {
            if (other.priority !== short.priority) return;
            expect(shares[j]! / other.weight).toBeLessThanOrEqual(shares[i]! / short.weight + EPS);
          });
        });
      }),
      { numRuns: 2_000 },
    );
  });

  it('serves higher priorities first: a band left short means nothing for the bands below', () => {
    fc.assert(
      fc.property(caseArb, ({ budget, claims }) => {
        const shares = allocate(budget, claims, { spreadLeftover: false });
        claims.forEach((short, i) => {
          if (shares[i]! >= short.demand - EPS) return;
          claims.forEach((lower, j) => {
            if (lower.priority < short.priority) expect(shares[j]).toBe(0);
          });
        });
      }),
      { numRuns: 2_000 },
    );
  });

  it('hands what no demand takes out by weight', () => {
    // Budget 100; demands 10 and 30 with weights 1 and 3: 60 left over, split 15/45.
    expect(
      allocate(100, [
        { demand: 10, weight: 1, priority: 0 },
        { demand: 30, weight: 3, priority: 0 },
      ]).map((s) => Math.round(s * 1e6) / 1e6),
    ).toEqual([25, 75]);
  });

  it('known answer: Doorman’s example (120 among wants 1000/50/10) is 60/50/10', () => {
    const shares = allocate(120, [
      { demand: 1000, weight: 1, priority: 0 },
      { demand: 50, weight: 1, priority: 0 },
      { demand: 10, weight: 1, priority: 0 },
    ]);
    expect(shares.map((s) => Math.round(s * 1e6) / 1e6)).toEqual([60, 50, 10]);
  });
});
