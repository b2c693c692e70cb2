/**
 * HTTP middleware overhead (run with `npx tsx bench/http-middleware.ts [--quick] [--rounds N]`).
 *
 * The same Express 5 app is served twice from a child process (so autocannon, the load
 * generator, never shares the server's event loop): `GET /transfers/:id/status` answering a
 * small JSON body, once bare and once behind `createHttpRateLimit(...).route({ cost: 1 })`
 * on a MemoryStore. The policy is generous (1e9 per second per tenant), so every request
 * is admitted and what is measured is the middleware path: the API key lookup, the
 * limiter check, and the RateLimit headers. Requests carry one of 1,000 API keys in turn
 * (1,000 tenants, 1,000 buckets).
 *
 * Each round runs "without" then "with" (alternating, so drift in machine load hits both):
 * autocannon with 32 connections, a warm-up (2 s) then a measured window (10 s; 1 s and 3 s
 * with `--quick`). Prints a markdown table (req/s, latency p50/p99, errors, the server's
 * CPU in cores and in µs per request, the 1-minute load average) and writes bench/results/http-middleware-<date>.json.
 * Then, in process and without HTTP, µs per `limiter.check` alone and per the middleware's
 * core (`EdgeLimiter.decide`: API key lookup, the same check, headers). Nothing here asserts.
 */
import fs from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import express from 'express';
import { createLimiter } from '../src/local/create-limiter.js';
import { MemoryStore } from '../src/stores/memory/memory-store.js';
import { byApiKey, createHttpRateLimit, EdgeLimiter } from '../src/http.js';
import { serveToParent, startServeChild } from './lib/serve-child.js';

const root = path.join(import.meta.dirname, '..');
const TENANTS = 1_000;
const CONNECTIONS = 32;
const quick = process.argv.includes('--quick');
const roundsArg = process.argv.indexOf('--rounds');
const ROUNDS = roundsArg > 0 ? Number(process.argv[roundsArg + 1]) : 3;
const WARMUP_S = quick ? 1 : 2;
const MEASURE_S = quick ? 3 : 10;

type Mode = 'without' | 'with';
const keyOf = (i: number) => `bench-key-${i}`;

/** Child mode: serve the app, print the port, report CPU on request. */
function serve(mode: Mode): void {
  const app = express();
  const handler: express.RequestHandler = (req, res) => {
    res.json({ transfer: req.params['id'], state: 'settled' });
  };
  if (mode === 'with') {
    const tenants = new Map(Array.from({ length: TENANTS }, (_, i) => [keyOf(i), `t${i}`]));
    const limiter = createLimiter({
      store: new MemoryStore(),
      policies: [{ name: 'bench-tenant', match: ['tenant'], rate: 1e9, burst: 1e9 }],
    });
    const limits = createHttpRateLimit({
      limiter,
      descriptor: byApiKey({ key: 'tenant', resolve: (k) => tenants.get(k) }),
    });
    app.get('/transfers/:id/status', limits.route({ cost: 1 }), handler);
  } else {
    app.get('/transfers/:id/status', handler);
  }
  serveToParent(createServer(app));
}

interface Row {
  readonly round: number;
  readonly mode: Mode;
  readonly requestsPerSecond: number;
  readonly latencyMs: { readonly p50: number; readonly p99: number };
  readonly non2xx: number;
  readonly errors: number;
  readonly serverCpuCores: number;
  /** Server CPU time per request, in µs: less sensitive to a busy machine than req/s. */
  readonly serverCpuMicrosPerRequest: number;
  readonly loadAverage1m: number;
}

function startServer(mode: Mode) {
  return startServeChild(path.join(root, 'bench/http-middleware.ts'), mode);
}

function load(port: number, seconds: number): Promise<autocannon.Result> {
  let i = 0;
  return autocannon({
    url: `http://127.0.0.1:${port}`,
    connections: CONNECTIONS,
    duration: seconds,
    requests: [
      {
        method: 'GET',
        setupRequest: (req) => {
          const n = i++;
          return {
            ...req,
            path: `/transfers/${n % 100_000}/status`,
            headers: { ...req.headers, 'x-api-key': keyOf(n % TENANTS) },
          };
        },
      },
    ],
  });
}

async function measure(round: number, mode: Mode): Promise<Row> {
  const server = await startServer(mode);
  try {
    await load(server.port, WARMUP_S);
    const cpu0 = await server.cpuMicros();
    const r = await load(server.port, MEASURE_S);
    const cpu1 = await server.cpuMicros();
    return {
      round,
      mode,
      requestsPerSecond: Math.round(r.requests.average),
      latencyMs: { p50: r.latency.p50, p99: r.latency.p99 },
      non2xx: r.non2xx,
      errors: r.errors,
      serverCpuCores: Math.round(((cpu1 - cpu0) / 1e6 / r.duration) * 100) / 100,
      serverCpuMicrosPerRequest: Math.round((cpu1 - cpu0) / r.requests.total),
      loadAverage1m: Math.round(os.loadavg()[0]! * 100) / 100,
    };
  } finally {
    await server.stop();
  }
}

/**
 * In-process breakdown, no HTTP: µs per `limiter.check` alone and per `EdgeLimiter.decide`
 * (API key lookup + the same check + headers), sequential, on one event loop.
 */
async function breakdown(): Promise<{ limiterCheckMicros: number; edgeDecideMicros: number }> {
  const tenants = new Map(Array.from({ length: TENANTS }, (_, i) => [keyOf(i), `t${i}`]));
  const limiter = createLimiter({
    store: new MemoryStore(),
    policies: [{ name: 'bench-tenant', match: ['tenant'], rate: 1e9, burst: 1e9 }],
  });
  const edge = new EdgeLimiter<IncomingMessage>({
    limiter,
    descriptor: byApiKey({ key: 'tenant', resolve: (k) => tenants.get(k) }),
  });
  const reqs = Array.from(
    { length: TENANTS },
    (_, i) =>
      ({
        headers: { 'x-api-key': keyOf(i) },
        socket: { remoteAddress: '127.0.0.1' },
      }) as unknown as IncomingMessage,
  );
  const n = quick ? 20_000 : 100_000;
  const route = 'GET /transfers/:id/status';
  let limiterCheckMicros = 0;
  let edgeDecideMicros = 0;
  for (let pass = 0; pass < 2; pass++) {
    // pass 0 warms up; pass 1 is reported
    let t = performance.now();
    for (let i = 0; i < n; i++) {
      await limiter.check({ tenant: `t${i % TENANTS}`, route }, { cost: 1 });
    }
    limiterCheckMicros = ((performance.now() - t) * 1000) / n;
    t = performance.now();
    for (let i = 0; i < n; i++) {
      const req = reqs[i % TENANTS]!;
      await edge.decide(req, req, route, { cost: 1 });
    }
    edgeDecideMicros = ((performance.now() - t) * 1000) / n;
  }
  const round1 = (x: number) => Math.round(x * 10) / 10;
  return {
    limiterCheckMicros: round1(limiterCheckMicros),
    edgeDecideMicros: round1(edgeDecideMicros),
  };
}

async function main(): Promise<void> {
  const rows: Row[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    for (const mode of ['without', 'with'] as const) rows.push(await measure(round, mode));
  }
  const header =
    '| round | middleware | req/s | p50 ms | p99 ms | non-2xx | errors | server CPU (cores) | server CPU µs/req | load avg (1m) |';
  console.log(header);
  console.log('| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const r of rows) {
    console.log(
      `| ${r.round} | ${r.mode} | ${r.requestsPerSecond} | ${r.latencyMs.p50} | ${r.latencyMs.p99} | ${r.non2xx} | ${r.errors} | ${r.serverCpuCores} | ${r.serverCpuMicrosPerRequest} | ${r.loadAverage1m} |`,
    );
  }
  for (let round = 1; round <= ROUNDS; round++) {
    const [a, b] = rows.filter((r) => r.round === round);
    const ratio = b!.requestsPerSecond / a!.requestsPerSecond;
    const cpu = b!.serverCpuMicrosPerRequest - a!.serverCpuMicrosPerRequest;
    console.log(
      `round ${round}: with/without req/s = ${ratio.toFixed(3)}; CPU per request +${cpu} µs`,
    );
  }
  const inProcess = await breakdown();
  console.log(
    `in process: limiter.check ${inProcess.limiterCheckMicros} µs, edge.decide ${inProcess.edgeDecideMicros} µs (load avg ${os.loadavg()[0]!.toFixed(2)})`,
  );
  const date = new Date().toISOString().slice(0, 10);
  const dir = path.join(root, 'bench/results');
  fs.mkdirSync(dir, { recursive: true });
  let file = path.join(dir, `http-middleware-${date}.json`);
  for (let n = 2; fs.existsSync(file); n++)
    file = path.join(dir, `http-middleware-${date}-run${n}.json`);
  const meta = {
    node: process.version,
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model,
    connections: CONNECTIONS,
    warmupS: WARMUP_S,
    measureS: MEASURE_S,
    tenants: TENANTS,
  };
  fs.writeFileSync(file, `${JSON.stringify({ meta, rows, inProcess }, null, 2)}\n`);
  console.log(`wrote ${path.relative(root, file)}`);
}

const serveAt = process.argv.indexOf('--serve');
if (serveAt > 0) serve(process.argv[serveAt + 1] as Mode);
else await main();
