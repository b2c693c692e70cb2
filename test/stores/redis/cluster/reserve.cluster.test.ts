/**
 * Reserve and settle on a real Redis Cluster (3 primaries + 3 replicas on loopback):
 * issue 29's exact accounting over four Cluster connections, and one reservation whose
 * buckets sit in two slots, settled with one script call per slot, each once. Client
 * clock under a frozen ManualClock: nothing refills, every figure is exact. The standalone
 * counterpart is test/stores/redis/reserve.redis.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PolicyInput } from '../../../../src/config/policies.js';
import { ManualClock } from '../../../../src/core/clock.js';
import { toDescriptor } from '../../../../src/core/descriptor.js';
import { createLimiter } from '../../../../src/local/create-limiter.js';
import { bucketKey } from '../../../../src/stores/key.js';
import { RedisStore } from '../../../../src/stores/redis/redis-store.js';
import { keySlot } from '../../../../src/stores/redis/slot-groups.js';
import { accountingPolicy, runExactAccounting } from '../../../support/exact-accounting.js';
import { RedisCluster } from '../../../support/redis-cluster.js';

const T0 = 1_700_000_000_000;
let cluster: RedisCluster;
const stores: RedisStore[] = [];

beforeAll(async () => {
  // No failover is under test: a node starved for a second must not be failed over.
  cluster = await RedisCluster.start({ nodeTimeoutMs: 15_000 });
});

afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  await cluster?.stop();
});

async function store(prefix: string): Promise<RedisStore> {
  const s = new RedisStore({
    client: cluster.client({ slotsRefreshTimeout: 10_000 }),
    stuckAfterMs: 30_000,
    clock: 'client',
    prefix,
  });
  stores.push(s);
  // A new Cluster client learns the slots first: no check may race it.
  await s.ready();
  return s;
}

describe('reserve and settle on Redis Cluster', () => {
  it('exact accounting: 64 clients over 4 Cluster connections consume the admitted actuals, within burst + maxDebt', async () => {
    const clock = new ManualClock(T0);
    const policies = [accountingPolicy(5_000, 50)];
    const limiters = await Promise.all(
      Array.from({ length: 4 }, async () =>
        createLimiter({ store: await store('acct'), policies, clock }),
      ),
    );
    const r = await runExactAccounting(limiters, {
      clients: 64,
      rounds: 16,
      burst: 5_000,
      maxDebt: 50,
      seed: 1,
      overshoot: 4,
    });
    // About (burst + maxDebt) / the mean actual (twice the mean estimate of 25.5): ~100.
    expect(r.admitted, JSON.stringify(r)).toBeGreaterThan(50);
    // It reached the cap: some excess was capped, or the bucket ended exactly at it.
    expect(r.capped > 0 || r.level === -50, JSON.stringify(r)).toBe(true);
  });

  it('a reservation over two slots settles each bucket once, one call per slot', async () => {
    const tenant: PolicyInput = {
      name: 'per-tenant',
      match: ['tenant'],
      rate: 1,
      period: '1h',
      burst: 100,
      timeout: '5s',
      failureMode: 'closed',
    };
    // Every tenant's requests in one bucket: no identity, its own slot.
    const all: PolicyInput = { ...tenant, name: 'all-tenants', identity: [], burst: 1_000 };
    const clock = new ManualClock(T0);
    const s = await store('two-slots');
    const limiter = createLimiter({ store: s, policies: [tenant, all], clock });
    const d = toDescriptor({ tenant: 'acme' });
    const [p, q] = limiter.policies;
    expect(keySlot(s.redisKey(bucketKey(p!, d)))).not.toBe(keySlot(s.redisKey(bucketKey(q!, d))));
    const r = await limiter.reserve({ tenant: 'acme' }, { cost: 40 });
    expect(r.allowed).toBe(true);
    const settled = await r.settle(10);
    expect(settled.decisions.map((x) => [x.policy, x.remaining])).toEqual([
      ['per-tenant', 90],
      ['all-tenants', 990],
    ]);
    expect((await limiter.settle(r.id, 10)).applied).toBe(false);
    const read = await limiter.check({ tenant: 'acme' }, { cost: 0 });
    expect(read.decisions.map((x) => x.remaining)).toEqual([90, 990]);
  });
});
