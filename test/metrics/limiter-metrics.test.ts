/**
 * The limiter's metrics for library users: `createLimiter({ registry })` on the memory
 * store, read back from the registry's exposition. The Redis store, the service and a
 * store outage are in observability.redis.test.ts.
 */
import { createServer } from 'node:http';
import express from 'express';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { PolicyInput } from '../../src/config/policies.js';
import { ManualClock } from '../../src/core/clock.js';
import { StoreError } from '../../src/core/errors.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import { DistinctCount } from '../../src/metrics/distinct-count.js';
import { hashedKey } from '../../src/metrics/hashed-key.js';
import { LimiterMetrics } from '../../src/metrics/limiter-metrics.js';
import { StageMetrics } from '../../src/metrics/stage-metrics.js';
import { TopK } from '../../src/metrics/top-k.js';
import { bucketKey } from '../../src/stores/key.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import type { TokenBatchStage } from '../../src/local/token-batch.js';
import { byApiKey, createHttpRateLimit } from '../../src/http.js';
import { post } from '../support/api-key-requests.js';
import { listen } from '../support/listen.js';
import type { Store } from '../../src/stores/store.js';
import { samplesOf, sumOf } from '../support/prometheus-text.js';

const POLICIES: PolicyInput[] = [
  { name: 'api', match: [{ key: 'tenant' }], algorithm: 'fixed-window', limit: 2, window: '1m' },
  {
    name: 'probe',
    match: [{ key: 'tenant' }],
    algorithm: 'fixed-window',
    limit: 1,
    window: '1m',
    shadow: true,
  },
];

async function text(registry: Registry): Promise<string> {
  return registry.metrics();
}

describe('createLimiter({ registry })', () => {
  it('counts decisions by policy, status and path, the check time, the remaining share and refused checks', async () => {
    const registry = new Registry();
    const limiter = createLimiter({
      store: new MemoryStore(),
      policies: POLICIES,
      clock: new ManualClock(0),
      registry,
    });
    // api: limit 2 → OK (1 left), OK (0 left), OVER_LIMIT; probe (shadow): OK, then would-deny twice.
    for (let i = 0; i < 3; i++) await limiter.check({ tenant: 'acme' });
    limiter.checkSync([{ key: 'tenant', value: 'beta' }]);
    await expect(limiter.check({ tenant: 'acme' }, { policies: ['nope'] })).rejects.toThrow();

    const t = await text(registry);
    const d = (labels: Record<string, string>) => sumOf(t, 'sluice_decisions_total', labels);
    expect(d({ policy: 'api', status: 'OK', path: 'store' })).toBe(3);
    expect(d({ policy: 'api', status: 'OVER_LIMIT', path: 'store' })).toBe(1);
    expect(d({ policy: 'probe', status: 'OK', path: 'shadow' })).toBe(2);
    expect(d({ policy: 'probe', status: 'OVER_LIMIT', path: 'shadow' })).toBe(2);
    expect(sumOf(t, 'sluice_check_duration_seconds_count', { outcome: 'ok' })).toBe(3);
    expect(sumOf(t, 'sluice_check_duration_seconds_count', { outcome: 'over_limit' })).toBe(1);
    expect(sumOf(t, 'sluice_check_duration_seconds_count', { outcome: 'invalid' })).toBe(1);
    expect(sumOf(t, 'sluice_limiter_errors_total', { code: 'SLUICE_ERR_POLICY_UNKNOWN' })).toBe(1);
    // api's store decisions left 1/2, 0, 0 (denied) and 1/2: two at 0, all four ≤ 0.5.
    const ratio = (le: string) => sumOf(t, 'sluice_remaining_ratio_bucket', { policy: 'api', le });
    expect([ratio('0'), ratio('0.25'), ratio('0.5'), ratio('1')]).toEqual([2, 2, 4, 4]);
    // Shadow decisions say nothing about the enforced capacity: not in the ratio.
    expect(sumOf(t, 'sluice_remaining_ratio_count', { policy: 'probe' })).toBe(0);
  });

  it('counts decisions a stage answered under its path, and the token batch units in stageMetrics', async () => {
    const registry = new Registry();
    const stageMetrics = new StageMetrics({ registry });
    const limiter = createLimiter({
      store: new MemoryStore(),
      policies: [
        {
          name: 'edge',
          match: [{ key: 'user' }],
          rate: 100,
          burst: 100,
          local: { rate: 1, burst: 1 },
        },
        {
          name: 'batched',
          match: [{ key: 'tenant' }],
          rate: 100,
          burst: 100,
          batch: { size: 4, ttl: '1m' },
        },
      ],
      clock: new ManualClock(0),
      registry,
      stageMetrics,
    });
    // edge: the store admits the first; the local bucket (burst 1) denies the second.
    limiter.checkSync({ user: 'u1' });
    limiter.checkSync({ user: 'u1' });
    for (let i = 0; i < 5; i++) await limiter.check({ tenant: 'acme' });
    const batch = limiter.stages.find((s) => s.name === 'batch') as TokenBatchStage;
    await limiter.close();

    const t = await text(registry);
    const d = (labels: Record<string, string>) => sumOf(t, 'sluice_decisions_total', labels);
    expect(d({ policy: 'edge', status: 'OK', path: 'store' })).toBe(1);
    expect(d({ policy: 'edge', status: 'OVER_LIMIT', path: 'local' })).toBe(1);
    expect(d({ policy: 'batched', status: 'OK', path: 'batch' })).toBe(5);
    expect(d({ policy: 'batched', path: 'store' })).toBe(0);
    // Every check is timed, stage-answered ones too.
    expect(sumOf(t, 'sluice_check_duration_seconds_count', {})).toBe(7);
    const units = (name: string) => sumOf(t, name, { stage: 'batch', policy: 'batched' });
    expect(batch.stats.unitsReserved).toBeGreaterThan(5);
    expect(units('sluice_stage_granted_units_total')).toBe(batch.stats.unitsReserved);
    expect(units('sluice_stage_spent_units_total')).toBe(5);
    expect(units('sluice_stage_returned_units_total')).toBe(batch.stats.unitsReturned);
    expect(batch.stats.unitsReturned).toBe(batch.stats.unitsReserved - 5);
  });

  it('counts a failed in-process store call by code and reason, and the fail-open decision', async () => {
    const registry = new Registry();
    const store = new MemoryStore();
    const limiter = createLimiter({ store, policies: [POLICIES[0]!], registry });
    await store.close();
    const result = await limiter.check({ tenant: 'acme' });
    expect(result.decisions[0]!.path).toBe('fail-open');
    const t = await text(registry);
    expect(sumOf(t, 'sluice_decisions_total', { status: 'OK', path: 'fail-open' })).toBe(1);
    expect(
      sumOf(t, 'sluice_store_errors_total', { code: 'SLUICE_ERR_STORE_CLOSED', reason: 'closed' }),
    ).toBe(1);
    expect(sumOf(t, 'sluice_limiter_errors_total', { code: 'SLUICE_ERR_STORE_CLOSED' })).toBe(1);
  });

  it('times store calls and counts their failures by reason, with the deadline apart', async () => {
    // A store that never answers: every call ends at the policy's timeout.
    const silent: Store = {
      apply: () => new Promise(() => undefined),
      close: () => Promise.resolve(),
    };
    const metrics = new LimiterMetrics();
    const limiter = createLimiter({
      store: silent,
      policies: [{ ...POLICIES[0]!, timeout: '5ms', failureMode: 'closed' }],
      metrics,
    });
    expect(limiter.metrics).toBe(metrics);
    const r = await limiter.check({ tenant: 'a' });
    expect(r.status).toBe('UNAVAILABLE');
    await limiter.check({ tenant: 'a' }, { timeoutMs: 1 });
    const t = await text(metrics.registry);
    expect(sumOf(t, 'sluice_store_call_duration_seconds_count', { result: 'error' })).toBe(2);
    expect(sumOf(t, 'sluice_store_errors_total', { reason: 'timeout' })).toBe(1);
    expect(sumOf(t, 'sluice_store_errors_total', { reason: 'deadline' })).toBe(1);
    expect(sumOf(t, 'sluice_decisions_total', { status: 'UNAVAILABLE', path: 'fail-closed' })).toBe(
      2,
    );
    expect(sumOf(t, 'sluice_check_duration_seconds_count', { outcome: 'unavailable' })).toBe(2);
  });

  it('lists hot keys hashed, never raw, and estimates active keys per policy', async () => {
    const registry = new Registry();
    const clock = new ManualClock(0);
    const metrics = new LimiterMetrics({ registry, hotKeys: 10, activeKeyWindowMs: 60_000 });
    const limiter = createLimiter({
      store: new MemoryStore(),
      policies: [POLICIES[0]!],
      clock,
      metrics,
    });
    // Every fifth check is the whale's: 20 % of the units, above 1/k, so it must be listed.
    for (let i = 0; i < 2_000; i++) {
      limiter.checkSync({ tenant: i % 5 === 0 ? 'whale' : `t${i}` });
    }
    const whaleKey = hashedKey(
      bucketKey(limiter.policies[0]!, [{ key: 'tenant', value: 'whale' }]),
    );
    const top = metrics.hotKeys();
    expect(top).toHaveLength(10);
    expect(top[0]).toMatchObject({ key: whaleKey, policy: 'api' });
    // Space-saving bounds: count - error <= true count (400) <= count.
    expect(top[0]!.count).toBeGreaterThanOrEqual(400);
    expect(top[0]!.count - top[0]!.error).toBeLessThanOrEqual(400);
    let t = await text(registry);
    expect(t).not.toContain('whale');
    const hot = samplesOf(t).filter((s) => s.name === 'sluice_hot_key_units');
    expect(hot.map((s) => s.labels['rank'])).toEqual([
      '1',
      '2',
      '3',
      '4',
      '5',
      '6',
      '7',
      '8',
      '9',
      '10',
    ]);
    expect(hot[0]!.labels).toMatchObject({ key: whaleKey, policy: 'api' });
    expect(hot[0]!.value).toBe(top[0]!.count);
    // 1,601 distinct buckets (1,600 tenants and the whale).
    const active = sumOf(t, 'sluice_active_keys', { policy: 'api' });
    expect(Math.abs(active - 1_601) / 1_601).toBeLessThan(0.1);
    // Every t<i> is under its limit of 2; the whale's third to 400th are denied.
    expect(metrics.hotPolicies()).toEqual([{ policy: 'api', decisions: 2_000, denied: 398 }]);

    // Two windows later with only one key checked: the others are no longer active.
    clock.advance(120_000);
    limiter.checkSync({ tenant: 'whale' });
    t = await text(registry);
    expect(sumOf(t, 'sluice_active_keys', { policy: 'api' })).toBe(1);
  });

  it('labels each policy by policyLabel', async () => {
    const metrics = new LimiterMetrics({ policyLabel: (p) => `label-of-${p}` });
    const limiter = createLimiter({ store: new MemoryStore(), policies: POLICIES, metrics });
    await limiter.check({ tenant: 'x' });
    const t = await text(metrics.registry);
    expect(sumOf(t, 'sluice_decisions_total', { policy: 'label-of-api' })).toBe(1);
    expect(sumOf(t, 'sluice_decisions_total', { policy: 'label-of-probe' })).toBe(1);
    expect(sumOf(t, 'sluice_decisions_total', { policy: 'api' })).toBe(0);
  });
});

describe('the HTTP middleware', () => {
  it('is counted through its limiter: a 200 and a 429 from Express', async () => {
    const registry = new Registry();
    const limiter = createLimiter({
      store: new MemoryStore(),
      policies: [{ name: 'payments-tenant', match: ['tenant'], rate: 1, period: '1h', burst: 1 }],
      clock: new ManualClock(0),
      registry,
    });
    const limits = createHttpRateLimit({
      limiter,
      descriptor: byApiKey({
        key: 'tenant',
        resolve: (k) => (k === 'key-acme' ? 'acme' : undefined),
      }),
    });
    const app = express();
    app.post('/transfers/:id', limits.route(), (_req, res) => {
      res.json({ ok: true });
    });
    const server = await listen(createServer(app));
    try {
      expect((await post(`${server.url}/transfers/1`)).status).toBe(200);
      expect((await post(`${server.url}/transfers/2`)).status).toBe(429);
    } finally {
      await server.close();
    }
    const t = await registry.metrics();
    const d = (status: string) =>
      sumOf(t, 'sluice_decisions_total', { policy: 'payments-tenant', status, path: 'store' });
    expect([d('OK'), d('OVER_LIMIT')]).toEqual([1, 1]);
  });
});

describe('DistinctCount', () => {
  it.each([10, 1_000, 100_000])('estimates %i distinct keys within 3 standard errors', (n) => {
    const hll = new DistinctCount();
    for (let i = 0; i < n; i++) hll.add(`{tenant-${i}}:api`);
    for (let i = 0; i < n; i++) hll.add(`{tenant-${i}}:api`); // repeats change nothing
    expect(Math.abs(hll.estimate() - n) / n).toBeLessThan(3 * 0.0325);
  });
});

describe('TopK', () => {
  it('keeps any item above 1/k of the total, with its count as an upper bound', () => {
    const top = new TopK<string>(4);
    // 'a' has 30 % of 1,000 items, the rest are distinct.
    for (let i = 0; i < 1_000; i++) top.add(i % 10 < 3 ? 'a' : `x${i}`, 'p');
    const [first] = top.top();
    expect(first!.item).toBe('a');
    expect(first!.count).toBeGreaterThanOrEqual(300);
    expect(first!.count - first!.error).toBeLessThanOrEqual(300);
  });
});

describe('StageMetrics', () => {
  it('counts granted, spent, returned and overshoot units by stage and policy', async () => {
    const stages = new StageMetrics();
    stages.granted('lease', 'api', 100);
    stages.spent('lease', 'api', 60);
    stages.returned('lease', 'api', 40);
    stages.overshoot('batch', 'api', 3);
    stages.spent('lease', 'api', Number.NaN); // ignored: a recorder never throws
    const t = await stages.registry.metrics();
    const v = (name: string, stage: string) => sumOf(t, name, { stage, policy: 'api' });
    expect(v('sluice_stage_granted_units_total', 'lease')).toBe(100);
    expect(v('sluice_stage_spent_units_total', 'lease')).toBe(60);
    expect(v('sluice_stage_returned_units_total', 'lease')).toBe(40);
    expect(v('sluice_stage_overshoot_units_total', 'batch')).toBe(3);
  });
});

it('hashes keys to 16 hex digits of SHA-256', () => {
  // sha256("abc") = ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad
  expect(hashedKey('abc')).toBe('ba7816bf8f01cfea');
  expect(new StoreError('SLUICE_ERR_STORE_TIMEOUT', 'x').reason).toBe('timeout');
});
