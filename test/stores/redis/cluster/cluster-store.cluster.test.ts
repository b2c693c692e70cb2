/**
 * RedisStore over a real Redis Cluster (3 primaries + 3 replicas on loopback): the store
 * conformance suite, slot computation, spread of tenants over primaries, exactness under
 * contention, all-or-nothing within a slot, the cross-slot sequential-refund strategy
 * (global + tenant), the reject strategy, and hot-key tracking. Resharding and failover
 * have their own files (one cluster each, since they change the topology).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Algorithm } from '../../../../src/algorithms/algorithm.js';
import { fixedWindow } from '../../../../src/algorithms/fixed-window.js';
import type { PolicyInput } from '../../../../src/config/policies.js';
import { toDescriptor } from '../../../../src/core/descriptor.js';
import { PolicyError } from '../../../../src/core/errors.js';
import { type Limiter } from '../../../../src/limiter/limiter.js';
import { createLimiter } from '../../../../src/local/create-limiter.js';
import { bucketKey, dedupKey } from '../../../../src/stores/key.js';
import { RedisStore } from '../../../../src/stores/redis/redis-store.js';
import { keySlot } from '../../../../src/stores/redis/slot-groups.js';
import type { StoreRequest, StoreResult } from '../../../../src/stores/store.js';
import { RedisCluster } from '../../../support/redis-cluster.js';
import { describeStore } from '../../conformance.js';
import { decidedByStore } from '../../../support/check-results.js';
import { race, tenantRouteRound } from '../../../support/contention.js';
import { mulberry32 as seededRandom, randomInt } from '../../../support/random.js';
import { waitFor } from '../../../support/wait.js';

const CONNECTIONS = 64;
const ATTEMPTS = 5; // 64 × 5 = 320 attempts per repetition
const REPETITIONS = 5;
const slow = { rate: 1, period: '1h', failureMode: 'closed', timeout: '30s' } as const;

let cluster: RedisCluster;
const stores: RedisStore[] = [];

beforeAll(async () => {
  // No failover is under test here: a node the loaded machine starves for a second must
  // not be failed over mid-file (the default 1 s timeout is for the failover tests).
  cluster = await RedisCluster.start({ nodeTimeoutMs: 15_000 });
});

afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  await cluster?.stop();
});

/**
 * No dead link is under test here either: a loaded machine can leave a new Cluster client
 * short of ready, or a reply unanswered, for the store's default 2 s, and the store's
 * watchdog would then drop the connection and fail what it carried ("Connection is
 * closed.", seen at a load average of 10 with both cores spun). So 30 s, and 10 s for
 * ioredis's CLUSTER SLOTS refresh (default 1 s).
 */
function store(options: Partial<ConstructorParameters<typeof RedisStore>[0]> = {}): RedisStore {
  const s = new RedisStore({
    client: cluster.client({ slotsRefreshTimeout: 10_000 }),
    stuckAfterMs: 30_000,
    ...options,
  });
  stores.push(s);
  return s;
}

describeStore('RedisStore on Redis Cluster (client clock)', async () => {
  const s = store({ clock: 'client', prefix: 'conf' });
  await s.ready();
  return {
    store: s,
    reset: async () => {
      await Promise.all((await cluster.primaries()).map((n) => n.client().flushdb()));
    },
    close: () => s.close(),
  };
});

describe('RedisStore on Redis Cluster', () => {
  it('computes the same slot as the server (CLUSTER KEYSLOT) for Sluice keys', async () => {
    const policy = createLimiter({
      store: store(),
      policies: [{ name: 'p', match: ['tenant'], rate: 1 }],
    }).policies[0]!;
    const keys = [
      ...Array.from(
        { length: 50 },
        (_, i) => `sl:${bucketKey(policy, [{ key: 'tenant', value: `t-${i}` }])}`,
      ),
      `sl:${bucketKey(policy, [{ key: 'tenant', value: 'ünï{cøde}' }])}`,
      'no-tag',
      'a{}b',
      '{}',
    ];
    for (const key of keys) expect(keySlot(key), key).toBe(await cluster.slotOfKey(key));
  });

  it('spreads 10,000 tenants over the 3 primaries within ±10% of an even share', async () => {
    const s = store({ prefix: 'spread' });
    const failures: string[] = [];
    const l = createLimiter({
      store: s,
      policies: [{ name: 'api', match: ['tenant'], ...slow }],
      // What a failed store call was, so an undecided tenant says why.
      storeObserver: {
        answered: () => undefined,
        failed: (error, endedBy) =>
          void failures.push(`${endedBy}: ${error.code} ${error.message}`),
      },
    });
    const tenants = Array.from({ length: 10_000 }, (_, i) => `tenant-${i}`);
    const undecided: string[] = [];
    for (let i = 0; i < tenants.length; i += 500) {
      const rs = await Promise.all(tenants.slice(i, i + 500).map((tenant) => l.check({ tenant })));
      for (const r of rs) if (!decidedByStore(r)) undecided.push(JSON.stringify(r));
    }
    // Every tenant was decided by the store, so each wrote its key (a check that failed
    // would look like a gap in the spread).
    expect({ undecided: undecided.length, failures: failures.slice(0, 3) }).toEqual({
      undecided: 0,
      failures: [],
    });
    const primaries = await cluster.primaries();
    // only this test's keys: another test's bucket may still be alive on a primary
    const sizes = await Promise.all(
      primaries.map(async (n) => (await n.client().keys('spread:*')).length),
    );
    const share = 10_000 / 3;
    console.log(
      `[cluster] 10,000 tenants per primary: ${sizes.join(', ')} (even share ${share.toFixed(0)}; deviations ${sizes
        .map((n) => `${(((n - share) / share) * 100).toFixed(1)}%`)
        .join(', ')})`,
    );
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(10_000);
    for (const n of sizes) expect(Math.abs(n - share) / share).toBeLessThanOrEqual(0.1);
    await Promise.all(primaries.map((n) => n.client().flushdb()));
  });

  it('loads its function library on every primary (and so every replica) and decides by FCALL there', async () => {
    const s = store({ prefix: 'fcall' });
    const l = createLimiter({ store: s, policies: [{ name: 'api', match: ['tenant'], ...slow }] });
    const nodes = [...(await cluster.primaries()), ...(await cluster.replicas())];
    const libraries = async (): Promise<string[][]> =>
      Promise.all(
        nodes.map(async (n) => {
          const list = (await n.client().call('FUNCTION', 'LIST')) as unknown[][];
          return list.map((lib) => String(lib[1])).filter((name) => name.startsWith('sluice_'));
        }),
      );
    const fcalls = async (): Promise<number[]> =>
      Promise.all(
        (await cluster.primaries()).map(async (n) => {
          const stats = await n.client().info('commandstats');
          return Number(/cmdstat_fcall:calls=(\d+)/.exec(stats)?.[1] ?? 0);
        }),
      );
    await s.ready();
    // Each node lists exactly one Sluice library of this build.
    await waitFor(
      async (report) => {
        const seen = await libraries();
        report(JSON.stringify(seen));
        return seen.length === nodes.length && seen.every((names) => names.length === 1)
          ? true
          : undefined;
      },
      { what: 'the function library on every node', timeoutMs: 10_000, intervalMs: 20 },
    );
    const before = await fcalls();
    const tenants = Array.from({ length: 300 }, (_, i) => `fcall-${i}`);
    await Promise.all(tenants.map((tenant) => l.check({ tenant })));
    const after = await fcalls();
    console.log(
      `[cluster] FCALL calls per primary over 300 checks: ${after.map((a, i) => a - before[i]!).join(', ')}`,
    );
    for (let i = 0; i < after.length; i++) expect(after[i]! - before[i]!).toBeGreaterThan(0);
  });

  describe('64 connections', () => {
    let ls: Limiter[];
    const make = (policies: readonly PolicyInput[]) =>
      Array.from({ length: CONNECTIONS }, (_, i) => createLimiter({ store: conns[i]!, policies }));
    let conns: RedisStore[];
    beforeAll(async () => {
      conns = Array.from({ length: CONNECTIONS }, () => store());
      await Promise.all(conns.map((c) => c.ready()));
    });

    it(`admits exactly 100 at capacity 100: 64 × ${ATTEMPTS} attempts, ${REPETITIONS} repetitions`, async () => {
      ls = make([{ name: 'hot', match: ['tenant'], burst: 100, ...slow }]);
      await Promise.all(ls.map((l) => l.check({ tenant: 'warm-up' }, { cost: 0 })));
      const admitted: number[] = [];
      for (let rep = 0; rep < REPETITIONS; rep++) {
        const tenant = `exact-${rep}`;
        const results = await race(ls, ATTEMPTS, (l) => l.check({ tenant }));
        expect(results.every(decidedByStore)).toBe(true);
        admitted.push(results.filter((r) => r.allowed).length);
      }
      console.log(
        `[cluster] capacity 100, 64 connections × ${ATTEMPTS}: admitted ${admitted.join(', ')}`,
      );
      expect(admitted).toEqual(admitted.map(() => 100));
    });

    it(`tenant (burst 50) + route (burst 20) in one slot are all-or-nothing, ${REPETITIONS} repetitions`, async () => {
      ls = make([
        { name: 'tenant', match: ['tenant'], burst: 50, ...slow },
        { name: 'route', match: ['tenant', 'route'], identity: ['tenant'], burst: 20, ...slow },
      ]);
      const random = seededRandom(7);
      const summary: string[] = [];
      for (let rep = 0; rep < REPETITIONS; rep++) {
        summary.push(await tenantRouteRound(ls, ATTEMPTS, random, `both-${rep}`));
      }
      console.log(`[cluster] tenant 50 + route 20, admitted tenant=A+B+C: ${summary.join(' ')}`);
    });

    it('global (cross-slot) + tenant under concurrency: the global key never admits more than its limit; refunds leave no partial consumption', async () => {
      // 8 tenants of burst 30 (240 units wanted) against a global emergency limit of 100.
      const policies: PolicyInput[] = [
        { name: 'global', match: [{ key: 'env', value: 'prod' }], burst: 100, ...slow },
        { name: 'tenant', match: ['tenant'], burst: 30, ...slow },
      ];
      ls = make(policies);
      const before = conns.map((c) => ({
        ...c.crossSlotStats,
        partialWindowsMs: [...c.crossSlotStats.partialWindowsMs],
      }));
      const tenants = Array.from({ length: 8 }, (_, i) => `x-${i}`);
      const random = seededRandom(11);
      const reqs = Array.from(
        { length: CONNECTIONS * ATTEMPTS },
        () => tenants[randomInt(random, 0, 7)]!,
      );
      const latencyMs: number[] = [];
      const started = performance.now();
      const results = await race(ls, ATTEMPTS, async (l, i, j) => {
        const t0 = performance.now();
        const r = await l.check({ env: 'prod', tenant: reqs[i * ATTEMPTS + j]! });
        latencyMs[i * ATTEMPTS + j] = performance.now() - t0;
        return r;
      });
      const raceMs = performance.now() - started;
      expect(results.every(decidedByStore)).toBe(true);
      const admittedBy = new Map(tenants.map((t) => [t, 0]));
      const attemptsBy = new Map(tenants.map((t) => [t, 0]));
      results.forEach((r, k) => {
        attemptsBy.set(reqs[k]!, attemptsBy.get(reqs[k]!)! + 1);
        if (r.allowed) admittedBy.set(reqs[k]!, admittedBy.get(reqs[k]!)! + 1);
      });
      const admitted = results.filter((r) => r.allowed).length;
      // Ground truth from Redis: what the buckets hold after the race and refunds.
      const globalLeft = (
        await ls[0]!.check({ env: 'prod', tenant: 'x-0' }, { cost: 0 })
      ).decisions.find((d) => d.policy === 'global')!.remaining;
      let tenantUsed = 0;
      for (const t of tenants) {
        const left = (await ls[0]!.check({ env: 'prod', tenant: t }, { cost: 0 })).decisions.find(
          (d) => d.policy === 'tenant',
        )!.remaining;
        const used = 30 - left;
        expect(admittedBy.get(t)!).toBeLessThanOrEqual(30);
        // Nothing a denied check took stays taken: used == admitted (±1/h refill).
        expect(used).toBeGreaterThan(admittedBy.get(t)! - 0.01);
        expect(used).toBeLessThanOrEqual(admittedBy.get(t)!);
        tenantUsed += used;
      }
      // Exactly what an atomic batch admits: the global bucket is never refunded (its slot
      // is last: larger capacity), so it denies only once 100 were admitted; until then only
      // a tenant bucket denies, and only when its 30 were admitted (what a check held in a
      // partial-consumption window was then admitted too: the global one did not deny).
      const permitted = Math.min(
        100,
        tenants.reduce((n, t) => n + Math.min(30, attemptsBy.get(t)!), 0),
      );
      expect(permitted).toBe(100); // the seeded spread wants more than the global budget
      expect(admitted).toBe(permitted);
      expect(100 - globalLeft).toBeGreaterThan(admitted - 0.01);
      expect(100 - globalLeft).toBeLessThanOrEqual(admitted);
      // A check is refunded exactly when its tenant slot admitted and the global slot then
      // denied: its tenant decision is the read after the refund (allowed), the global one
      // a denial. A check its tenant denied consumed nothing, so it has nothing to refund.
      const expectRefunded = results.filter(
        (r) =>
          !r.allowed &&
          r.decisions.find((d) => d.policy === 'tenant')!.allowed &&
          !r.decisions.find((d) => d.policy === 'global')!.allowed,
      ).length;
      const windowsBy = conns.map((c, i) =>
        c.crossSlotStats.partialWindowsMs.slice(before[i]!.partialWindowsMs.length),
      );
      const windows = windowsBy.flat();
      const refunded = conns.reduce(
        (n, c, i) => n + c.crossSlotStats.refunded - before[i]!.refunded,
        0,
      );
      const failures = conns.reduce(
        (n, c, i) => n + c.crossSlotStats.refundFailures - before[i]!.refundFailures,
        0,
      );
      windows.sort((a, b) => a - b);
      const pct = (p: number) =>
        windows[Math.min(windows.length - 1, Math.floor(p * windows.length))] ?? 0;
      console.log(
        `[cluster] global 100 + tenant 30 × 8, 64 × ${ATTEMPTS} checks in ${raceMs.toFixed(0)} ms: admitted ${admitted} (global used ${(100 - globalLeft).toFixed(3)}, tenants used ${tenantUsed.toFixed(3)}); ` +
          `${refunded} refunded checks (${expectRefunded} denied by the global slot after their tenant slot admitted), ${failures} refund failures; partial-consumption window ms p50 ${pct(0.5).toFixed(2)} p99 ${pct(0.99).toFixed(2)} max ${(windows.at(-1) ?? 0).toFixed(2)}`,
      );
      expect(failures).toBe(0);
      expect(expectRefunded).toBeGreaterThan(0);
      expect(refunded).toBe(expectRefunded);
      // One window per refunded check, each inside a check of the store that recorded it
      // (the refund is awaited before the check answers).
      expect(windows).toHaveLength(refunded);
      windowsBy.forEach((ws, i) => {
        const longest = Math.max(...latencyMs.slice(i * ATTEMPTS, (i + 1) * ATTEMPTS));
        for (const w of ws) expect(w).toBeLessThanOrEqual(longest);
      });

      // Unloaded: one caller, the global budget spent, so every check consumes its tenant
      // bucket (checked first: smaller capacity), is denied by the global one, and refunds.
      const one = conns[0]!;
      const from = one.crossSlotStats.partialWindowsMs.length;
      const refundedBefore = one.crossSlotStats.refunded;
      const seqLatencyMs: number[] = [];
      for (let i = 0; i < 50; i++) {
        const t0 = performance.now();
        const r = await ls[0]!.check({ env: 'prod', tenant: 'seq' });
        seqLatencyMs.push(performance.now() - t0);
        expect(r.allowed).toBe(false);
        expect(r.decisions.find((d) => d.policy === 'global')!.allowed).toBe(false);
      }
      const seqWindows = one.crossSlotStats.partialWindowsMs.slice(from);
      expect(one.crossSlotStats.refunded - refundedBefore).toBe(50);
      expect(seqWindows).toHaveLength(50);
      seqWindows.forEach((w, i) => expect(w).toBeLessThanOrEqual(seqLatencyMs[i]!));
      const seq = [...seqWindows].sort((a, b) => a - b);
      const left = (await ls[0]!.check({ env: 'prod', tenant: 'seq' }, { cost: 0 })).decisions;
      expect(left.find((d) => d.policy === 'tenant')!.remaining).toBeGreaterThan(29.99);
      console.log(
        `[cluster] global spent, 50 sequential checks: ${seq.length} refunds, partial-consumption window ms p50 ${seq[25]!.toFixed(2)} max ${seq.at(-1)!.toFixed(2)}; tenant bucket after: full`,
      );
    });

    it('a retried request id is refunded once: the refund marker beside its dedup record', async () => {
      const policies: PolicyInput[] = [
        { name: 'global', match: [{ key: 'env', value: 'prod' }], burst: 100, ...slow },
        { name: 'tenant', match: ['tenant'], burst: 30, ...slow },
      ];
      // A store of its own: a fresh global bucket (the other tests' limiters share theirs).
      const m = store({ prefix: 'marker' });
      const lm = createLimiter({ store: m, policies });
      const d = (tenant: string) => ({ env: 'prod', tenant });
      const left = async (tenant: string) =>
        (await lm.check(d(tenant), { cost: 0 })).decisions.find((x) => x.policy === 'tenant')!
          .remaining;
      // 10 of tenant a's 30 taken, and the global budget spent down to 5.
      expect((await lm.check(d('a'), { cost: 10 })).allowed).toBe(true);
      expect((await lm.check(d('b'), { cost: 30 })).allowed).toBe(true);
      expect((await lm.check(d('c'), { cost: 30 })).allowed).toBe(true);
      expect((await lm.check(d('e'), { cost: 25 })).allowed).toBe(true);
      expect(await left('a')).toBeCloseTo(20, 2);
      // Cost 8 fits tenant a (20 left) but not the global bucket (5 left): a's slot consumes,
      // the global slot denies, a's 8 are refunded and the marker is written.
      const first = await lm.check(d('a'), { cost: 8, requestId: 'rid-1' });
      expect(first).toMatchObject({ allowed: false, status: 'OVER_LIMIT' });
      expect(first.decisions.find((x) => x.policy === 'global')!.allowed).toBe(false);
      expect(await left('a')).toBeCloseTo(20, 2);
      // The retry: tenant a's slot replays its recorded admission (charging nothing), the
      // global slot its denial, and the refund finds the marker: nothing is given back a
      // second time. Without the marker a's bucket would gain 8 units it never lost.
      const retry = await lm.check(d('a'), { cost: 8, requestId: 'rid-1' });
      expect(retry).toMatchObject({ allowed: false, status: 'OVER_LIMIT' });
      expect(await left('a')).toBeCloseTo(20, 2);
      expect(m.crossSlotStats.refunded).toBe(2);
      // The marker, beside the tenant slot's dedup record, for the dedup record's lifetime.
      const tenantKey = bucketKey(lm.policies[1]!, toDescriptor(d('a')));
      const marker = `${m.redisKey(dedupKey(tenantKey, 'rid-1'))}:refund`;
      const direct = cluster.client();
      expect(await direct.exists(marker)).toBe(1);
      const pttl = await direct.pttl(marker);
      expect(pttl).toBeGreaterThan(0);
      expect(pttl).toBeLessThanOrEqual(60_000); // dedupTtlMs, 60 s by default
      // Another id is a new request: consumed and refunded again, the bucket unchanged.
      await lm.check(d('a'), { cost: 8, requestId: 'rid-2' });
      expect(await left('a')).toBeCloseTo(20, 2);
    });
  });

  it('with crossSlot "reject", a global + tenant policy set is refused at limiter creation', () => {
    const s = store({ crossSlot: 'reject' });
    const make = () =>
      createLimiter({
        store: s,
        policies: [
          { name: 'global', match: [{ key: 'env', value: 'prod' }], rate: 100 },
          { name: 'tenant', match: ['tenant'], rate: 10 },
        ],
      });
    expect(make).toThrow(PolicyError);
    expect(make).toThrow(expect.objectContaining({ code: 'SLUICE_ERR_POLICY_CROSS_SLOT' }));
    // Same identity: one slot, accepted.
    createLimiter({
      store: s,
      policies: [
        { name: 'tenant', match: ['tenant'], rate: 100 },
        { name: 'route', match: ['tenant', 'route'], identity: ['tenant'], rate: 10 },
      ],
    });
  });

  it('independent calls need no cross-slot strategy; a charged denial is refused across slots', async () => {
    // (the default cross-slot strategy, sequential-refund, would run a batch across slots)
    const s = store({ clock: 'client', prefix: 'ind' });
    await s.ready();
    const fw = { limit: 10, windowMs: 60_000 };
    const counting = fixedWindow.chargingDenied!(fw);
    const req = (tenant: string, cost: number, params: typeof fw = counting): StoreRequest => ({
      key: `{${tenant}}:api`,
      algorithm: fixedWindow as Algorithm<unknown, unknown>,
      params,
      cost,
      enforce: true,
    });
    const [a, b] = ['acme', 'globex'];
    expect(keySlot(`{${a}}`)).not.toBe(keySlot(`{${b}}`));
    const nowMs = 1_700_000_000_000;
    const results = await s.apply([req(a, 6), req(b, 11), req(a, 6), req(b, 1)], {
      nowMs,
      independent: true,
    });
    // (a failed result shows its error, so a failure says why)
    const outcome = (r: StoreResult) =>
      r.ok ? [r.decision.status, r.decision.remaining] : `${r.error.code}: ${r.error.message}`;
    expect(results.map(outcome)).toEqual([
      ['OK', 4],
      ['OVER_LIMIT', 10], // 11 > 10, charged: 11
      ['OVER_LIMIT', 4], // 6 + 6 > 10, charged: 12
      ['OVER_LIMIT', 0], // 11 + 1 > 10
    ]);
    const across = await s.apply([req(a, 1), req(b, 1, fw)], { nowMs });
    expect(across).toEqual([
      { ok: false, error: expect.objectContaining({ code: 'SLUICE_ERR_STORE_CROSS_SLOT' }) },
      { ok: false, error: expect.objectContaining({ code: 'SLUICE_ERR_STORE_CROSS_SLOT' }) },
    ]);
  });

  it('tracks the busiest identities, hashed, in a bounded top-k', async () => {
    const s = store({ hotKeys: 4, prefix: 'hot' });
    const l = createLimiter({
      store: s,
      policies: [{ name: 'api', match: ['tenant'], rate: 1000 }],
    });
    for (let i = 0; i < 200; i++) await l.check({ tenant: i % 2 === 0 ? 'whale' : `minnow-${i}` });
    const top = s.hotKeys();
    expect(top.length).toBeLessThanOrEqual(4);
    expect(top[0]!.count - top[0]!.error).toBeGreaterThanOrEqual(100);
    expect(top[0]!.identity).toMatch(/^[0-9a-f]{16}$/);
    expect(JSON.stringify(top)).not.toContain('whale');
  });
});
