/**
 * Sluice benchmarks (issues 8 and 16): `npm run bench`, or `npm run bench -- --quick` for a
 * short smoke run. Options: `--only <s>[,<s>…]` keeps scenarios whose id contains any of
 * the given substrings (e.g. `--only redis`, `--only memory/c64/zipf`); `--headline` keeps
 * issue 16's rows (scenarios.ts HEADLINE); `--rounds N` and `--window <ms>` override the
 * round count and the measured window per side; `--before <dir>` adds a baseline build of
 * Sluice (another checkout, its dist/ built) as side "before" in every row. Sluice runs
 * from dist/ as built by `npm run build`, which runs first (`--no-build` skips it).
 *
 * Two modes. One process (the default): every side runs in this process, Redis and Node
 * floating over the cores. Pinned (`--pinned`, or `npm run bench:pinned`; the headline
 * rows and 5 rounds unless told): redis-server pinned with `taskset` to core 0, and each
 * side a Node process of its own (bench/lib/side-child.ts) pinned to core 1, so a side's
 * client CPU is its own process's and no side shares a core with Redis.
 *
 * Starts its own redis-server on a free loopback port (test/support's harness; stopped by
 * PID at the end) when any Redis scenario is selected. Each scenario runs its sides in
 * interleaved rounds (A B C, then C B A, …), closed loop at the scenario's concurrency,
 * and reports medians over rounds. Redis ceilings (one-process mode, not with
 * `--headline`) come from replaying the exact script call Sluice sends
 * (bench/lib/script-ceiling.ts). Writes bench/results/<yyyy-mm-dd>[-pinned|-headline][-quick].{json,md,svg}
 * and prints the markdown on stdout. Nothing here asserts on timings.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { addUserWithoutFunctions, RedisServer } from '../test/support/redis-server.js';
import { findRedisBenchmark, runRedisBenchmark } from './lib/ceiling.js';
import { captureScriptCallRaw, runScriptCeiling } from './lib/script-ceiling.js';
import { drive, median, type DriveResult } from './lib/driver.js';
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
import { startChild } from './lib/serve-child.js';
import { loadSluice, type SluiceModules } from './lib/sluice.js';
import {
  HEADLINE,
  KEYS,
  ROUTES,
  SEED,
  allScenarios,
  driveOptions,
  makeSide,
  sideNames,
  sluicePolicies,
  type Scenario,
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
const pinned = process.argv.includes('--pinned');
const headline = pinned || process.argv.includes('--headline');
const beforeDir = argValue('--before');
const only = argValue('--only')
  ?.split(',')
  .map((s) => s.trim())
  .filter((s) => s !== '');
const rounds = Number(argValue('--rounds') ?? (quick ? 2 : pinned ? 5 : 3));
const windowMs = Number(argValue('--window') ?? (quick ? 250 : 1_000));
const warmupMs = quick ? 100 : 250;
/** Requests per ceiling: script calls (replayed), then the trivial commands (redis-benchmark). */
const CEILING_REQUESTS = quick ? 20_000 : 60_000;
const TRIVIAL_REQUESTS = quick ? 100_000 : 400_000;
/** Pinned mode: redis-server's core, and the one every side's process runs on. */
const REDIS_CORE = '0';
const SIDE_CORE = '1';

const scenarios = allScenarios().filter((s) =>
  only !== undefined
    ? only.some((o) => s.id.includes(o))
    : !headline || (HEADLINE as readonly string[]).includes(s.id),
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
let before: SluiceModules | undefined;
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

/** One side of a scenario as the rounds drive it: in this process, or a pinned child. */
interface Contender {
  readonly name: SideName;
  /** Redis key pattern of its buckets (for MEMORY USAGE), when on Redis. */
  readonly keyPattern?: string;
  drive(durationMs: number): Promise<DriveResult>;
  close(): Promise<void>;
}

async function inProcess(name: SideName, s: Scenario, ctx: SideContext): Promise<Contender> {
  const side = await makeSide(name, s, ctx);
  return {
    name,
    ...(side.keyPattern === undefined ? {} : { keyPattern: side.keyPattern }),
    drive: (ms) => drive(side.op, driveOptions(s, side, ms)),
    close: () => side.close(),
  };
}

async function pinnedChild(name: SideName, s: Scenario): Promise<Contender> {
  const child = await startChild(
    path.join(import.meta.dirname, 'lib', 'side-child.ts'),
    [
      '--scenario',
      s.id,
      '--side',
      name,
      ...(server === undefined ? [] : ['--redis-port', String(server.port)]),
      ...(beforeDir === undefined ? [] : ['--before', beforeDir]),
    ],
    SIDE_CORE,
  );
  const keyPattern = name === 'peer' ? 'rlf*' : name.startsWith('before') ? 'slbb:*' : 'slb:*';
  return {
    name,
    ...(s.store === 'redis' && name !== 'bare' ? { keyPattern } : {}),
    drive: async (ms) =>
      JSON.parse((await child.request(`drive ${ms}`)).slice('result '.length)) as DriveResult,
    close: async () => {
      await child.request('close');
      await child.stop();
    },
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
    ...(before === undefined ? {} : { before }),
    ...(server === undefined ? {} : { redisPort: server.port }),
  };
  const sides: Contender[] = [];
  for (const name of sideNames(s, before !== undefined)) {
    progress.update(`${tag} starting ${name}`);
    sides.push(pinned ? await pinnedChild(name, s) : await inProcess(name, s, ctx));
  }
  const runs = new Map<SideName, RoundResult[]>(sides.map((x) => [x.name, []]));
  const bytes = new Map<SideName, number>();
  for (const side of sides) {
    progress.update(`${tag} warm-up ${side.name}`);
    await side.drive(warmupMs);
  }
  for (let round = 0; round < rounds; round++) {
    // A B C, then C B A: neither side always runs first (or right after the other).
    const order = round % 2 === 0 ? sides : [...sides].reverse();
    for (const side of order) {
      progress.update(`${tag} round ${round + 1}/${rounds} ${side.name}`);
      const close = s.store === 'redis' ? await openWindow(admin!) : undefined;
      const r = await side.drive(windowMs);
      const redis = close === undefined ? undefined : await close(r.decisions);
      runs.get(side.name)!.push(redis === undefined ? r : { ...r, redis });
      // Right after the side's last window: allow-heavy buckets live about a second.
      if (round === rounds - 1 && side.keyPattern !== undefined) {
        bytes.set(side.name, await bytesPerKey(admin!, side.keyPattern));
      }
    }
  }
  const summaries: Partial<Record<SideName, SideSummary>> = {};
  const ratios: Partial<Record<SideName, number>> = {};
  const peer = runs.get('peer')!;
  for (const side of sides) {
    const mine = runs.get(side.name)!;
    summaries[side.name] = summarize(mine, bytes.get(side.name));
    // Each round's sides ran back to back: the ratio within a round is the robust figure.
    ratios[side.name] = median(
      mine.map((r, i) => r.decisionsPerSecond / (peer[i]?.decisionsPerSecond ?? NaN)),
    );
    await side.close();
  }
  const ratioToPeer = ratios.sluice!;
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
    ratios,
    ...(ceiling === undefined
      ? {}
      : {
          ceiling,
          ratioToCeiling: summaries.sluice!.decisionsPerSecond / ceiling.decisionsPerSecond,
        }),
    loadAverage1m: os.loadavg()[0]!,
  };
  progress.done(
    `${tag}: ` +
      sides.map((x) => `${x.name} ${fmtRate(summaries[x.name]!.decisionsPerSecond)}/s`).join(', ') +
      ` (${ratioToPeer.toFixed(2)}x)` +
      (ceiling ? `, ceiling ${fmtRate(ceiling.decisionsPerSecond)}/s` : '') +
      `, p99 ${summaries.sluice!.latencyUs.p99.toFixed(0)} vs ${summaries.peer!.latencyUs.p99.toFixed(0)} µs`,
  );
  return result;
}

async function main(): Promise<void> {
  progress.update(build ? 'building dist (npm run build)' : 'loading dist');
  sluice = await loadSluice(build);
  if (beforeDir !== undefined) {
    // Its dist/ as it was built there (its own `npm ci && npm run build`).
    progress.update(`loading the baseline from ${beforeDir}/dist`);
    before = await loadSluice(false, path.resolve(beforeDir));
  }
  if (needsRedis) {
    progress.update('starting redis-server');
    server = await RedisServer.start();
    // All of its threads (I/O, background) on its core.
    if (pinned) execFileSync('taskset', ['-a', '-cp', REDIS_CORE, String(server.pid)]);
    admin = server.client();
    redisVersion = /redis_version:(\S+)/.exec(await admin.info('server'))?.[1];
    progress.done(
      `redis-server ${redisVersion ?? '?'} on 127.0.0.1:${server.port} (pid ${server.pid})`,
    );
  }
  try {
    const ceilings =
      needsRedis && !headline ? await runCeilings() : new Map<string, NamedCeiling>();
    const results: ScenarioResult[] = [];
    for (const [i, s] of scenarios.entries()) results.push(await runScenario(s, i, ceilings));
    const date = new Date().toISOString().slice(0, 10);
    const run: RunResult = {
      date,
      quick,
      mode: pinned ? 'pinned' : 'one-process',
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
        ...(beforeDir === undefined ? {} : { before: path.resolve(beforeDir) }),
      },
      ceilings: [...ceilings.values()],
      scenarios: results,
      targets: evaluateTargets(results),
      seconds: (Date.now() - started) / 1000,
    };
    const dir = path.join(import.meta.dirname, 'results');
    fs.mkdirSync(dir, { recursive: true });
    const tag = pinned ? '-pinned' : headline ? '-headline' : '';
    const base = path.join(dir, `${date}${tag}${quick ? '-quick' : ''}`);
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
