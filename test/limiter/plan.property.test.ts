import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parsePolicies } from '../../src/config/policies.js';
import { ManualClock } from '../../src/core/clock.js';
import { toDescriptor } from '../../src/core/descriptor.js';
import { createLimiter } from '../../src/limiter/limiter.js';
import { PolicyPlans } from '../../src/limiter/plan.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import { bucketKey } from '../../src/stores/key.js';

// The limiter's fast path for record descriptors (compiled plans, keys built from the
// record) must give exactly what the general path (entry lists, bucketKey) gives.

const policySet = parsePolicies([
  { name: 'tenant', match: ['tenant'], rate: 5 },
  { name: 'tenant-route', match: ['tenant', 'route'], rate: 3 },
  { name: 'two-ids', match: ['tenant', 'user', 'route'], identity: ['user', 'tenant'], rate: 2 },
  { name: 'global', match: [{ key: 'kind', value: 'x' }], rate: 4 },
  { name: 'global-route', match: [{ key: 'kind', value: 'x' }, 'route'], identity: [], rate: 4 },
  {
    name: 'costly',
    match: ['tenant'],
    rate: 10,
    cost: { rules: [{ when: { route: 'POST /t' }, cost: 4 }] },
  },
]);
const policies = policySet.policies;

const value = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 12 }),
  fc.constantFrom('{x}', '}:{', ':', '=', '&', '%7B', '', 'POST /t', 'x', '__proto__'),
);
const record = fc.record(
  {
    tenant: value,
    route: value,
    user: value,
    kind: fc.oneof(fc.constant('x'), value),
  },
  { requiredKeys: [] },
);

describe('compiled policy plans', () => {
  it('build the same bucket keys as bucketKey, for every policy a record matches', () => {
    const plans = new PolicyPlans(policies);
    fc.assert(
      fc.property(record, (r) => {
        const keys = Object.keys(r);
        if (keys.length === 0) return;
        const d = toDescriptor(r);
        for (const plan of plans.forShape(keys)) {
          if (plan.fixed.some((f) => r[f.key as keyof typeof r] !== f.value)) continue;
          expect(plan.key(r)).toBe(bucketKey(plan.policy, d));
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('give check() and checkSync() on a record, frozen or not, the results check() gives on the entry list', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(record, { minLength: 1, maxLength: 20 }), async (drawn) => {
        // Some records twice, so remembered descriptors and held buckets are exercised.
        const records = [...drawn, ...drawn.slice(0, 5)];
        const clock = new ManualClock(1_000);
        const viaRecord = createLimiter({ store: new MemoryStore(), policies: policySet, clock });
        const viaSync = createLimiter({ store: new MemoryStore(), policies: policySet, clock });
        const viaEntries = createLimiter({ store: new MemoryStore(), policies: policySet, clock });
        // Frozen records, one object per distinct record, so repeats are remembered ones.
        const viaFrozen = createLimiter({ store: new MemoryStore(), policies: policySet, clock });
        const frozen = new Map<string, Readonly<Record<string, string>>>();
        for (const r of records) {
          if (Object.keys(r).length === 0) continue;
          const entries = Object.entries(r).map(([key, v]) => ({ key, value: v }));
          const expected = await viaEntries.check(entries);
          expect(await viaRecord.check(r)).toEqual(expected);
          expect(viaSync.checkSync(r)).toEqual(expected);
          const id = JSON.stringify(entries);
          if (!frozen.has(id)) frozen.set(id, Object.freeze({ ...r }));
          expect(viaFrozen.checkSync(frozen.get(id)!)).toEqual(expected);
          clock.advance(7);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('checkSync refuses a store that is not synchronous', () => {
    const store = new MemoryStore();
    const limiter = createLimiter({
      store: { apply: (b, o) => store.apply(b, o), close: () => store.close() },
      policies: policySet,
    });
    expect(limiter.synchronous).toBe(false);
    expect(() => limiter.checkSync({ tenant: 'a' })).toThrow(TypeError);
  });
});
