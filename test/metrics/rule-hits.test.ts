import { describe, expect, it } from 'vitest';
import { nearLimitThreshold, ruleHits, type RuleOutcome } from '../../src/metrics/rule-hits.js';
import { ruleMetricKey } from '../../src/metrics/rule-key.js';

type Row = [
  limit: number,
  usedBefore: number,
  hits: number,
  expected: Partial<Record<RuleOutcome, number>>,
];

describe('ruleHits', () => {
  // The rows of envoyproxy/ratelimit's test/redis/fixed_cache_impl_test.go (TestNearLimit),
  // one check each: upstream's mock answers INCRBY with the count after the hits, so
  // usedBefore = after − hits. Ratio 0.8.
  const upstream: Row[] = [
    // limit 15 → threshold floor(12.0) = 12. 10 + 1 = 11 ≤ 12: within only.
    [15, 10, 1, { within_limit: 1 }],
    // 12 + 1 = 13 > 12, and 12 ≥ 12 already: the hit is near.
    [15, 12, 1, { within_limit: 1, near_limit: 1 }],
    // 15 + 1 = 16 > 15 with 15 ≥ 15 already used: the whole hit is over.
    [15, 15, 1, { over_limit: 1 }],
    // limit 20 → 16. 2 + 3 = 5: within.
    [20, 2, 3, { within_limit: 3 }],
    // limit 8 → floor(6.4) = 6. 5 + 2 = 7 > 6 from 5 < 6: 7 − 6 = 1 near.
    [8, 5, 2, { within_limit: 2, near_limit: 1 }],
    // 16 + 3 = 19 > 16 from 16 ≥ 16: all 3 near.
    [20, 16, 3, { within_limit: 3, near_limit: 3 }],
    // 19 + 3 = 22 > 20: 22 − 20 = 2 over, 20 − max(16, 19) = 1 near, none within.
    [20, 19, 3, { over_limit: 2, near_limit: 1 }],
    // 15 + 7 = 22: 2 over, 20 − max(16, 15) = 4 near.
    [20, 15, 7, { over_limit: 2, near_limit: 4 }],
    // limit 10: 27 + 3 = 30 with 27 ≥ 10 already: all 3 over.
    [10, 27, 3, { over_limit: 3 }],
  ];

  it.each(upstream)(
    'limit %d, %d used, %d hits (upstream rows)',
    (limit, usedBefore, hits, expected) => {
      expect(ruleHits({ limit, usedBefore, hits })).toEqual({
        total_hits: hits,
        over_limit: 0,
        near_limit: 0,
        within_limit: 0,
        shadow_mode: 0,
        ...expected,
      });
    },
  );

  it('counts shadow_mode as the over-limit hits of a shadow rule', () => {
    // limit 10 → 8: 5 + 10 = 15, 5 over, 10 − 8 = 2 near; shadow mirrors over.
    expect(ruleHits({ limit: 10, usedBefore: 5, hits: 10, shadow: true })).toEqual({
      total_hits: 10,
      over_limit: 5,
      near_limit: 2,
      within_limit: 0,
      shadow_mode: 5,
    });
    // Already full: every hit is over, and shadow.
    expect(ruleHits({ limit: 10, usedBefore: 12, hits: 4, shadow: true }).shadow_mode).toBe(4);
    // Within limit: shadow mode counts nothing.
    expect(ruleHits({ limit: 10, usedBefore: 0, hits: 4, shadow: true }).shadow_mode).toBe(0);
  });

  it('counts a zero-hit check (hits_addend 0) in no outcome', () => {
    expect(ruleHits({ limit: 10, usedBefore: 10, hits: 0 })).toEqual({
      total_hits: 0,
      over_limit: 0,
      near_limit: 0,
      within_limit: 0,
      shadow_mode: 0,
    });
  });

  it('uses the given near-limit ratio', () => {
    // ratio 0.5, limit 10 → 5: 4 + 2 = 6 > 5 from 4 < 5: 1 near.
    expect(ruleHits({ limit: 10, usedBefore: 4, hits: 2 }, 0.5).near_limit).toBe(1);
  });

  it('rejects negative and non-finite numbers', () => {
    expect(() => ruleHits({ limit: 10, usedBefore: -1, hits: 1 })).toThrow(RangeError);
    expect(() => ruleHits({ limit: 10, usedBefore: 0, hits: Number.NaN })).toThrow(/hits/);
    expect(() => ruleHits({ limit: Infinity, usedBefore: 0, hits: 1 })).toThrow(/limit/);
  });
});

describe('nearLimitThreshold', () => {
  it.each([
    [15, 0.8, 12],
    [8, 0.8, 6], // 6.4
    [5, 0.8, 4], // float32(5) × float32(0.8) = 4.0000000596…, floored
    [1, 0.8, 0],
    [0, 0.8, 0],
    [7, 0.5, 3],
    [100, 1, 100],
  ])('limit %d × %d → %d', (limit, ratio, expected) => {
    expect(nearLimitThreshold(limit, ratio)).toBe(expected);
  });
});

describe('ruleMetricKey', () => {
  const parts = [
    { key: 'tenant', value: 'acme', valueInConfig: false },
    { key: 'path', value: '/login', valueInConfig: true },
    { key: 'remote_address', value: '10.0.0.1', valueInConfig: false },
  ];

  it('keeps only the values the configuration names', () => {
    expect(ruleMetricKey(parts)).toBe('tenant.path_/login.remote_address');
  });

  it('puts every request value in a detailed key', () => {
    expect(ruleMetricKey(parts, true)).toBe('tenant_acme.path_/login.remote_address_10.0.0.1');
    expect(ruleMetricKey([{ key: 'k', value: '', valueInConfig: false }], true)).toBe('k_');
  });
});
