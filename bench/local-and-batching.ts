/**
 * Token batching benchmark (issue 17): `node --import tsx bench/local-and-batching.ts
 * [--quick]`. Starts its own redis-server (test/support's harness; stopped by PID).
 *
 * 1. Hot key, one process: the batch stage answers a closed loop of checks on one key
 *    (batch size 1,000, a global limit far above the load) against Redis; prints
 *    decisions/s and remote calls per decision.
 * 2. Sweep of batch size 1, 10, 100, 1,000: four instances (each its own stage and Redis
 *    connection) in this process, concurrency 32 each, on one key whose global limit
 *    binds (20,000/s, burst 1,000); client clock, so each decision is made at its stamp.
 *    Per size: remote calls per decision, decisions/s, under-use (what the global
 *    policy alone would admit over the run, less what was admitted) and overshoot (the
 *    most admitted in any 200 ms window above burst + rate × 200 ms), beside explain's
 *    bound N × size.
 *
 * Writes bench/results/local-and-batching-<date>.{json,svg} and prints markdown. Nothing
 * here asserts on timings. Until the limiter runs stages itself, the checks go through
 * the stage the way the pipeline calls it (enter, then settle).
 */
import fs from 'node:fs';
import path from 'node:path';
import { parsePolicies } from '../src/config/policies.js';
import type { Policy } from '../src/core/policy.js';
import type { StageItem } from '../src/limiter/stage.js';
import { policyBounds } from '../src/local/bounds.js';
import { TokenBatchStage } from '../src/local/token-batch.js';
import { RedisStore } from '../src/stores/redis/redis-store.js';
import type { Store } from '../src/stores/store.js';
import { RedisServer } from '../test/support/redis-server.js';
import { sweepChart, type SweepPoint } from './lib/batch-sweep-chart.js';

const quick = process.argv.includes('--quick');

/** A store that counts its calls (the remote calls a setup costs). */
class Counting implements Store {
  calls = 0;
  constructor(readonly inner: RedisStore) {}
  apply(...a: Parameters<Store['apply']>): ReturnType<Store['apply']> {
    this.calls++;
    return this.inner.apply(...a);
  }
  refund(...a: Parameters<NonNullable<Store['refund']>>): ReturnType<NonNullable<Store['refund']>> {
    return this.inner.refund(...a);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

function policy(raw: Record<string, unknown>): Policy {
  return parsePolicies([{ match: ['tenant'], timeout: 1_000, ...raw }]).policies[0]!;
}

/** One decision through the stage as the pipeline runs it: enter, then settle. */
async function decide(stage: TokenBatchStage, item: StageItem, nowMs: number): Promise<boolean> {
  const ctx = { nowMs };
  const got = stage.enter(item, ctx);
  const v = got instanceof Promise ? await got : got;
  const allowed = v?.kind === 'answer' && v.decision.allowed;
  if (v?.kind === 'answer') {
    stage.settle(
      item,
      v,
      { admitted: allowed, decision: { ...v.decision, policy: item.policy.name, path: v.path } },
      ctx,
    );
  }
  return allowed;
}

async function hotKey(
  port: number,
): Promise<{ decisionsPerSecond: number; callsPerDecision: number; decisions: number }> {
  const p = policy({
    name: 'hot',
    rate: 100_000_000,
    burst: 10_000_000,
    batch: { size: 1_000, ttl: '1s' },
  });
  const store = new Counting(RedisStore.connect(`redis://127.0.0.1:${port}`, { prefix: 'bench' }));
  await store.inner.ready();
  const stage = new TokenBatchStage({ store });
  const item: StageItem = { policy: p, key: '{hot}:hot', capacity: 10_000_000, cost: 1 };
  const durationMs = quick ? 1_000 : 3_000;
  // Warm up (JIT, slow start), then measure.
  for (let i = 0; i < 200_000; i++) await decide(stage, item, Date.now());
  const calls0 = store.calls;
  let decisions = 0;
  const t0 = performance.now();
  let now = Date.now();
  while (performance.now() - t0 < durationMs) {
    // Read the clock once per 1,000 decisions: a check's nowMs is the caller's reading.
    now = Date.now();
    for (let i = 0; i < 1_000; i++) {
      const got = stage.enter(item, { nowMs: now });
      if (got instanceof Promise) await got;
      decisions++;
    }
  }
  const seconds = (performance.now() - t0) / 1_000;
  const calls = store.calls - calls0;
  await stage.close();
  await store.close();
  return {
    decisionsPerSecond: decisions / seconds,
    callsPerDecision: calls / decisions,
    decisions,
  };
}

async function sweepPoint(
  port: number,
  size: number,
): Promise<SweepPoint & { decisions: number; admitted: number; ideal: number }> {
  const INSTANCES = 4;
  const CONCURRENCY = 32;
  const raw = { name: `sweep-${size}`, rate: 20_000, burst: 1_000, batch: { size, ttl: '500ms' } };
  const p = policy(raw);
  const item: StageItem = { policy: p, key: `{hot}:sweep-${size}`, capacity: 1_000, cost: 1 };
  const stores = Array.from(
    { length: INSTANCES },
    () =>
      new Counting(
        RedisStore.connect(`redis://127.0.0.1:${port}`, { prefix: 'bench', clock: 'client' }),
      ),
  );
  await Promise.all(stores.map((s) => s.inner.ready()));
  const stages = stores.map((store) => new TokenBatchStage({ store }));
  const durationMs = quick ? 1_000 : 2_000;
  const admittedAt: number[] = [];
  let decisions = 0;
  let first = Infinity;
  let last = -Infinity;
  const t0 = Date.now() + 50;
  while (Date.now() < t0);
  const endAt = t0 + durationMs;
  const worker = async (stage: TokenBatchStage): Promise<void> => {
    for (;;) {
      const now = Date.now();
      if (now >= endAt) return;
      first = Math.min(first, now);
      last = Math.max(last, now);
      if (await decide(stage, item, now)) admittedAt.push(now);
      decisions++;
      // Give the event loop a turn now and then, so reservations' replies are read.
      if (decisions % 256 === 0) await new Promise((r) => setImmediate(r));
    }
  };
  await Promise.all(stages.flatMap((s) => Array.from({ length: CONCURRENCY }, () => worker(s))));
  const spanMs = last - first;
  const G = 20_000;
  const B = 1_000;
  const ideal = B + (G * spanMs) / 1_000;
  admittedAt.sort((a, b) => a - b);
  const W = 200;
  let windowMax = 0;
  for (let lo = 0, hi = 0; hi < admittedAt.length; hi++) {
    while (admittedAt[hi]! - admittedAt[lo]! > W) lo++;
    windowMax = Math.max(windowMax, hi - lo + 1);
  }
  const calls = stores.reduce((a, s) => a + s.calls, 0);
  for (const s of stages) await s.close();
  for (const s of stores) await s.close();
  return {
    size,
    callsPerDecision: calls / decisions,
    decisionsPerSecond: decisions / (spanMs / 1_000),
    underUse: Math.max(0, ideal - admittedAt.length),
    overshoot: Math.max(0, windowMax - (B + (G * W) / 1_000)),
    bound: policyBounds(p, INSTANCES).overshootUnits,
    decisions,
    admitted: admittedAt.length,
    ideal,
  };
}

const redis = await RedisServer.start();
try {
  const hot = await hotKey(redis.port);
  const sweep: Awaited<ReturnType<typeof sweepPoint>>[] = [];
  for (const size of [1, 10, 100, 1_000]) sweep.push(await sweepPoint(redis.port, size));
  const date = new Date().toISOString().slice(0, 10);
  const lines = [
    `### Token batching (${date}${quick ? ', quick' : ''})`,
    '',
    `Hot key, one process, batch size 1,000: **${Math.round(hot.decisionsPerSecond).toLocaleString('en-US')} decisions/s**, ${hot.callsPerDecision.toFixed(5)} remote calls per decision (1 per ${Math.round(1 / hot.callsPerDecision).toLocaleString('en-US')}).`,
    '',
    'Sweep: 4 instances × concurrency 32 on one key, global 20,000/s burst 1,000, ttl 500ms:',
    '',
    '| batch size | remote calls / decision | decisions/s | admitted | global alone | under-use | overshoot (200 ms windows) | bound N × size |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...sweep.map(
      (s) =>
        `| ${s.size} | ${s.callsPerDecision.toFixed(4)} | ${Math.round(s.decisionsPerSecond).toLocaleString('en-US')} | ${s.admitted.toLocaleString('en-US')} | ${Math.round(s.ideal).toLocaleString('en-US')} | ${Math.round(s.underUse)} | ${Math.round(s.overshoot)} | ${s.bound.toLocaleString('en-US')} |`,
    ),
  ];
  console.log(lines.join('\n'));
  const dir = path.join(import.meta.dirname, 'results');
  const base = path.join(dir, `local-and-batching-${date}${quick ? '-quick' : ''}`);
  fs.writeFileSync(`${base}.json`, `${JSON.stringify({ date, quick, hot, sweep }, null, 2)}\n`);
  fs.writeFileSync(
    `${base}.svg`,
    sweepChart(sweep, `Token batching: batch size sweep (4 instances, one Redis key, ${date})`),
  );
} finally {
  await redis.stop();
}
