/**
 * Overhead of the admission boundary (run with `npx tsx bench/overload.ts [--quick]`).
 *
 * 1. In process, sequential, no HTTP: µs per `admit()` + `release()` for a fixed limit
 *    and for the full boundary (gradient limit, queue, breaker); and µs per
 *    `EdgeLimiter.decide` (the HTTP edge's core: descriptor, rate check, headers) without
 *    and with the boundary. Nothing waits: the limit is never reached.
 * 2. Through Express: the same app served from a child process (so autocannon never
 *    shares its event loop), with the rate limit only and with the rate limit plus the
 *    boundary; 32 connections, alternating rounds. The server's CPU time per request is
 *    the figure to compare (less sensitive to a busy machine than req/s).
 *
 * Prints markdown tables and writes bench/results/overload-<date>.json. Nothing asserts.
 */
import fs from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import express from 'express';
import { createHttpRateLimit, EdgeLimiter } from '../src/http.js';
import { createLimiter } from '../src/local/create-limiter.js';
import { createAdmissionBoundary, type AdmissionBoundaryOptions } from '../src/overload.js';
import { MemoryStore } from '../src/stores/memory/memory-store.js';
import { serveToParent, startServeChild } from './lib/serve-child.js';

const root = path.join(import.meta.dirname, '..');
const quick = process.argv.includes('--quick');
const ROUNDS = quick ? 1 : 3;
const WARMUP_S = quick ? 1 : 2;
const MEASURE_S = quick ? 3 : 8;
const CONNECTIONS = 32;

/** The full boundary, with room for the load: nothing is shed, only the path is timed. */
const FULL: AdmissionBoundaryOptions = {
  limit: { algorithm: 'gradient', initial: 100, max: 1000 },
  queue: { size: 100, maxWait: '1s' },
  breaker: { minimumCalls: 20 },
};

const limiterOf = () =>
  createLimiter({
    store: new MemoryStore(),
    policies: [{ name: 'bench-tenant', match: ['tenant'], rate: 1e9, burst: 1e9 }],
  });

type Mode = 'rate' | 'rate+overload';

function serve(mode: Mode): void {
  const limits = createHttpRateLimit({
    limiter: limiterOf(),
    descriptor: () => ({ tenant: 'bench' }),
    ...(mode === 'rate+overload' ? { overload: createAdmissionBoundary(FULL) } : {}),
  });
  const app = express();
  app.get('/items/:id', limits.route(), (req, res) => {
    res.json({ item: req.params['id'] });
  });
  serveToParent(createServer(app));
}

async function throughExpress(round: number, mode: Mode) {
  const {
    port,
    cpuMicros: cpu,
    stop,
  } = await startServeChild(path.join(root, 'bench/overload.ts'), mode);
  const load = (seconds: number) =>
    autocannon({
      url: `http://127.0.0.1:${port}/items/1`,
      connections: CONNECTIONS,
      duration: seconds,
    });
  try {
    await load(WARMUP_S);
    const c0 = await cpu();
    const r = await load(MEASURE_S);
    const c1 = await cpu();
    return {
      round,
      mode,
      requestsPerSecond: Math.round(r.requests.average),
      latencyMs: { p50: r.latency.p50, p99: r.latency.p99 },
      non2xx: r.non2xx,
      serverCpuMicrosPerRequest: Math.round(((c1 - c0) / r.requests.total) * 10) / 10,
      loadAverage1m: Math.round(os.loadavg()[0]! * 100) / 100,
    };
  } finally {
    await stop();
  }
}

async function timeMicros(n: number, op: () => Promise<void> | void): Promise<number> {
  let result = 0;
  for (let pass = 0; pass < 2; pass++) {
    // pass 0 warms up; pass 1 is reported
    const t = performance.now();
    for (let i = 0; i < n; i++) await op();
    result = ((performance.now() - t) * 1000) / n;
  }
  return Math.round(result * 100) / 100;
}

async function inProcess() {
  const n = quick ? 50_000 : 300_000;
  const fixed = createAdmissionBoundary({
    limit: { algorithm: 'fixed', limit: 100 },
    queue: false,
  });
  const full = createAdmissionBoundary(FULL);
  const cycle = (b: ReturnType<typeof createAdmissionBoundary>) => async () => {
    const a = await b.admit({ criticality: 'CRITICAL' });
    if (a.admitted) a.permit.release('success');
  };
  const req = { headers: {}, socket: { remoteAddress: '127.0.0.1' } } as unknown as IncomingMessage;
  const edge = (overload: boolean) => {
    const e = new EdgeLimiter<IncomingMessage>({
      limiter: limiterOf(),
      descriptor: () => ({ tenant: 'bench' }),
      ...(overload ? { overload: createAdmissionBoundary(FULL) } : {}),
    });
    return async () => {
      const v = await e.decide(req, req, 'GET /items/:id');
      if (v.pass) v.permit?.release('success');
    };
  };
  return {
    emptyAsyncMicros: await timeMicros(n, async () => {}),
    fixedAdmitReleaseMicros: await timeMicros(n, cycle(fixed)),
    fullAdmitReleaseMicros: await timeMicros(n, cycle(full)),
    edgeDecideMicros: await timeMicros(n / 2, edge(false)),
    edgeDecideWithOverloadMicros: await timeMicros(n / 2, edge(true)),
  };
}

async function main(): Promise<void> {
  const serveAt = process.argv.indexOf('--serve');
  if (serveAt > 0) {
    serve(process.argv[serveAt + 1] as Mode);
    return;
  }
  const inproc = await inProcess();
  console.log('\n| in process (sequential, µs per op) | µs |\n|---|---|');
  for (const [k, v] of Object.entries(inproc)) console.log(`| ${k} | ${v} |`);
  const rows = [];
  for (let round = 1; round <= ROUNDS; round++) {
    for (const mode of ['rate', 'rate+overload'] as const)
      rows.push(await throughExpress(round, mode));
  }
  console.log(
    '\n| round | mode | req/s | p50 ms | p99 ms | non-2xx | server CPU µs/req | load 1m |\n|---|---|---|---|---|---|---|---|',
  );
  for (const r of rows) {
    console.log(
      `| ${r.round} | ${r.mode} | ${r.requestsPerSecond} | ${r.latencyMs.p50} | ${r.latencyMs.p99} | ${r.non2xx} | ${r.serverCpuMicrosPerRequest} | ${r.loadAverage1m} |`,
    );
  }
  const out = path.join(
    root,
    'bench/results',
    `overload-${new Date().toISOString().slice(0, 10)}.json`,
  );
  fs.writeFileSync(
    out,
    JSON.stringify(
      {
        when: new Date().toISOString(),
        quick,
        cpus: os.cpus().length,
        inProcess: inproc,
        express: rows,
      },
      null,
      2,
    ) + '\n',
  );
  console.log(`\nwrote ${path.relative(root, out)}`);
}

await main();
