import { describe, expect, it } from 'vitest';
import { capacityPlan, harmonic } from '../../src/capacity/capacity-plan.js';
import { ALGORITHMS } from '../../src/algorithms/index.js';
import { SERVICE_CPU_US_PER_CALL } from '../../src/capacity/measured-costs.js';
import { parsePolicies } from '../../src/config/policies.js';

// The payments example's policy: token bucket, burst 20 at 100/s, so an idle bucket is
// full again after 20 / 100 s = 200 ms.
const payments = parsePolicies([
  { name: 'payments-tenant', match: ['tenant'], rate: 100, period: '1s', burst: 20 },
]).policies;

describe('capacityPlan', () => {
  it('the constants are the measured figures (docs/benchmarks.md, docs/redis.md)', () => {
    expect(ALGORITHMS['token-bucket'].costs.redisCpuUsPerDecision.value).toBe(14.25);
    expect(ALGORITHMS.gcra.costs.redisCpuUsPerDecision.value).toBe(12.89);
    expect(ALGORITHMS['token-bucket'].costs.redisBytesPerBucket.value).toBe(187);
    expect(SERVICE_CPU_US_PER_CALL.value).toBeCloseTo(324.94, 2); // 0.71 cores / 2,185 calls/s
  });

  it('harmonic numbers: exact sums, and the integral tail past a million terms', () => {
    expect(harmonic(1, 1)).toBe(1);
    expect(harmonic(4, 1)).toBeCloseTo(1 + 1 / 2 + 1 / 3 + 1 / 4, 12);
    expect(harmonic(5, 0)).toBe(5); // s = 0: an even spread
    // H(n) = ln n + γ + 1/(2n) − …: at 10⁷, 16.695311365857272.
    expect(harmonic(10_000_000, 1)).toBeCloseTo(16.695311365857272, 9);
  });

  it('the payments example at 50,000 requests/s over 10,000 tenants', () => {
    const plan = capacityPlan({ policies: payments, peakRps: 50_000, tenants: 10_000 });
    // One policy: 50,000 decisions/s × 14.25 µs = 0.7125 cores of Redis.
    expect(plan.decisionsPerSecond).toBe(50_000);
    expect(plan.redisCores).toBeCloseTo(0.7125, 10);
    // At most 0.5 of a core each: ceil(0.7125 / 0.5) = 2 primaries.
    expect(plan.shardsForCpu).toBe(2);
    // Zipf(1) over 10,000: the busiest tenant makes 1 / H(10,000) = 1 / 9.7876 = 10.217%,
    // 0.0728 cores; its shard gets that plus half the rest:
    // 0.0728 + (0.7125 − 0.0728) / 2 = 0.3926 cores, under 0.5: 2 primaries do.
    expect(plan.hotKey.tenantShare).toBeCloseTo(0.10217, 5);
    expect(plan.hotKey.tenantCores).toBeCloseTo(0.0728, 4);
    expect(plan.hotKey.shardCores).toBeCloseTo(0.3926, 4);
    expect(plan.hotKey.shardShare).toBeCloseTo(0.5511, 4); // 0.3926 / 0.7125
    expect(plan.hotKey.exceedsOneShard).toBe(false);
    expect(plan.shards).toBe(2);
    // One bucket per tenant, 187 B each: 1,870,000 B, 935,000 per primary.
    expect(plan.keys).toBe(10_000);
    expect(plan.bytes).toBe(1_870_000);
    expect(plan.bytesPerShard).toBe(935_000);
    // TTL 200 ms: 10,000 keys could expire 5 times a second = 50,000/s, and never more
    // often than they are written (50,000 decisions/s).
    expect(plan.policies[0]).toMatchObject({ ttlMs: 200, expiriesPerSecond: 50_000 });
    // 50,000 calls × 324.94 µs = 16.25 cores of service, at 0.5 each: 33 processes, each
    // with one connection per primary: 66.
    expect(plan.serviceProcesses).toBe(33);
    expect(plan.connections).toBe(66);
  });

  it('adds primaries while the hot shard is over the target, and says when one tenant alone is', () => {
    // Even CPU needs 1 primary (0.1425 cores at 10,000/s), but 10 tenants under Zipf(1)
    // put 1 / H(10) = 34.1% on one tenant: 0.0486 cores alone.
    const tenCores = (rps: number) => (rps * 14.25) / 1e6;
    const small = capacityPlan({
      policies: payments,
      peakRps: 10_000,
      tenants: 10,
      targetUtilization: 0.1,
    });
    // Target 0.1 of a core: ceil(0.1425 / 0.1) = 2 for the CPU; the hot shard then has
    // 0.0486 + 0.0939 / 2 = 0.0956 ≤ 0.1, so 2.
    expect(small.redisCores).toBeCloseTo(tenCores(10_000), 10);
    expect(small.shardsForCpu).toBe(2);
    expect(small.shards).toBe(2);
    // Target 0.06: 3 for the CPU (0.1425 / 0.06 = 2.4); hot shard 0.0486 + 0.0939 / 3 =
    // 0.0799 > 0.06, at 4: 0.0721, 5: 0.0674, 6: 0.0643, 7: 0.0620, 8: 0.0603, 9: 0.0590.
    const spread = capacityPlan({
      policies: payments,
      peakRps: 10_000,
      tenants: 10,
      targetUtilization: 0.06,
    });
    expect(spread.shardsForCpu).toBe(3);
    expect(spread.shards).toBe(9);
    expect(spread.hotKey.shardCores).toBeLessThanOrEqual(0.06);
    // Target 0.04: the tenant's own 0.0486 cores are over it; shards stay at the CPU count.
    const hot = capacityPlan({
      policies: payments,
      peakRps: 10_000,
      tenants: 10,
      targetUtilization: 0.04,
    });
    expect(hot.hotKey.exceedsOneShard).toBe(true);
    expect(hot.shards).toBe(hot.shardsForCpu);
    expect(hot.shardsForCpu).toBe(4); // ceil(0.1425 / 0.04)
  });

  it('a global policy holds one key; a sliding log is sized at its full limit', () => {
    const [global, log] = parsePolicies([
      { name: 'global', match: ['tenant'], identity: [], algorithm: 'gcra', rate: 10, burst: 10 },
      {
        name: 'audit',
        match: ['tenant'],
        algorithm: 'sliding-log',
        limit: 100,
        window: '1h',
      },
    ]).policies;
    const plan = capacityPlan({ policies: [global!, log!], peakRps: 1_000, tenants: 500 });
    expect(plan.policies.map((p) => [p.name, p.keys])).toEqual([
      ['global', 1],
      ['audit', 500],
    ]);
    // 217 B with one entry, + 51.6 B for each of the 99 more: 5,325.4 B.
    expect(plan.policies[1]!.bytesPerKey).toBeCloseTo(5_325.4, 6);
    // Two policies per request: 2,000 decisions/s; 1,000 × (12.89 + 14.25) µs of Redis.
    expect(plan.decisionsPerSecond).toBe(2_000);
    expect(plan.redisCores).toBeCloseTo(0.02714, 10);
  });

  it('refuses inputs that cannot be planned, naming them', () => {
    expect(() => capacityPlan({ policies: payments, peakRps: 0, tenants: 1 })).toThrow(
      'peak requests per second must be a number > 0, got 0',
    );
    expect(() => capacityPlan({ policies: payments, peakRps: 1, tenants: 1.5 })).toThrow(
      'tenants must be a whole number > 0, got 1.5',
    );
    expect(() => capacityPlan({ policies: [], peakRps: 1, tenants: 1 })).toThrow(
      'the policy file has no policy',
    );
  });
});
