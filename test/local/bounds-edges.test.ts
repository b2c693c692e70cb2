import { describe, expect, it } from 'vitest';
import { parsePolicies } from '../../src/config/policies.js';
import { formatBounds, policyBounds } from '../../src/local/bounds.js';

/**
 * policyBounds' optional fields (present exactly when their setting is) and the ties
 * between the local stages and the global policy (bounds.ts).
 */

const policy = (extra: Record<string, unknown>) =>
  parsePolicies([{ name: 'p', match: ['tenant'], rate: 100, burst: 20, ...extra }]).policies[0]!;

describe('policyBounds fields', () => {
  it('has no local, batch, rps or remote-call fields for a policy with neither stage and no rate given', () => {
    const b = policyBounds(policy({}), 10);
    expect(Object.keys(b).sort()).toEqual(
      [
        'policy',
        'summary',
        'instances',
        'global',
        'fleetBurst',
        'heldOutside',
        'overshootUnits',
        'underUse',
        'storeDown',
        'sections',
      ].sort(),
    );
    expect(Object.keys(b.fleetBurst)).toEqual(['storeUp']);
    // No local stage: no local units wait on a store round trip.
    expect(b.underUse.perRoundTripMs).toBe(0);
  });

  it('has each of them when the policy has both stages and a rate is given', () => {
    const b = policyBounds(
      policy({ local: { rate: 5, burst: 1 }, batch: { size: 10, ttl: '500ms' } }),
      10,
      50,
    );
    expect(b).toMatchObject({
      global: { atOnce: 20, perSecond: 100 },
      rps: 50,
      local: { atOnce: 1, perSecond: 5 },
      batch: { size: 10, ttlMs: 500 },
      fleetBurst: { localStage: 10, storeUp: 10 },
      remoteCallsPerSecond: 5,
    });
    // The same policy with no rate given: no remote calls to tell.
    const noRps = policyBounds(
      policy({ local: { rate: 5, burst: 1 }, batch: { size: 10, ttl: '500ms' } }),
      10,
    );
    expect('remoteCallsPerSecond' in noRps || 'rps' in noRps).toBe(false);
  });
});

describe('policyBounds, local stages level with the global policy', () => {
  it('a fleet local burst equal to the global burst does not cap it', () => {
    const b = policyBounds(policy({ local: { rate: 100, burst: 10 } }), 2);
    expect(b.fleetBurst).toEqual({ localStage: 20, storeUp: 20 });
    const text = formatBounds([b]);
    expect(text).toContain('(global burst 20)');
    expect(text).not.toContain('capped by the local stages');
  });

  it('a fleet local rate equal to the global rate binds only above it: every request reaches the store', () => {
    const b = policyBounds(policy({ local: { rate: 10, burst: 20 } }), 10, 1_000);
    expect(b.remoteCallsPerSecond).toBe(1_000);
    expect(formatBounds([b])).toContain('local stages bind only above 100/s admitted');
  });
});
