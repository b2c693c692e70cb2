/**
 * Sluice benchmarks (issue 8): `npm run bench`, or `npm run bench -- --quick` for a short
 * smoke run. Options: `--only <s>[,<s>…]` keeps scenarios whose id contains any of the
 * given substrings (e.g. `--only redis`, `--only memory/c64/zipf`); `--rounds N` and
 * `--window <ms>` override the round count and the measured window per side. Sluice runs
 * from dist/ as built by `npm run build`, which runs first (`--no-build` skips it).
 *
 * Starts its own redis-server on a free loopback port (test/support's harness; stopped by
 * PID at the end) when any Redis scenario is selected. Each scenario runs its sides —
 * Sluice, the peer (rate-limiter-flexible) and, for the memory store, a bare Map token
 * bucket — in interleaved rounds (A B C, then C B A, …) in this one process, closed loop
 * at the scenario's concurrency, and reports medians over rounds. Redis ceilings come
 * from replaying the exact script call Sluice sends (bench/lib/script-ceiling.ts). Writes
 * bench/results/<yyyy-mm-dd>[-quick].{json,md,svg} and prints the markdown on stdout.
 * Nothing here asserts on timings.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { addUserWithoutFunctions, RedisServer } from '../test/support/redis-server.js';
import { findRedisBenchmark, runRedisBenchmark } from './lib/ceiling.js';
import { captureScriptCallRaw, runScriptCeiling } from './lib/script-ceiling.js';
import { drive, median } from './lib/driver.js';
import { Progress } from './lib/progress.js';
import { bytesPerKey, openWindow } from './lib/redis-stats.js';
import {
  evaluateTargets,
  fmtRate,
  markdown,
  svgChart,
  type NamedCeiling,
  type RoundResult,
  type RunResult,
  type ScenarioResult,
  type SideSummary,
} from './lib/report.js';
import { keyRing, type Distribution } from './lib/rng.js';
import { loadSluice, type SluiceModules } from './lib/sluice.js';
import {
  KEYS,
  ROUTES,
  allScenarios,
  makeBare,
  makePeer,
  makeSluice,
  sluicePolicies,
  type Scenario,
  type Side,
  type SideContext,
  type SideName,
} from './lib/scenarios.js';

// ---------------------------------------------------------------------------------------
// Arguments

function argValue(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}
const quick = process.argv.includes('--quick');
const build = !process.argv.includes('--no-build');
const only = argValue('--only')
  ?.split(',')
  .map((s) => s.trim())
  .filter((s) => s !== '');
const rounds = Number(argValue('--rounds') ?? (quick ? 2 : 3));
const windowMs = Number(argValue('--window') ?? (quick ? 250 : 1_000));
const warmupMs = quick ? 100 : 250;
/** Requests per ceiling: script calls (replayed), then the trivial commands (redis-benchmark). */
const CEILING_REQUESTS = quick ? 20_000 : 60_000;
const TRIVIAL_REQUESTS = quick ? 100_000 : 400_000;
const SEED = 20_261_130;
/** Memory scenarios time one decision in this many (see bench/lib/driver.ts). */
const MEMORY_SAMPLE_EVERY = 8;

const scenarios = allScenarios().filter(
  (s) => only === undefined || only.some((o) => s.id.includes(o)),
);
if (scenarios.length === 0) {
  console.error(`no scenario matches --only ${only?.join(',')}`);
  process.exit(2);
}

// ---------------------------------------------------------------------------------------

const progress = new Progress();
const started = Date.now();
const loadAverageStart = os.loadavg();
const rings = new Map<Distribution, Uint32Array>();
const ringOf = (d: Distribution): Uint32Array => {
  let r = rings.get(d);
  if (r === undefined) {
    r = keyRing(d, KEYS, SEED);
    rings.set(d, r);
  }
  return r;
};

let sluice: SluiceModules;
let server: RedisServer | undefined;
let admin: Redis | undefined;
let redisVersion: string | undefined;
const needsRedis = scenarios.some((s) => s.store === 'redis');

/**
 * The name of the function library a RedisStore loads on `server` (waits for it), after
 * adding the ACL user the capture connects as: everything but FUNCTION.
 */
async function loadedLibrary(on: RedisServer): Promise<string> {
  const admin = on.client();
  try {
    await addUserWithoutFunctions(admin, 'sluice-bench-scripts');
    const store = new sluice.redis.RedisStore({ client: on.client(), prefix: 'slb' });
    await store.ready();
    try {
      for (let i = 0; i < 250; i++) {
        const list = (await admin.call('FUNCTION', 'LIST')) as unknown[][];
        const name = list
          .map((lib) => String(lib[1]))
          .find((n) => n.startsWith('sluice_applyBatches_'));
        if (name !== undefined) return name;
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error('the store did not load its function library within 5 s');
    } finally {
      await store.close();
    }
  } finally {
    admin.disconnect();
  }
}

function ceilingKey(s: Scenario): string {
  return `${s.algorithm}${s.multi ? '+route' : ''}/${s.dist === 'hot' ? 'hot' : 'random'}/${s.mode}`;
}

async function runCeilings(): Promise<Map<string, NamedCeiling>> {
  const out = new Map<string, NamedCeiling>();
  const binary = await findRedisBenchmark();
  if (binary === undefined || server === undefined || admin === undefined) {
    progress.done('redis-benchmark not found: no Redis ceilings (apt-get install redis-tools)');
    return out;
  }
  const wanted = new Map<string, Scenario>();
  for (const s of scenarios) if (s.store === 'redis') wanted.set(ceilingKey(s), s);
  for (const [key, s] of wanted) {
    progress.update(`ceiling ${key}: capturing the script call`);
    // MONITOR does not show FCALL, so the call is captured from a store whose user may not
    // use FUNCTION (it sends EVALSHA), then replayed as the FCALL of the library Sluice
    // loads, with the same keys and argument: the call a lone check sends.
    const library = await loadedLibrary(server);
    const seed = server.client({ username: 'sluice-bench-scripts', password: 'x' });
    const store = new sluice.redis.RedisStore({ client: seed, prefix: 'slb' });
    await store.ready();
    seed.disconnect();
    const limiter = sluice.main.createLimiter({ store, policies: sluicePolicies(s) });
    const descriptor = s.multi ? { tenant: '__CEIL__', route: ROUTES[0]! } : { tenant: '__CEIL__' };
    const evalsha = await captureScriptCallRaw(server.port, () => limiter.check(descriptor));
    await store.close();
    const captured = [Buffer.from('FCALL'), Buffer.from(library), ...evalsha.slice(2)];
    await admin.flushall('SYNC');
    progress.update(`ceiling ${key}: replaying the script call`);
    const r = await runScriptCeiling(
      admin,
      server.port,
      CEILING_REQUESTS,
      captured,
      '__CEIL__',
      s.dist === 'hot' ? 'hot' : undefined,
    );
    out.set(key, { ...r, name: `Sluice script ${key}` });
    progress.done(
      `ceiling ${key}: ${fmtRate(r.callsPerSecond)} calls/s, ${r.redisUsPerCall.toFixed(2)} µs/call`,
    );
    await admin.flushall('SYNC');
  }
  const sha = (await admin.script('LOAD', 'return 1')) as string;
  const trivial: [string, string[], number][] = [
    ['trivial EVALSHA (return 1)', ['EVALSHA', sha, '0'], TRIVIAL_REQUESTS],
    ['INCR of random keys', ['INCR', 'k:__rand_int__'], TRIVIAL_REQUESTS * 2],
  ];
  for (const [name, command, n] of trivial) {
    progress.update(`ceiling ${name}`);
    const r = await runRedisBenchmark(binary, admin, server.port, n, command);
    out.set(name, { ...r, name });
    progress.done(`ceiling ${name}: ${fmtRate(r.callsPerSecond)} calls/s`);
  }
  await admin.flushall('SYNC');
  return out;
}

function summarize(runs: readonly RoundResult[], bytes: number | undefined): SideSummary {
  const med = (f: (r: RoundResult) => number | undefined): number =>
    median(runs.map((r) => f(r) ?? NaN));
  const decisions = runs.reduce((a, r) => a + r.decisions, 0);
  const allowed = runs.reduce((a, r) => a + r.allowed, 0);
  const errors = runs.reduce((a, r) => a + r.errors, 0);
  const firstError = runs.find((r) => r.firstError !== undefined)?.firstError;
  const hasRedis = runs.some((r) => r.redis !== undefined);
  return {
    decisionsPerSecond: med((r) => r.decisionsPerSecond),
    latencyUs: {
      p50: med((r) => r.latencyUs.p50),
      p99: med((r) => r.latencyUs.p99),
      p999: med((r) => r.latencyUs.p999),
    },
    clientCpuUsPerDecision: med((r) => r.clientCpuUsPerDecision),
    allowedShare: decisions === 0 ? NaN : allowed / decisions,
    errors,
    ...(firstError === undefined ? {} : { firstError }),
    ...(hasRedis
      ? {
          redisCommandUsPerDecision: med((r) => r.redis?.commandUsPerDecision),
          redisScriptUsPerCall: med((r) => r.redis?.scriptUsPerCall),
          redisScriptCallsPerDecision: med((r) => r.redis?.scriptCallsPerDecision),
          redisProcessCpuUsPerDecision: med((r) => r.redis?.processCpuUsPerDecision),
        }
      : {}),
    ...(bytes === undefined ? {} : { redisBytesPerKey: bytes }),
    rounds: runs,
  };
}

async function runScenario(
  s: Scenario,
  index: number,
  ceilings: ReadonlyMap<string, NamedCeiling>,
): Promise<ScenarioResult> {
  const tag = `[${index + 1}/${scenarios.length}] ${s.id}`;
  if (s.store === 'redis') await admin!.flushall('SYNC');
  const ctx: SideContext = {
    ring: ringOf(s.dist),
    sluice,
    ...(server === undefined ? {} : { redisClient: () => server!.client() }),
  };
  const sides: Side[] = [await makeSluice(s, ctx), await makePeer(s, ctx)];
  if (s.store === 'memory') sides.push(makeBare(s, ctx));
  const runs = new Map<SideName, RoundResult[]>(sides.map((x) => [x.name, []]));
  const bytes = new Map<SideName, number>();
  const options = (side: Side): Parameters<typeof drive<unknown>>[1] => ({
    concurrency: s.concurrency,
    durationMs: windowMs,
    allowed: side.allowed,
    sync: side.sync === true,
    // In process, per-decision clock reads would cost as much as a decision: time a sample.
    sampleEvery: s.store === 'memory' ? MEMORY_SAMPLE_EVERY : 1,
  });
  for (const side of sides) {
    progress.update(`${tag} warm-up ${side.name}`);
    await drive(side.op, { ...options(side), durationMs: warmupMs });
  }
  for (let round = 0; round < rounds; round++) {
    // A B C, then C B A: neither side always runs first (or right after the other).
    const order = round % 2 === 0 ? sides : [...sides].reverse();
    for (const side of order) {
      progress.update(`${tag} round ${round + 1}/${rounds} ${side.name}`);
      const close = s.store === 'redis' ? await openWindow(admin!) : undefined;
      const r = await drive(side.op, options(side));
      const redis = close === undefined ? undefined : await close(r.decisions);
      runs.get(side.name)!.push(redis === undefined ? r : { ...r, redis });
      // Right after the side's last window: allow-heavy buckets live about a second.
      if (round === rounds - 1 && side.keyPattern !== undefined) {
        bytes.set(side.name, await bytesPerKey(admin!, side.keyPattern));
      }
    }
  }
  const summaries: Partial<Record<SideName, SideSummary>> = {};
  for (const side of sides) {
    summaries[side.name] = summarize(runs.get(side.name)!, bytes.get(side.name));
    await side.close();
  }
  const sl = runs.get('sluice')!;
  const peer = runs.get('peer')!;
  const ratioToPeer = median(
    sl.map((r, i) => r.decisionsPerSecond / (peer[i]?.decisionsPerSecond ?? NaN)),
  );
  let ceiling: ScenarioResult['ceiling'];
  if (s.store === 'memory') {
    ceiling = {
      label: 'bare Map token bucket',
      decisionsPerSecond: summaries.bare!.decisionsPerSecond,
    };
  } else {
    const c = ceilings.get(ceilingKey(s));
    if (c !== undefined) ceiling = { label: c.name, decisionsPerSecond: c.callsPerSecond };
  }
  const result: ScenarioResult = {
    ...s,
    sides: summaries,
    ratioToPeer,
    ...(ceiling === undefined
      ? {}
      : {
          ceiling,
          ratioToCeiling: summaries.sluice!.decisionsPerSecond / ceiling.decisionsPerSecond,
        }),
    loadAverage1m: os.loadavg()[0]!,
  };
  progress.done(
    `${tag}: Sluice ${fmtRate(summaries.sluice!.decisionsPerSecond)}/s, peer ${fmtRate(summaries.peer!.decisionsPerSecond)}/s (${ratioToPeer.toFixed(2)}x)` +
      (ceiling ? `, ceiling ${fmtRate(ceiling.decisionsPerSecond)}/s` : '') +
      `, p99 ${summaries.sluice!.latencyUs.p99.toFixed(0)} vs ${summaries.peer!.latencyUs.p99.toFixed(0)} µs`,
  );
  return result;
}

async function main(): Promise<void> {
  progress.update(build ? 'building dist (npm run build)' : 'loading dist');
  sluice = await loadSluice(build);
  if (needsRedis) {
    progress.update('starting redis-server');
    server = await RedisServer.start();
    admin = server.client();
    redisVersion = /redis_version:(\S+)/.exec(await admin.info('server'))?.[1];
    progress.done(
      `redis-server ${redisVersion ?? '?'} on 127.0.0.1:${server.port} (pid ${server.pid})`,
    );
  }
  try {
    const ceilings = needsRedis ? await runCeilings() : new Map<string, NamedCeiling>();
    const results: ScenarioResult[] = [];
    for (const [i, s] of scenarios.entries()) results.push(await runScenario(s, i, ceilings));
    const date = new Date().toISOString().slice(0, 10);
    const run: RunResult = {
      date,
      quick,
      machine: {
        cpus: os.cpus().length,
        cpuModel: os.cpus()[0]?.model ?? 'unknown',
        node: process.versions.node,
        ...(redisVersion === undefined ? {} : { redis: redisVersion }),
        loadAverageStart,
        loadAverageEnd: os.loadavg(),
      },
      settings: {
        rounds,
        windowMs,
        warmupMs,
        keys: KEYS,
        ...(only === undefined ? {} : { only }),
      },
      ceilings: [...ceilings.values()],
      scenarios: results,
      targets: evaluateTargets(results),
      seconds: (Date.now() - started) / 1000,
    };
    const dir = path.join(import.meta.dirname, 'results');
    fs.mkdirSync(dir, { recursive: true });
    const base = path.join(dir, `${date}${quick ? '-quick' : ''}`);
    fs.writeFileSync(`${base}.json`, `${JSON.stringify(run, null, 2)}\n`);
    const md = markdown(run);
    fs.writeFileSync(`${base}.md`, md);
    fs.writeFileSync(`${base}.svg`, svgChart(run));
    process.stdout.write(md);
    progress.done(`wrote ${path.relative(process.cwd(), base)}.{json,md,svg}`);
  } finally {
    if (server !== undefined) await server.stop();
  }
}

await main();
