/**
 * Accuracy against the bound, with a real redis-server and 10 limiter instances as
 * separate processes (support/fleet-instance.ts). For each setup (local only, batch only,
 * both) and each load (steady, bursty; a hot tenant plus Zipf tenants), the measured
 * overshoot and under-use are printed beside what `sluice explain` prints for the same
 * setup (src/local/bounds.ts) and must be within it. Then: an instance killed (SIGKILL)
 * while holding a reservation loses at most its unspent units, and with Redis stopped
 * the local stage still holds its coarse limit.
 *
 * Decisions use the client clock: each is made at the instant its instance stamped it,
 * but requests from different processes reach Redis out of stamp order, and the bucket
 * never goes back in time: it decides a late request at the latest stamp it has seen.
 * So the bucket's time for an admission lies between its stamp and its answer (one
 * machine, one clock: no stamp seen is later than the instant Redis decides). Overshoot
 * is measured on what that proves, so it needs no tolerance for round trips however
 * long a busy machine makes them: over the whole run (every bucket time lies within the
 * run's first and last stamp), and in any 500 ms window, counting the admissions stamped
 * at or after its start and answered by its end. Each is asserted within explain's
 * overshoot bound exactly (0 for the local stage alone). Under-use keeps the term that
 * explain names beside its bound: G × the store round trip (a check in flight holds its
 * local units).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALGORITHMS } from '../../src/algorithms/index.js';
import { parsePolicies } from '../../src/config/policies.js';
import { policyBounds, type PolicyBounds } from '../../src/local/bounds.js';
import { RedisStore } from '../../src/stores/redis/redis-store.js';
import { RedisServer } from '../support/redis-server.js';
import type { HoldReport, RunCommand, RunReport, StageName } from './support/fleet-instance.js';

const N = 10;
const HOT_RPS = 100; // per instance: 1,000/s to the hot tenant, twice the global rate
// A long store timeout: every decision of these runs is the store's (no failure mode).
const GLOBAL = { match: ['tenant'], rate: 500, burst: 100, timeout: 2_000, failureMode: 'closed' };
const LOCAL = { rate: 60, burst: 15 };
const BATCH = { size: 20, ttl: '500ms' };
const WINDOW_MS = 500;

interface Instance {
  readonly child: ChildProcess;
  readonly waiting: Map<number, (o: unknown) => void>;
}

let redis: RedisServer;
const fleet: Instance[] = [];
let nextId = 1;

function ask<T>(i: Instance, command: Record<string, unknown>): Promise<T> {
  const id = nextId++;
  return new Promise<T>((resolve, reject) => {
    i.waiting.set(id, (o) => {
      const r = o as { error?: string };
      if (r.error !== undefined) reject(new Error(r.error));
      else resolve(o as T);
    });
    i.child.stdin!.write(`${JSON.stringify({ ...command, id })}\n`);
  });
}

function spawnInstance(): Promise<Instance> {
  const script = join(import.meta.dirname, 'support/fleet-instance.ts');
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const waiting = new Map<number, (o: unknown) => void>();
  return new Promise((resolve) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const o = JSON.parse(line) as { id?: number; ready?: number };
      if (o.ready !== undefined) resolve({ child, waiting });
      else waiting.get(o.id!)?.(o);
    });
  });
}

beforeAll(async () => {
  redis = await RedisServer.start();
  fleet.push(...(await Promise.all(Array.from({ length: N }, spawnInstance))));
  // 10 tsx processes starting at once: over 60 s twice in 3 runs with both cores spun.
}, 180_000);

afterAll(async () => {
  for (const i of fleet)
    if (i.child.exitCode === null && i.child.pid !== undefined) i.child.kill('SIGKILL');
  await redis?.stop();
});

interface Measured {
  readonly admitted: number;
  readonly spanMs: number;
  readonly overshootWhole: number;
  readonly overshootWindow: number;
  /** The most admissions proven decided within one window. */
  readonly windowMax: number;
  readonly underUse: number;
  readonly zipfOvershoot: number;
  /** Units the store admitted on the hot tenant's bucket, less those given back. */
  readonly storeUnits: number;
  /** The hot tenant's store calls per decision. */
  readonly callsPerDecision: number;
  /**
   * From the first hot answer to the last hot send (ms): the bucket surely decided over at
   * least this span, so it refilled at least G × this, which under-use is measured against.
   */
  readonly decidedSpanMs: number;
  /** The longest round trip of a check, of all instances (ms). */
  readonly maxRoundTripMs: number;
  readonly paths: Record<string, number>;
}

function measure(reports: readonly RunReport[], b: PolicyBounds): Measured {
  const { atOnce: B, perSecond: G } = b.global;
  const admissions = reports
    .flatMap((r) => r.hotAdmitted.map((stampMs, k) => [stampMs, r.hotAnswered[k]!] as const))
    .sort((x, y) => x[0] - y[0]);
  const first = Math.min(...reports.map((r) => r.firstSendMs));
  const last = Math.max(...reports.map((r) => r.lastSendMs));
  const spanMs = last - first;
  const ideal = B + (G * spanMs) / 1_000;
  // Windows [t, t + WINDOW_MS] from each admission's stamp: those stamped in it and
  // answered by its end were decided at a bucket time within it.
  let windowMax = 0;
  for (let lo = 0; lo < admissions.length; lo++) {
    const end = admissions[lo]![0] + WINDOW_MS;
    let inside = 0;
    for (let k = lo; k < admissions.length && admissions[k]![0] <= end; k++) {
      if (admissions[k]![1] <= end) inside++;
    }
    windowMax = Math.max(windowMax, inside);
  }
  const tenants = new Map<string, number>();
  for (const r of reports) {
    for (const [t, n] of Object.entries(r.tenantAdmitted))
      tenants.set(t, (tenants.get(t) ?? 0) + n);
  }
  const paths: Record<string, number> = {};
  for (const r of reports)
    for (const [p, n] of Object.entries(r.paths)) paths[p] = (paths[p] ?? 0) + n;
  // The bucket decided the first hot request at or before its answer, and the last one at
  // or after its send (one machine, one clock): under saturating demand it refilled G over
  // at least that span, with no allowance for the round trips.
  const decidedSpanMs = Math.max(0, last - Math.min(...reports.map((r) => r.firstHotAnsweredMs)));
  const surelyRefilled = B + (G * decidedSpanMs) / 1_000;
  return {
    admitted: admissions.length,
    spanMs,
    overshootWhole: Math.max(0, admissions.length - ideal),
    overshootWindow: Math.max(0, windowMax - (B + (G * WINDOW_MS) / 1_000)),
    windowMax,
    underUse: Math.max(0, surelyRefilled - admissions.length),
    zipfOvershoot: Math.max(0, ...[...tenants.values()].map((n) => n - ideal)),
    storeUnits: reports.reduce((a, r) => a + r.hotStoreUnits, 0),
    callsPerDecision:
      reports.reduce((a, r) => a + r.hotCalls, 0) / reports.reduce((a, r) => a + r.hotDecisions, 0),
    decidedSpanMs,
    maxRoundTripMs: Math.max(...reports.map((r) => r.maxRoundTripMs)),
    paths,
  };
}

const setups: [string, readonly StageName[], Record<string, unknown>][] = [
  ['local only', ['local'], { local: LOCAL }],
  ['batch only', ['batch'], { batch: BATCH }],
  ['both', ['local', 'cache', 'batch'], { local: LOCAL, batch: BATCH }],
];

describe('local protection and token batching: accuracy against the bound (10 processes, one Redis)', () => {
  const rows: string[] = [];
  afterAll(() => {
    console.log(
      [
        'setup / load            | admitted (store admitted) | overshoot (window, whole) ≤ bound | under-use ≤ bound (decided over) | hot calls/decision | paths',
        ...rows,
      ].join('\n'),
    );
  });

  for (const [name, stages, extra] of setups) {
    for (const pattern of ['steady', 'bursty'] as const) {
      it(`${name}, ${pattern} load: measured overshoot and under-use within what explain prints`, async () => {
        const raw = { name: `${name.replace(' ', '-')}-${pattern}`, ...GLOBAL, ...extra };
        const policy = parsePolicies([raw]).policies[0]!;
        const bounds = policyBounds(policy, N, N * HOT_RPS);
        const startAtMs = Date.now() + 300;
        const command: Omit<RunCommand, 'id'> = {
          cmd: 'run',
          port: redis.port,
          policy: raw,
          stages,
          startAtMs,
          durationMs: 1_200,
          pattern,
          hotRps: HOT_RPS,
          zipfRps: 20,
          tenants: 20,
          seed: 0,
        };
        const reports = await Promise.all(
          fleet.map((i, k) => ask<RunReport>(i, { ...command, seed: k + 1 })),
        );
        const m = measure(reports, bounds);
        const underBound =
          bounds.underUse.atOnce +
          (bounds.underUse.perSecond * m.spanMs) / 1_000 +
          bounds.underUse.batchUnits +
          bounds.underUse.perRoundTripMs * m.maxRoundTripMs;
        rows.push(
          `${`${name} / ${pattern}`.padEnd(23)} | ${`${m.admitted} (${m.storeUnits})`.padStart(25)} | ${m.overshootWindow.toFixed(1)} (${m.windowMax} in a window), ${m.overshootWhole.toFixed(1)} ≤ ${bounds.overshootUnits} | ${m.underUse.toFixed(1)} ≤ ${underBound.toFixed(1)} (RTT ${m.maxRoundTripMs} ms; decided over ${m.decidedSpanMs} of ${m.spanMs} ms) | ${m.callsPerDecision.toFixed(3)} (explain ${(bounds.remoteCallsPerSecond! / (N * HOT_RPS)).toFixed(3)}) | ${JSON.stringify(m.paths)}`,
        );
        // The hot tenant reached a limit: some of its checks were denied (by the store,
        // a batch or the local stage). Not how many it sent: with both cores busy the
        // senders fall short of 1,000/s (722 sent where 1,131.5 were due, in one run).
        const denied = Object.entries(m.paths).filter(([p]) => p.endsWith(':OVER_LIMIT'));
        expect(denied.reduce((a, [, n]) => a + n, 0)).toBeGreaterThan(0);
        // explain's overshoot bound: N × batch size, 0 without batching.
        expect(bounds.overshootUnits).toBe(stages.includes('batch') ? N * BATCH.size : 0);
        // Every admission comes out of units the store admitted (a check, or a batch's
        // reservation): with no batching, exactly those (the local stage only refuses).
        // Exact, whatever the round trips: under-use cannot hide a unit admitted beside
        // the store.
        if (stages.includes('batch')) expect(m.admitted).toBeLessThanOrEqual(m.storeUnits);
        else expect(m.admitted).toBe(m.storeUnits);
        // Overshoot within explain's bound, with no tolerance: 0 is 0.
        const overshoot = [m.overshootWindow, m.overshootWhole, m.zipfOvershoot];
        if (bounds.overshootUnits === 0) expect(overshoot).toEqual([0, 0, 0]);
        for (const o of overshoot) expect(o).toBeLessThanOrEqual(bounds.overshootUnits);
        // Under-use within explain's bound: its formula's one system input is the store's
        // round trip (a local stage's units held by checks in flight), measured here.
        expect(m.underUse).toBeLessThanOrEqual(underBound);
        expect(Object.keys(m.paths).filter((p) => p.startsWith('fail-'))).toEqual([]);
        // Bursts of 10 per instance pass a local burst of 15 only while it has refilled:
        // the local stage answers some. (Under steady load it gives back the units of
        // store denials, so with 10 × 60/s above the global 500/s it need not deny.)
        if (stages.includes('local') && pattern === 'bursty') {
          expect(m.paths['local:OVER_LIMIT']).toBeGreaterThan(0);
        }
        if (stages.includes('batch')) {
          expect(m.paths['batch:OK']).toBeGreaterThan(0);
          // explain's remote calls for the hot key, per request; the Zipf tenants' cold
          // keys and the slow start add some.
          expect(m.callsPerDecision).toBeLessThan(
            bounds.remoteCallsPerSecond! / (N * HOT_RPS) + 0.25,
          );
        }
      }, 30_000);
    }
  }

  it('an instance killed (SIGKILL) while holding a reservation loses at most its unspent units', async () => {
    // Refill 1 unit per hour: what the bucket holds afterwards is what was taken.
    const raw = {
      name: 'hold',
      match: ['tenant'],
      rate: 1,
      period: '1h',
      burst: 2_000,
      timeout: 200,
      batch: { size: 50, ttl: '60s' },
    };
    const policy = parsePolicies([raw]).policies[0]!;
    const held = await Promise.all(
      fleet.map((i) =>
        ask<HoldReport>(i, { cmd: 'hold', port: redis.port, policy: raw, checks: 70 }),
      ),
    );
    // Reservations 1, 2, 4, 8, 16, 32 (63), then 50: 113 reserved, 70 spent, 43 held.
    expect(held.map((h) => [h.spent, h.reserved, h.held])).toEqual(
      Array.from({ length: N }, () => [70, 113, 43]),
    );
    const victim = fleet.shift()!;
    const exited = new Promise((r) => victim.child.once('exit', r));
    process.kill(victim.child.pid!, 'SIGKILL');
    await exited;
    const closed = await Promise.all(
      fleet.map((i) => ask<{ returned: number }>(i, { cmd: 'close' })),
    );
    expect(closed.map((c) => c.returned)).toEqual(Array<number>(N - 1).fill(43));
    const store = RedisStore.connect(`redis://127.0.0.1:${redis.port}`, {
      clock: 'client',
      prefix: 'acc',
    });
    const [read] = await store.apply(
      [
        {
          key: '{hold}:hold',
          algorithm: ALGORITHMS['token-bucket'],
          params: policy.params,
          cost: 0,
          enforce: true,
        },
      ],
      { nowMs: Date.now() },
    );
    await store.close();
    const remaining = read!.ok ? read!.decision.remaining : NaN;
    const lost = 2_000 - remaining - N * 70;
    console.log(
      `killed instance held ${held[0]!.held} unspent (batch size 50); units lost to the global bucket: ${lost.toFixed(3)}`,
    );
    expect(lost).toBeGreaterThanOrEqual(held[0]!.held - 0.05);
    expect(lost).toBeLessThanOrEqual(held[0]!.held + 0.05);
    expect(lost).toBeLessThanOrEqual(50 + 0.05);
  }, 30_000);

  it('with Redis stopped, the local stage still holds its coarse limit (failure mode open)', async () => {
    await redis.stop();
    const raw = { name: 'down', ...GLOBAL, timeout: 20, failureMode: 'open', local: LOCAL };
    const policy = parsePolicies([raw]).policies[0]!;
    const n = fleet.length;
    const bounds = policyBounds(policy, n);
    const reports = await Promise.all(
      fleet.map((i, k) =>
        ask<RunReport>(i, {
          cmd: 'run',
          port: redis.port,
          policy: raw,
          stages: ['local'],
          startAtMs: Date.now() + 200,
          durationMs: 1_000,
          pattern: 'steady',
          hotRps: HOT_RPS,
          zipfRps: 0,
          tenants: 1,
          seed: k,
          storeDown: true,
        }),
      ),
    );
    const admitted = reports.reduce((a, r) => a + r.hotAdmitted.length, 0);
    const spanMs = Math.max(...reports.map((r) => r.lastSendMs - r.firstSendMs));
    const open = bounds.storeDown.open;
    const bound = open.atOnce! + (open.perSecond! * spanMs) / 1_000;
    const paths: Record<string, number> = {};
    for (const r of reports)
      for (const [p, k] of Object.entries(r.paths)) paths[p] = (paths[p] ?? 0) + k;
    console.log(
      `store down, ${n} instances: admitted ${admitted} ≤ explain's ${bound.toFixed(1)} (${open.atOnce} at once + ${open.perSecond}/s over ${spanMs} ms); paths ${JSON.stringify(paths)}`,
    );
    expect(admitted).toBeLessThanOrEqual(bound);
    // No lower bound from the admitted count: busy cores send fewer than due (435 of a
    // bound of 622 in one run). The local stage's denials show it is what limits.
    expect(admitted).toBeGreaterThan(0);
    expect(paths['fail-open:OK']).toBe(admitted);
    expect(paths['local:OVER_LIMIT']).toBeGreaterThan(0);
  }, 30_000);
});
