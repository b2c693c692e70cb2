/**
 * Token batching benchmark (issue 17): `node --import tsx bench/local-and-batching.ts
 * [--quick]`. Starts its own redis-server (test/support's harness; stopped by PID).
 *
 * 1. Hot key, one process: the batch stage answers a closed loop of checks on one key
 *    (batch size 1,000, a global limit far above the load) against Redis; prints
 *    decisions/s and remote calls per decision; then the same through `createLimiter`.
 * 2. Sweep of batch size 1, 10, 100, 1,000: four instances (each its own stage and Redis
 *    connection) in this process, on one key. Per size: remote calls per decision and
 *    decisions/s (closed loop, limit far above); under-use (open loop at 0.8 × the
 *    limit, where the global policy alone denies nothing: every denial is under-use);
 *    overshoot (open loop, per 400 ms 300 ms at 0.5 × and 100 ms at 10 × the limit of
 *    2,000/s burst 1,000, client clock: the most
 *    admitted in any 200 ms window above burst + rate × 200 ms), beside explain's bound
 *    N × size.
 *
 * Writes bench/results/local-and-batching-<date>.{json,svg} and prints markdown. Nothing
 * here asserts on timings. The stage measurements call the stage as the pipeline does
 * (enter, then settle), to show the stage's own cost.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parsePolicies } from '../src/config/policies.js';
import { createLimiter } from '../src/local/create-limiter.js';
import type { Policy } from '../src/core/policy.js';
import type { StageItem } from '../src/limiter/stage.js';
import { policyBounds } from '../src/local/bounds.js';
import type { StageGateway } from '../src/limiter/stage.js';
import { StoreGateway } from '../src/limiter/store-gateway.js';
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
async function decide(
  stage: TokenBatchStage,
  gateway: StageGateway,
  item: StageItem,
  nowMs: number,
): Promise<boolean> {
  const ctx = { nowMs, gateway };
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
  const stage = new TokenBatchStage();
  const gateway = new StoreGateway(store, undefined, undefined);
  const item: StageItem = { policy: p, key: '{hot}:hot', capacity: 10_000_000, cost: 1 };
  const durationMs = quick ? 1_000 : 3_000;
  // Warm up (JIT, slow start), then measure.
  for (let i = 0; i < 200_000; i++) await decide(stage, gateway, item, Date.now());
  const calls0 = store.calls;
  let decisions = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < durationMs) {
    // Read the clock once per 1,000 decisions: a check's nowMs is the caller's reading.
    const now = Date.now();
    for (let i = 0; i < 1_000; i++) {
      const got = stage.enter(item, { nowMs: now, gateway });
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

/** The same hot key through `createLimiter`'s `check` (descriptor, plan, stages, result). */
async function hotKeyLimiter(
  port: number,
): Promise<{ decisionsPerSecond: number; callsPerDecision: number }> {
  const store = new Counting(RedisStore.connect(`redis://127.0.0.1:${port}`, { prefix: 'bench' }));
  await store.inner.ready();
  const limiter = createLimiter({
    store,
    policies: [
      {
        name: 'hot-limiter',
        match: ['tenant'],
        rate: 100_000_000,
        burst: 10_000_000,
        timeout: 1_000,
        batch: { size: 1_000, ttl: '1s' },
      },
    ],
  });
  const descriptor = { tenant: 'hot' };
  for (let i = 0; i < 200_000; i++) await limiter.check(descriptor);
  const calls0 = store.calls;
  const durationMs = quick ? 1_000 : 3_000;
  let decisions = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < durationMs) {
    for (let i = 0; i < 1_000; i++) {
      await limiter.check(descriptor);
      decisions++;
    }
  }
  const seconds = (performance.now() - t0) / 1_000;
  const calls = store.calls - calls0;
  await limiter.close();
  await store.close();
  return { decisionsPerSecond: decisions / seconds, callsPerDecision: calls / decisions };
}

const INSTANCES = 4;
const G = 2_000;
const B = 1_000;

/** Instances of one setup: each its own batch stage and Redis connection. */
async function fleet(port: number, clientClock: boolean) {
  const stores = Array.from(
    { length: INSTANCES },
    () =>
      new Counting(
        RedisStore.connect(`redis://127.0.0.1:${port}`, {
          prefix: 'bench',
          ...(clientClock ? { clock: 'client' as const } : {}),
        }),
      ),
  );
  await Promise.all(stores.map((s) => s.inner.ready()));
  const stages = stores.map(() => new TokenBatchStage());
  const gateways = stores.map((store) => new StoreGateway(store, undefined, undefined));
  return {
    stages,
    gateways,
    calls: () => stores.reduce((a, s) => a + s.calls, 0),
    close: async () => {
      for (const s of stages) await s.close();
      for (const s of stores) await s.close();
    },
  };
}

/** Closed loop, 32 checks in flight per instance, global limit far above: decisions/s. */
async function throughput(port: number, size: number) {
  const p = policy({
    name: `speed-${size}`,
    rate: 100_000_000,
    burst: 10_000_000,
    batch: { size, ttl: '500ms' },
  });
  const item: StageItem = { policy: p, key: `{hot}:speed-${size}`, capacity: 10_000_000, cost: 1 };
  const f = await fleet(port, false);
  const durationMs = quick ? 1_000 : 2_000;
  let decisions = 0;
  const t0 = performance.now();
  const worker = async (stage: TokenBatchStage, gateway: StageGateway): Promise<void> => {
    while (performance.now() - t0 < durationMs) {
      await decide(stage, gateway, item, Date.now());
      decisions++;
      if (decisions % 256 === 0) await new Promise((r) => setImmediate(r));
    }
  };
  await Promise.all(
    f.stages.flatMap((s, i) => Array.from({ length: 32 }, () => worker(s, f.gateways[i]!))),
  );
  const seconds = (performance.now() - t0) / 1_000;
  const calls = f.calls();
  await f.close();
  return { decisionsPerSecond: decisions / seconds, callsPerDecision: calls / decisions };
}

/**
 * Open loop at `rps` (spread over the instances) on one key limited to G/s, burst B,
 * client clock: admitted stamps, the span of the sends, and the store's round trips.
 */
async function openLoop(port: number, size: number, rps: number, tag: string, bursty = false) {
  const name = `${tag}-${size}`;
  const p = policy({ name, rate: G, burst: B, batch: { size, ttl: '500ms' } });
  const item: StageItem = { policy: p, key: `{hot}:${name}`, capacity: B, cost: 1 };
  const f = await fleet(port, true);
  const durationMs = quick ? 1_000 : 2_000;
  const admitted: number[] = [];
  let sent = 0;
  let denied = 0;
  let maxRoundTripMs = 0;
  const inFlight = new Set<Promise<void>>();
  const t0 = Date.now();
  let first = Infinity;
  let last = -Infinity;
  while (Date.now() - t0 < durationMs) {
    const elapsed = Date.now() - t0;
    // Bursty: per 400 ms, 300 ms at rps / 8 (reserves fill, the global bucket refills),
    // then 100 ms at 2.5 × rps (the reserves and the bucket are spent at once).
    const cycle = Math.floor(elapsed / 400);
    const inCycle = elapsed % 400;
    const target = bursty
      ? (cycle * (300 * rps * 0.125 + 100 * rps * 2.5) +
          Math.min(inCycle, 300) * rps * 0.125 +
          Math.max(0, inCycle - 300) * rps * 2.5) /
        1_000
      : (elapsed * rps) / 1_000;
    const due = Math.floor(target) - sent;
    for (let i = 0; i < due; i++, sent++) {
      const now = Date.now();
      first = Math.min(first, now);
      last = Math.max(last, now);
      const stage = f.stages[sent % INSTANCES]!;
      const d = decide(stage, f.gateways[sent % INSTANCES]!, item, now).then((ok) => {
        maxRoundTripMs = Math.max(maxRoundTripMs, Date.now() - now);
        if (ok) admitted.push(now);
        else denied++;
      });
      inFlight.add(d);
      void d.finally(() => inFlight.delete(d));
    }
    await new Promise((r) => setTimeout(r, 1));
  }
  await Promise.all(inFlight);
  const calls = f.calls();
  await f.close();
  return {
    admitted: admitted.sort((a, b) => a - b),
    sent,
    denied,
    spanMs: last - first,
    maxRoundTripMs,
    calls,
  };
}

async function sweepPoint(port: number, size: number) {
  const speed = await throughput(port, size);
  // Under the limit (0.8 G): the global policy alone would admit every request, so each
  // denial is under-use. Bursty (per 400 ms: 300 ms at 0.5 G, 100 ms at 10 G): the most
  // admitted in any 200 ms window, above what the global policy alone admits in one, is
  // overshoot.
  const under = await openLoop(port, size, 0.8 * G, 'under');
  const over = await openLoop(port, size, 4 * G, 'over', true);
  const W = 200;
  let windowMax = 0;
  const a = over.admitted;
  for (let lo = 0, hi = 0; hi < a.length; hi++) {
    while (a[hi]! - a[lo]! > W) lo++;
    windowMax = Math.max(windowMax, hi - lo + 1);
  }
  const p = policy({ name: 'b', rate: G, burst: B, batch: { size, ttl: '500ms' } });
  const point: SweepPoint = {
    size,
    callsPerDecision: speed.callsPerDecision,
    decisionsPerSecond: speed.decisionsPerSecond,
    underUse: under.denied,
    overshoot: Math.max(0, windowMax - (B + (G * W) / 1_000)),
    bound: policyBounds(p, INSTANCES).overshootUnits,
  };
  return {
    ...point,
    underCallsPerDecision: under.calls / under.sent,
    underSent: under.sent,
    overCallsPerDecision: over.calls / over.sent,
    overAdmittedPerSecond: over.admitted.length / (over.spanMs / 1_000),
    // Requests from different instances reach Redis out of stamp order, so a window's
    // count is known to within what the bucket refills in one round trip.
    resolution: Math.ceil((G * over.maxRoundTripMs) / 1_000),
  };
}

const redis = await RedisServer.start();
try {
  const hot = await hotKey(redis.port);
  const hotLimiter = await hotKeyLimiter(redis.port);
  const sweep: Awaited<ReturnType<typeof sweepPoint>>[] = [];
  // A first pass warms the JIT; the second is reported.
  if (!quick) await sweepPoint(redis.port, 10);
  for (const size of [1, 10, 100, 1_000]) sweep.push(await sweepPoint(redis.port, size));
  const date = new Date().toISOString().slice(0, 10);
  const lines = [
    `### Token batching (${date}${quick ? ', quick' : ''})`,
    '',
    `Hot key, one process, batch size 1,000: **${Math.round(hot.decisionsPerSecond).toLocaleString('en-US')} decisions/s**, ${hot.callsPerDecision.toFixed(5)} remote calls per decision (1 per ${Math.round(1 / hot.callsPerDecision).toLocaleString('en-US')}).`,
    '',
    `The same through \`createLimiter\`'s \`check\` (one awaited promise per check): ${Math.round(hotLimiter.decisionsPerSecond).toLocaleString('en-US')} decisions/s, ${hotLimiter.callsPerDecision.toFixed(5)} remote calls per decision.`,
    '',
    `Sweep: ${INSTANCES} instances in one process, one key. Speed: 32 checks in flight per instance, limit far above. Under-use: open loop at 0.8 × ${G.toLocaleString('en-US')}/s (burst ${B.toLocaleString('en-US')}), where the global policy alone denies nothing. Overshoot: open loop, per 400 ms 300 ms at 0.5 × the rate and 100 ms at 10 ×, most admitted in a 200 ms window above ${B.toLocaleString('en-US')} + ${G.toLocaleString('en-US')}/s × 200 ms, beside explain's bound N × size; resolution is what the bucket refills in the longest round trip.`,
    '',
    '| batch size | remote calls / decision (speed) | decisions/s | calls / decision at 0.8 × rate | under-use at 0.8 × rate (denied of sent) | calls / decision, bursty | admitted/s, bursty | overshoot | bound N × size | resolution |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...sweep.map(
      (s) =>
        `| ${s.size} | ${s.callsPerDecision.toFixed(4)} | ${Math.round(s.decisionsPerSecond).toLocaleString('en-US')} | ${s.underCallsPerDecision.toFixed(4)} | ${s.underUse} of ${s.underSent.toLocaleString('en-US')} | ${s.overCallsPerDecision.toFixed(4)} | ${Math.round(s.overAdmittedPerSecond).toLocaleString('en-US')} | ${Math.round(s.overshoot)} | ${s.bound.toLocaleString('en-US')} | ${s.resolution} |`,
    ),
  ];
  console.log(lines.join('\n'));
  const dir = path.join(import.meta.dirname, 'results');
  const base = path.join(dir, `local-and-batching-${date}${quick ? '-quick' : ''}`);
  fs.writeFileSync(
    `${base}.json`,
    `${JSON.stringify({ date, quick, hot, hotLimiter, sweep }, null, 2)}\n`,
  );
  fs.writeFileSync(
    `${base}.svg`,
    sweepChart(sweep, `Token batching: batch size sweep (4 instances, one Redis key, ${date})`),
  );
} finally {
  await redis.stop();
}
