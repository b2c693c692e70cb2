/**
 * The service under load, end to end: `sluice serve` processes (the built CLI, dist/) on one
 * real redis-server, config reloads while traffic flows, and SIGTERM with calls in flight.
 * Figures are printed as `[service] …` lines.
 */
import { cpSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type RunningService } from '../../src/service/main.js';
import { decisionsByPath } from '../support/metrics.js';
import { inOneWindow } from '../support/one-window.js';
import { RedisServer } from '../support/redis-server.js';
import {
  type Serve,
  spawnServe,
  stopServe,
  svcRequest as request,
} from '../support/sluice-serve.js';
import { sleep } from '../support/wait.js';
import { call, connect, type Clients } from './grpc/client.js';

const fixtures = join(import.meta.dirname, 'fixtures');

interface RlsAnswer {
  overallCode: string;
  statuses: { code: string; currentLimit: { requestsPerUnit: number } | null }[];
}

const spawned: Serve[] = [];

async function serve(configDir: string, redisUrl: string): Promise<Serve> {
  const s = await spawnServe(['--config', configDir, '--redis', redisUrl]);
  spawned.push(s);
  return s;
}

let redis: RedisServer;

beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await Promise.all(spawned.map((s) => stopServe(s)));
  await redis?.stop();
});

describe('sluice serve on one Redis', () => {
  // Envoy rules default to a 100 ms store deadline and fail closed (a gRPC error, as
  // upstream answers a Redis failure): a slow Redis never silently admits uncounted calls.
  it('three processes share a 100/minute limit exactly: 300 calls, 100 OK, 200 OVER_LIMIT', async () => {
    const dir = join(fixtures, 'redis-svc');
    const procs = await Promise.all([0, 1, 2].map(() => serve(dir, redis.url)));
    const clients = procs.map((p) => connect(p.grpcPort));
    try {
      // Open every channel first (an unknown domain never touches the store).
      await Promise.all(clients.map((c) => call(c.rls, 'ShouldRateLimit', request('warmup'))));
      const decisions = () =>
        Promise.all(
          procs.map(async (p) =>
            decisionsByPath(await (await fetch(`http://127.0.0.1:${p.httpPort}/metrics`)).text()),
          ),
        );
      // All 300 calls in one minute window (the rule is 100 per minute).
      const { answers, before, after } = await inOneWindow(60_000, async (attempt) => {
        const before = await decisions();
        const tenant = `t-${process.pid}-${Date.now()}-${attempt}`;
        const answers = await Promise.all(
          Array.from({ length: 300 }, (_, i) =>
            call<RlsAnswer>(clients[i % 3]!.rls, 'ShouldRateLimit', request(tenant)).then((r) => ({
              proc: i % 3,
              code: r.overallCode,
            })),
          ),
        );
        return { answers, before, after: await decisions() };
      });
      const okPer = [0, 1, 2].map(
        (p) => answers.filter((a) => a.proc === p && a.code === 'OK').length,
      );
      const ok = answers.filter((a) => a.code === 'OK').length;
      const over = answers.filter((a) => a.code === 'OVER_LIMIT').length;
      console.log(
        `[service] 3 processes, 300 calls: OK=${ok} OVER_LIMIT=${over} OK per process=${okPer.join('/')}`,
      );
      const delta = (path: string) => after.map((a, i) => (a[path] ?? 0) - (before[i]![path] ?? 0));
      console.log(
        `[service] decisions per process by the store=${delta('store').join('/')} fail-open=${delta('fail-open').join('/')}`,
      );
      expect(ok).toBe(100);
      expect(over).toBe(200);
      // Every call was decided by the store, in the process that took it; none was let
      // through by a failure mode, so the exact 100 is Redis's doing.
      expect(delta('store')).toEqual([100, 100, 100]);
      expect(delta('fail-open')).toEqual([0, 0, 0]);
    } finally {
      clients.forEach((c) => c.close());
    }
  });
});

describe('config reload under load (in-process, memory store)', () => {
  let dir: string;
  let running: RunningService;
  let clients: Clients;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-reload-'));
    cpSync(join(fixtures, 'reload'), dir, { recursive: true });
    running = await startService({
      envoyConfig: dir,
      host: '127.0.0.1',
      grpcHost: '127.0.0.1',
      port: 0,
      grpcPort: 0,
      logger: pino({ level: 'silent' }),
    });
    clients = connect(running.grpcPort);
  });
  afterAll(async () => {
    clients?.close();
    await running?.shutdown();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('20 rewrites during sustained traffic fail no call; an invalid file keeps the old rules', async () => {
    const file = join(dir, 'config.yaml');
    const template = readFileSync(file, 'utf8');
    const withLimit = (n: number | string) =>
      template.replace(/requests_per_unit: \d+/, `requests_per_unit: ${n}`);
    // Atomic replace: the loader never reads a half-written file.
    const write = (text: string) => {
      writeFileSync(`${file}.tmp`, text);
      renameSync(`${file}.tmp`, file);
    };
    const base = `http://127.0.0.1:${running.httpPort}`;
    const counts = { ok: 0, over: 0 };
    const failures: string[] = [];
    let writing = true;
    const grpcLoop = async (n: number) => {
      for (let i = 0; writing; i++) {
        try {
          const r = await call<RlsAnswer>(
            clients.rls,
            'ShouldRateLimit',
            request(`g${n}-${i % 50}`),
          );
          if (r.overallCode === 'OK') counts.ok++;
          else if (r.overallCode === 'OVER_LIMIT') counts.over++;
          else failures.push(`grpc ${r.overallCode}`);
        } catch (e) {
          failures.push(`grpc ${(e as grpc.ServiceError).code} ${(e as Error).message}`);
        }
      }
    };
    const jsonLoop = async (n: number) => {
      for (let i = 0; writing; i++) {
        try {
          const r = await fetch(`${base}/json`, {
            method: 'POST',
            body: JSON.stringify(request(`j${n}-${i % 50}`)),
          });
          await r.text();
          if (r.status === 200) counts.ok++;
          else if (r.status === 429) counts.over++;
          else failures.push(`json ${r.status}`);
        } catch (e) {
          failures.push(`json ${(e as Error).message}`);
        }
      }
    };
    const loops = [grpcLoop(0), grpcLoop(1), jsonLoop(0), jsonLoop(1)];
    for (let i = 0; i < 20; i++) {
      await sleep(150);
      write(withLimit(i % 2 === 0 ? 2000 : 1000));
    }
    await sleep(300); // past the 100 ms debounce of the last write
    writing = false;
    await Promise.all(loops);
    expect(await running.reload()).toBe(true);
    const errorsBefore = configLoads(await (await fetch(`${base}/metrics`)).text());
    console.log(
      `[service] reload under load: ${counts.ok + counts.over} calls (OK=${counts.ok} OVER_LIMIT=${counts.over}), failed=${failures.length}, config loads success=${errorsBefore.success} error=${errorsBefore.error}`,
    );
    expect(failures).toEqual([]);
    expect(counts.ok).toBeGreaterThan(0);
    expect(await (await fetch(`${base}/rlconfig`)).text()).toContain(
      'svc.tenant: unit=MINUTE requests_per_unit=1000',
    );

    write(withLimit(1000).replace('unit: minute', 'unit: fortnight'));
    expect(await running.reload()).toBe(false);
    const r = await call<RlsAnswer>(clients.rls, 'ShouldRateLimit', request('after-invalid'));
    expect(r.overallCode).toBe('OK');
    expect(r.statuses[0]?.currentLimit?.requestsPerUnit).toBe(1000);
    expect(await (await fetch(`${base}/rlconfig`)).text()).toContain(
      'svc.tenant: unit=MINUTE requests_per_unit=1000',
    );
    const after = configLoads(await (await fetch(`${base}/metrics`)).text());
    expect(after.error).toBeGreaterThanOrEqual(1);
  });
});

function configLoads(metrics: string): { success: number; error: number } {
  const value = (result: string) =>
    Number(
      new RegExp(`^sluice_config_load_total\\{result="${result}"\\} (\\d+)`, 'm').exec(
        metrics,
      )?.[1] ?? 0,
    );
  return { success: value('success'), error: value('error') };
}

/** How one call of the SIGTERM test ended: answered OK/OVER_LIMIT, or not (and how). */
interface Result {
  readonly completed: boolean;
  readonly detail: string;
}

/** One POST /json on its own connection. */
function postJson(port: number, body: string): Promise<Result> {
  return new Promise((resolve) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: '/json', method: 'POST', agent: false },
      (res) => {
        res.resume();
        res.on('end', () => {
          const s = res.statusCode ?? 0;
          resolve({ completed: s === 200 || s === 429, detail: `http ${s}` });
        });
        res.on('error', (e) => resolve({ completed: false, detail: `http body ${e.message}` }));
      },
    );
    req.on('error', (e: NodeJS.ErrnoException) =>
      resolve({ completed: false, detail: `http ${e.code ?? ''} ${e.message}` }),
    );
    req.end(body);
  });
}

describe('SIGTERM with calls in flight', () => {
  // Each call charges its own tenant, so the keys in Redis afterwards say which calls the
  // process decided: an unanswered call with a key was accepted and then lost.
  it('finishes every accepted call and exits 0', async () => {
    const proc = await serve(join(fixtures, 'redis-svc'), redis.url);
    const clients = connect(proc.grpcPort);
    try {
      await call(clients.rls, 'ShouldRateLimit', request('warmup'));
      const run = `term${Date.now()}`;
      let answered = 0;
      let signalled = 0;
      const pid = proc.child.pid!;
      const onAnswer = () => {
        if (++answered === 10) {
          signalled = performance.now();
          process.kill(pid, 'SIGTERM');
        }
      };
      const calls = Array.from({ length: 200 }, (_, i) => {
        const tenant = `${run}-${i}`;
        const p: Promise<Result> =
          i % 2 === 0
            ? call<RlsAnswer>(clients.rls, 'ShouldRateLimit', request(tenant)).then(
                (r) => ({
                  completed: r.overallCode === 'OK' || r.overallCode === 'OVER_LIMIT',
                  detail: `grpc ${r.overallCode}`,
                }),
                (e: grpc.ServiceError) => ({
                  completed: false,
                  detail: `grpc ${e.code} ${e.details}`,
                }),
              )
            : postJson(proc.httpPort, JSON.stringify(request(tenant)));
        return p.finally(onAnswer);
      });
      const results = await Promise.all(calls);
      const exit = await Promise.race([proc.exited, sleep(5_000).then(() => 'timeout' as const)]);
      const exitMs = Math.round(performance.now() - signalled);
      const decided = new Set(
        (await redis.client().keys(`*e0=${run}-*`)).map((k) =>
          Number(/e0=[^-]+-(\d+)/.exec(k)?.[1]),
        ),
      );
      const rows = results.map((r, i) => ({
        ...r,
        transport: i % 2 === 0 ? 'grpc' : 'http',
        decided: decided.has(i),
      }));
      const count = (t: string, f: (r: (typeof rows)[number]) => boolean) =>
        rows.filter((r) => r.transport === t && f(r)).length;
      for (const t of ['grpc', 'http']) {
        console.log(
          `[service] SIGTERM after 10 of 200 answers, ${t}: completed=${count(t, (r) => r.completed)} not accepted (undecided, no answer)=${count(t, (r) => !r.completed && !r.decided)} accepted but failed=${count(t, (r) => !r.completed && r.decided)}`,
        );
      }
      const unanswered = [...new Set(rows.filter((r) => !r.completed).map((r) => r.detail))];
      console.log(
        `[service] SIGTERM: exit ${JSON.stringify(exit)} ${exitMs} ms after SIGTERM; unanswered calls ended with: ${unanswered.join(' | ')}`,
      );
      expect(rows.filter((r) => !r.completed && r.decided).map((r) => r.detail)).toEqual([]);
      expect(rows.filter((r) => r.completed)).not.toHaveLength(0);
      expect(exit).toEqual({ code: 0, signal: null });
    } finally {
      clients.close();
    }
  });
});
