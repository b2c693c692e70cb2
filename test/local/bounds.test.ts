import { describe, expect, it } from 'vitest';
import { parsePolicies } from '../../src/config/policies.js';
import { formatBounds, policyBounds } from '../../src/local/bounds.js';

const policy = (extra: Record<string, unknown>) =>
  parsePolicies([{ name: 'p', match: ['tenant'], rate: 100, burst: 20, ...extra }]).policies[0]!;

describe('policyBounds', () => {
  it('100 instances with a local burst of 20 let 2,000 through at once (the design notes)', () => {
    const b = policyBounds(policy({ local: { rate: 10, burst: 20 } }), 100);
    expect(b.fleetBurst).toEqual({ localStage: 2_000, storeUp: 20 });
    expect(formatBounds([b])).toContain(
      'local stages let through at once  2,000  (100 × local burst 20)',
    );
    // Store down: open lets the local stages decide; closed refuses; stale spends budgets.
    expect(b.storeDown).toEqual({
      open: { atOnce: 2_000, perSecond: 1_000 },
      closed: { atOnce: 0, perSecond: 0 },
      stale: { atOnce: 2_000, perSecond: 1_000 },
    });
    // 100 × (20 + 10/s) covers 20 + 100/s: no under-use when the load is spread evenly,
    // but for the 100/s the global bucket refills while checks hold local units in flight.
    expect(b.underUse).toEqual({ atOnce: 0, perSecond: 0, batchUnits: 0, perRoundTripMs: 0.1 });
    expect(b.overshootUnits).toBe(0);
  });

  it('batching holds N × size outside the owner, which stacks on the global burst', () => {
    const b = policyBounds(policy({ batch: { size: 10, ttl: '500ms' } }), 10, 50);
    expect(b.heldOutside).toBe(100);
    expect(b.fleetBurst).toEqual({ storeUp: 120 });
    expect(b.overshootUnits).toBe(100);
    expect(b.underUse.batchUnits).toBe(100);
    // 50 req/s within 100/s: one reservation per 10 units.
    expect(b.remoteCallsPerSecond).toBe(5);
    // Store down, open, no local stage: nothing limits.
    expect(b.storeDown.open).toEqual({ atOnce: null, perSecond: null });
  });

  it('a local rate below the global one is under-use, per second, even with the load spread', () => {
    const b = policyBounds(policy({ local: { rate: 5, burst: 1 } }), 10, 1_000);
    // 10 × 5/s = 50/s against 100/s; 10 × 1 at once against 20; the global 100/s refills
    // 0.1 per ms of a store round trip while local units wait on it.
    expect(b.underUse).toEqual({ atOnce: 10, perSecond: 50, batchUnits: 0, perRoundTripMs: 0.1 });
    expect(b.remoteCallsPerSecond).toBe(50);
  });

  it('over the limit with batching: admitted / size plus two calls per instance per size refilled', () => {
    // 1,000 req/s against 100/s on 4 instances: 100/10 + min(900, 2 × 4 × 100/10).
    const b = policyBounds(policy({ batch: { size: 10 } }), 4, 1_000);
    expect(b.remoteCallsPerSecond).toBe(90);
  });

  it('a local stage that binds after the global limit saves no calls (it gives units back)', () => {
    // 10 × 20/s = 200/s ≥ 100/s: the store sees every request that passes, all 1,000/s.
    const b = policyBounds(policy({ local: { rate: 20, burst: 20 } }), 10, 1_000);
    expect(b.remoteCallsPerSecond).toBe(1_000);
  });
});
