import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parsePolicies } from '../../src/config/policies.js';
import { ManualClock } from '../../src/core/clock.js';
import { toDescriptor } from '../../src/core/descriptor.js';
import { createLimiter } from '../../src/local/create-limiter.js';
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

/**
 * Policies where a record often matches exactly one policy with one identity key (the
 * memory store's value-index path): `{tenant}` alone, `{user}` alone (with a cost rule, a
 * key that needs encoding and a fixed value), and the same buckets again in batches.
 */
const singleSet = parsePolicies([
  { name: 'tenant', match: ['tenant'], rate: 5 },
  { name: 'tenant-route', match: ['tenant', 'route'], rate: 3 },
  {
    name: 'user',
    match: ['user id', { key: 'kind', value: 'x' }],
    rate: 10,
    cost: { rules: [{ when: { user: 'x' }, cost: 4 }] },
  },
  { name: 'route', match: ['route', 'user id'], identity: ['route'], rate: 4 },
]);
const SETS = [
  ['batches', policySet],
  ['single policies', singleSet],
] as const;

const value = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 12 }),
  fc.constantFrom('{x}', '}:{', ':', '=', '&', '%7B', '', 'POST /t', 'x', '__proto__'),
);
const record = fc.record(
  {
    tenant: value,
    route: value,
    user: value,
    'user id': value,
    kind: fc.oneof(fc.constant('x'), value),
  },
  { requiredKeys: [] },
);

/** Records over a few values, so one bucket is reached again and again, by any path. */
const few = fc.constantFrom('a', 'b c', 'x', 'POST /t');
const fewValues = fc.record(
  { tenant: few, route: few, user: few, 'user id': few, kind: few },
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

  it.each(SETS)(
    'give check() and checkSync() on a record, frozen or not, the results check() gives on the entry list (%s)',
    async (_, policySet) => {
      await fc.assert(
        fc.asyncProperty(fc.array(record, { minLength: 1, maxLength: 20 }), async (drawn) => {
          // Some records twice, so remembered descriptors and held buckets are exercised.
          const records = [...drawn, ...drawn.slice(0, 5)];
          const clock = new ManualClock(1_000);
          const viaRecord = createLimiter({ store: new MemoryStore(), policies: policySet, clock });
          const viaSync = createLimiter({ store: new MemoryStore(), policies: policySet, clock });
          const viaEntries = createLimiter({
            store: new MemoryStore(),
            policies: policySet,
            clock,
          });
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
    },
  );

  it.each(SETS)(
    'record checks on the value index and entry-list checks share buckets in one store (%s)',
    async (_, policySet) => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.tuple(fewValues, fc.nat(3)), { minLength: 1, maxLength: 40 }),
          async (drawn) => {
            const clock = new ManualClock(1_000);
            // One store, reached by every path: records (value index when one policy with one
            // identity key matches, else batches), entry lists (bucket keys as text), and
            // frozen records (remembered, with held buckets).
            const mixed = createLimiter({ store: new MemoryStore(), policies: policySet, clock });
            const reference = createLimiter({
              store: new MemoryStore(),
              policies: policySet,
              clock,
            });
            for (const [r, via] of drawn) {
              if (Object.keys(r).length === 0) continue;
              const entries = Object.entries(r).map(([key, v]) => ({ key, value: v }));
              const expected = await reference.check(entries);
              const got =
                via === 0
                  ? mixed.checkSync(r)
                  : via === 1
                    ? await mixed.check(entries)
                    : via === 2
                      ? mixed.checkSync(Object.freeze({ ...r }))
                      : await mixed.check(r, { requestId: `id-${clock.nowMs()}` });
              expect(got).toEqual(expected);
              clock.advance(3);
            }
          },
        ),
        { numRuns: 300 },
      );
    },
  );

  it('checkSync refuses a store that is not synchronous', () => {
    const store = new MemoryStore();
    const limiter = createLimiter({
      store: { apply: (b, o) => Promise.resolve(store.apply(b, o)), close: () => store.close() },
      policies: policySet,
    });
    expect(limiter.synchronous).toBe(false);
    expect(() => limiter.checkSync({ tenant: 'a' })).toThrow(TypeError);
  });
});
