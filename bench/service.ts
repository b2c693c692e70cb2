/**
 * Service throughput and latency (run with
 * `npx tsx bench/service.ts [--quick] [--build] [--before <dir>] [--rounds <n>]`).
 *
 * Runs `node dist/cli/main.js serve` in a child process (building first with `npm run build`
 * when dist is missing, or always with `--build`), so the load generator here and the server
 * never share an event loop. The server gets a temporary envoy config with one generous rule
 * (domain `bench`, key `tenant`, 1e9 per second), so nearly every call is OK and what is
 * measured is the service path, not denials. Tenant values follow a Zipf(s = 1) spread over
 * 10,000 values, as real traffic is skewed.
 *
 * Scenarios: gRPC `ShouldRateLimit` (envoy RLS v3, a few @grpc/grpc-js channels) and HTTP
 * `POST /json` (Node's global fetch, keep-alive), each on the embedded memory store and on
 * Redis (a redis-server on loopback from test/support's harness, passed as `--redis`). Each
 * runs 64 concurrent callers in closed loop: a warm-up, then a measured window (10 s, or 2 s
 * with `--quick`). Prints a markdown table (calls/s, p50/p99/p99.9 latency, errors, and the
 * CPU both processes used) and writes bench/results/service-<date>.json. Nothing here asserts.
 *
 * `--before <dir>` runs another checkout's build (its own dist/, built there first if
 * missing) as a second server in the same run: per store and round, each scenario on this
 * build and then on that one, so both see the same machine; the table gives each row's
 * build and a summary of server CPU per call, this build over that one (the load
 * generator, not the server, bounds calls/s on a small machine). `--rounds <n>` (default 1)
 * repeats that.
 */
import { type ChildProcess, execSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import * as grpc from '@grpc/grpc-js';
import { RLS_SERVICE } from '../src/protocol/protos.js';
import { freePort } from '../test/support/free-port.js';
import { zipfSampler } from './lib/rng.js';
import { RedisServer } from '../test/support/redis-server.js';

const root = path.join(import.meta.dirname, '..');
const quick = process.argv.includes('--quick');
const forceBuild = process.argv.includes('--build');

/** The value after flag `name`, or `undefined`; a flag without one is an error. */
function flagValue(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  if (i === -1) return undefined;
  const value = process.argv[i + 1];
  if (value === undefined || value.startsWith('--')) {
    throw new Error(`bench/service.ts: ${name} needs a value`);
  }
  return value;
}
const beforeRoot = ((): string | undefined => {
  const dir = flagValue('--before');
  if (dir === undefined) return undefined;
  const abs = path.resolve(dir);
  if (!fs.existsSync(path.join(abs, 'package.json'))) {
    throw new Error(
      `bench/service.ts: --before ${dir}: no package.json there (a checkout of sluice?)`,
    );
  }
  return abs;
})();
const ROUNDS = ((): number => {
  const raw = flagValue('--rounds') ?? '1';
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 1 || n > 20) {
    throw new Error(`bench/service.ts: --rounds must be an integer from 1 to 20, got ${raw}`);
  }
  return n;
})();

const CONCURRENCY = 64;
const GRPC_CHANNELS = 4;
const TENANTS = 10_000;
const ZIPF_S = 1;
const WARMUP_MS = quick ? 1_000 : 2_000;
const MEASURE_MS = quick ? 2_000 : 10_000;
const CALL_TIMEOUT_MS = 5_000;

type Transport = 'grpc' | 'http';
type StoreKind = 'memory' | 'redis';

/** Which build served: this checkout, or the `--before` one. */
type Build = 'this' | 'before';

interface Result {
  readonly build: Build;
  readonly round: number;
  readonly transport: Transport;
  readonly store: StoreKind;
  readonly calls: number;
  readonly seconds: number;
  readonly callsPerSecond: number;
  readonly latencyMs: { readonly p50: number; readonly p99: number; readonly p999: number };
  readonly ok: number;
  readonly overLimit: number;
  readonly errors: number;
  readonly firstError?: string;
  /** CPU time over the measured window as a share of one core (1 = one core busy). */
  readonly serverCpuCores?: number;
  readonly loadGeneratorCpuCores: number;
  /** 1-minute load average when the window ended: other work on the machine shows here. */
  readonly loadAverage1m: number;
}

// ---------------------------------------------------------------------------------------
// Workload: Zipf-distributed tenants, requests prepared once.

const nextTenant = zipfSampler(TENANTS, ZIPF_S, Math.random);
const requests = Array.from({ length: TENANTS }, (_, i) => ({
  domain: 'bench',
  descriptors: [{ entries: [{ key: 'tenant', value: `tenant-${i}` }] }],
}));
const bodies = requests.map((r) => JSON.stringify(r));

const ENVOY_CONFIG = `# bench/service.ts: one generous rule, so nearly every call is OK.
domain: bench
descriptors:
  - key: tenant
    rate_limit:
      unit: second
      requests_per_unit: 1000000000
`;

// ---------------------------------------------------------------------------------------
// The server, in a child process.

interface Server {
  readonly child: ChildProcess;
  readonly httpPort: number;
  readonly grpcPort: number;
  stop(): Promise<void>;
}

function ensureBuilt(dir: string, force: boolean): void {
  const cli = path.join(dir, 'dist/cli/main.js');
  if (force || !fs.existsSync(cli)) {
    console.error(`building dist in ${dir} (npm run build)…`);
    execSync('npm run build', { cwd: dir, stdio: 'inherit' });
  }
}

async function startServer(dir: string, configDir: string, redisUrl?: string): Promise<Server> {
  const httpPort = await freePort();
  let grpcPort = await freePort();
  while (grpcPort === httpPort) grpcPort = await freePort();
  const args = ['dist/cli/main.js', 'serve', '--config', configDir];
  if (redisUrl !== undefined) args.push('--redis', redisUrl);
  const child = spawn(process.execPath, args, {
    cwd: dir,
    env: {
      ...process.env,
      PORT: String(httpPort),
      GRPC_PORT: String(grpcPort),
      HOST: '127.0.0.1',
      GRPC_HOST: '127.0.0.1',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output}`)), 20_000);
    const onData = (chunk: Buffer): void => {
      output += chunk.toString();
      if (output.includes('sluice serving')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`server exited (${String(code ?? signal)}) before serving:\n${output}`));
    });
  });
  // Keep draining its logs (errors would be logged there) without holding them all.
  child.stdout!.removeAllListeners('data').resume();
  child.stderr!.removeAllListeners('data').resume();
  return {
    child,
    httpPort,
    grpcPort,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** utime + stime of a process in seconds, from /proc (Linux); undefined elsewhere. */
function processCpuSeconds(pid: number): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields after "(comm) ": state is index 0, so utime (field 14) is index 11.
    const ticks = Number(fields[11]) + Number(fields[12]);
    return ticks / clockTicks;
  } catch {
    return undefined;
  }
}
const clockTicks = ((): number => {
  try {
    return Number(execSync('getconf CLK_TCK', { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

// ---------------------------------------------------------------------------------------
// Callers.

type Outcome = 'ok' | 'over' | 'error';
type Caller = (tenant: number) => Promise<Outcome>;

type UnaryMethod = (
  request: unknown,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
  callback: (error: grpc.ServiceError | null, response?: { overallCode?: string }) => void,
) => grpc.ClientUnaryCall;

const Rls = grpc.makeGenericClientConstructor(RLS_SERVICE, 'RateLimitService');
let lastError: string | undefined;

function grpcCallers(port: number): { callers: Caller[]; close(): void } {
  // Separate subchannel pools, so the channels are separate HTTP/2 connections.
  const clients = Array.from(
    { length: GRPC_CHANNELS },
    () =>
      new Rls(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
        'grpc.use_local_subchannel_pool': 1,
      }),
  );
  const callers = clients.map((client): Caller => {
    const fn = (client as unknown as Record<string, UnaryMethod>)['ShouldRateLimit']!;
    return (tenant) =>
      new Promise((resolve) => {
        fn.call(
          client,
          requests[tenant],
          new grpc.Metadata(),
          { deadline: Date.now() + CALL_TIMEOUT_MS },
          (error, response) => {
            if (error !== null) {
              lastError = `gRPC ${error.code}: ${error.details}`;
              resolve('error');
            } else if (response?.overallCode === 'OK') resolve('ok');
            else if (response?.overallCode === 'OVER_LIMIT') resolve('over');
            else {
              lastError = `gRPC overallCode ${String(response?.overallCode)}`;
              resolve('error');
            }
          },
        );
      });
  });
  return { callers, close: () => clients.forEach((c) => c.close()) };
}

function httpCallers(port: number): { callers: Caller[]; close(): void } {
  const url = `http://127.0.0.1:${port}/json`;
  const caller: Caller = async (tenant) => {
    try {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: bodies[tenant]!,
        signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
      });
      const text = await res.text();
      if (res.status === 200) return 'ok';
      if (res.status === 429) return 'over';
      lastError = `HTTP ${res.status}: ${text.slice(0, 200)}`;
      return 'error';
    } catch (error) {
      lastError = `fetch: ${String(error)}`;
      return 'error';
    }
  };
  return { callers: [caller], close: () => undefined };
}

// ---------------------------------------------------------------------------------------
// Closed-loop load.

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1);
  return sorted[Math.max(0, i)]!;
}

async function run(
  build: Build,
  round: number,
  transport: Transport,
  store: StoreKind,
  server: Server,
  callers: readonly Caller[],
): Promise<Result> {
  let measuring = false;
  let stop = false;
  const latencies: number[] = [];
  let ok = 0;
  let overLimit = 0;
  let errors = 0;
  lastError = undefined;
  const worker = async (w: number): Promise<void> => {
    const call = callers[w % callers.length]!;
    while (!stop) {
      const tenant = nextTenant();
      const t0 = performance.now();
      const outcome = await call(tenant);
      const ms = performance.now() - t0;
      if (!measuring || stop) continue;
      latencies.push(ms);
      if (outcome === 'ok') ok++;
      else if (outcome === 'over') overLimit++;
      else errors++;
    }
  };
  const workers = Array.from({ length: CONCURRENCY }, (_, w) => worker(w));
  await sleep(WARMUP_MS);
  const errorBeforeWindow = lastError;
  lastError = undefined;
  const serverCpu0 = processCpuSeconds(server.child.pid!);
  const ownCpu0 = process.cpuUsage();
  const t0 = performance.now();
  measuring = true;
  await sleep(MEASURE_MS);
  stop = true;
  const seconds = (performance.now() - t0) / 1000;
  const serverCpu1 = processCpuSeconds(server.child.pid!);
  const ownCpu = process.cpuUsage(ownCpu0);
  await Promise.all(workers);
  const sorted = Float64Array.from(latencies).sort();
  const r3 = (x: number): number => Math.round(x * 1000) / 1000;
  const firstError = lastError ?? (errors > 0 ? errorBeforeWindow : undefined);
  return {
    build,
    round,
    transport,
    store,
    calls: latencies.length,
    seconds: r3(seconds),
    callsPerSecond: Math.round(latencies.length / seconds),
    latencyMs: {
      p50: r3(percentile(sorted, 0.5)),
      p99: r3(percentile(sorted, 0.99)),
      p999: r3(percentile(sorted, 0.999)),
    },
    ok,
    overLimit,
    errors,
    ...(firstError === undefined ? {} : { firstError }),
    ...(serverCpu0 === undefined || serverCpu1 === undefined
      ? {}
      : { serverCpuCores: r3((serverCpu1 - serverCpu0) / seconds) }),
    loadGeneratorCpuCores: r3((ownCpu.user + ownCpu.system) / 1e6 / seconds),
    loadAverage1m: r3(os.loadavg()[0]!),
  };
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function scenarios(
  build: Build,
  round: number,
  store: StoreKind,
  configDir: string,
  redisUrl?: string,
): Promise<Result[]> {
  const server = await startServer(build === 'this' ? root : beforeRoot!, configDir, redisUrl);
  const results: Result[] = [];
  try {
    for (const transport of ['grpc', 'http'] as const) {
      const { callers, close } =
        transport === 'grpc' ? grpcCallers(server.grpcPort) : httpCallers(server.httpPort);
      try {
        const result = await run(build, round, transport, store, server, callers);
        console.error(
          `${build === 'this' ? '' : 'before '}${transport}/${store} (round ${round}): ` +
            `${result.callsPerSecond} calls/s, p50 ${result.latencyMs.p50} ms, ` +
            `errors ${result.errors}${result.firstError === undefined ? '' : ` (${result.firstError})`}`,
        );
        results.push(result);
      } finally {
        close();
      }
    }
  } finally {
    await server.stop();
  }
  return results;
}

/** Every scenario of `store`: per round, this build and then the `--before` one. */
async function storeRounds(
  store: StoreKind,
  configDir: string,
  redisUrl?: string,
): Promise<Result[]> {
  const out: Result[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    out.push(...(await scenarios('this', round, store, configDir, redisUrl)));
    if (beforeRoot !== undefined) {
      out.push(...(await scenarios('before', round, store, configDir, redisUrl)));
    }
  }
  return out;
}

/** Server CPU per call in µs, or undefined without a CPU reading. */
function cpuMicrosPerCall(r: Result): number | undefined {
  if (r.serverCpuCores === undefined || r.callsPerSecond === 0) return undefined;
  return (r.serverCpuCores / r.callsPerSecond) * 1e6;
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** Per scenario: median server µs/call and calls/s of each build, and their ratios. */
function beforeAfterLines(results: readonly Result[]): string[] {
  const lines = [
    '| transport | store | server µs/call this / before | ratio | calls/s this / before | ratio |',
    '|---|---|--:|--:|--:|--:|',
  ];
  for (const store of ['memory', 'redis'] as const) {
    for (const transport of ['grpc', 'http'] as const) {
      const of = (build: Build): Result[] =>
        results.filter((r) => r.build === build && r.store === store && r.transport === transport);
      const cpu = (build: Build): number =>
        median(of(build).flatMap((r) => cpuMicrosPerCall(r) ?? []));
      const rate = (build: Build): number => median(of(build).map((r) => r.callsPerSecond));
      const [c1, c0, r1, r0] = [cpu('this'), cpu('before'), rate('this'), rate('before')];
      lines.push(
        `| ${transport === 'grpc' ? 'gRPC ShouldRateLimit' : 'HTTP POST /json'} | ${store} | ` +
          `${fmt(c1)} / ${fmt(c0)} | ${fmt(c1 / c0)}x | ${fmt(r1)} / ${fmt(r0)} | ${fmt(r1 / r0)}x |`,
      );
    }
  }
  return lines;
}

const fmt = (x: number): string => x.toLocaleString('en-US', { maximumFractionDigits: 2 });

// ---------------------------------------------------------------------------------------

ensureBuilt(root, forceBuild);
if (beforeRoot !== undefined) ensureBuilt(beforeRoot, false);
const loadAverageAtStart = os.loadavg();
const configDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-bench-'));
fs.writeFileSync(path.join(configDir, 'config.yaml'), ENVOY_CONFIG);
const results: Result[] = [];
let redisVersion: string | undefined;
try {
  results.push(...(await storeRounds('memory', configDir)));
  const redis = await RedisServer.start();
  try {
    const client = redis.client();
    redisVersion = /redis_version:(\S+)/.exec(await client.info('server'))?.[1];
    results.push(...(await storeRounds('redis', configDir, redis.url)));
  } finally {
    await redis.stop();
  }
} finally {
  fs.rmSync(configDir, { recursive: true, force: true });
}

const header =
  `Sluice service, ${CONCURRENCY} concurrent callers, ${MEASURE_MS / 1000} s measured after ` +
  `${WARMUP_MS / 1000} s warm-up; ${TENANTS.toLocaleString('en-US')} tenants, Zipf s=${ZIPF_S}; ` +
  `Node ${process.version}, ${os.cpus().length} CPUs, redis-server ${redisVersion ?? '?'}` +
  (quick ? ' (--quick)' : '') +
  (beforeRoot === undefined ? '' : `; "before" is the build at ${beforeRoot}, ${ROUNDS} round(s)`);
const lines = [
  '| build | transport | store | calls/s | p50 ms | p99 ms | p99.9 ms | errors | over limit | server CPU (cores) | load generator CPU (cores) | load avg (1m) |',
  '|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ...results.map(
    (r) =>
      `| ${r.build} | ${r.transport === 'grpc' ? 'gRPC ShouldRateLimit' : 'HTTP POST /json'} | ${r.store} | ` +
      `${fmt(r.callsPerSecond)} | ${fmt(r.latencyMs.p50)} | ${fmt(r.latencyMs.p99)} | ` +
      `${fmt(r.latencyMs.p999)} | ${fmt(r.errors)} | ${fmt(r.overLimit)} | ` +
      `${r.serverCpuCores === undefined ? '?' : fmt(r.serverCpuCores)} | ${fmt(r.loadGeneratorCpuCores)} | ${fmt(r.loadAverage1m)} |`,
  ),
];
const summary = beforeRoot === undefined ? '' : `\n\n${beforeAfterLines(results).join('\n')}`;
console.log(`${header}\n\n${lines.join('\n')}${summary}`);

const date = new Date().toISOString().slice(0, 10);
const outDir = path.join(root, 'bench/results');
fs.mkdirSync(outDir, { recursive: true });
const outFile = path.join(outDir, `service-${date}${quick ? '-quick' : ''}.json`);
fs.writeFileSync(
  outFile,
  `${JSON.stringify(
    {
      date: new Date().toISOString(),
      quick,
      ...(beforeRoot === undefined ? {} : { before: beforeRoot, rounds: ROUNDS }),
      machine: {
        cpus: os.cpus().length,
        cpuModel: os.cpus()[0]?.model,
        memoryGiB: Math.round(os.totalmem() / 2 ** 30),
        platform: `${os.platform()} ${os.release()}`,
        node: process.version,
        redis: redisVersion,
      },
      workload: {
        concurrency: CONCURRENCY,
        grpcChannels: GRPC_CHANNELS,
        warmupMs: WARMUP_MS,
        measureMs: MEASURE_MS,
        tenants: TENANTS,
        zipfS: ZIPF_S,
        rule: 'domain bench, key tenant, 1e9 per second',
      },
      loadAverageAtStart,
      results,
    },
    null,
    2,
  )}\n`,
);
console.error(`\nwrote ${path.relative(root, outFile)}`);
