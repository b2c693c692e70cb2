/**
 * The service under load, end to end: `sluice serve` processes (the built CLI, dist/) on one
 * real redis-server, and SIGTERM with calls in flight. Figures are printed as
 * `[service] …` lines. Config reload under traffic is in config-reload.test.ts.
 */
import http from 'node:http';
import { join } from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashTagOf } from '../../src/stores/key.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { sleep, waitFor } from '../support/wait.js';
import { call, connect } from './grpc/client.js';
import { decisionsByPath } from '../support/prometheus-text.js';
import { inOneWindow } from '../support/one-window.js';
import { RedisServer } from '../support/redis-server.js';
import {
  type Serve,
  spawnServe,
  stopServe,
  svcRequest as request,
} from '../support/sluice-serve.js';

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
  // process decided: an unanswered call with a key was accepted and then lost. Redis is
  // reached through a proxy that delays every command by 300 ms, and SIGTERM is sent as
  // soon as the first of 100 calls is on its way to Redis; 100 more follow during the
  // drain. A call without a key and without an answer was never accepted (refused, or
  // reset in the listen backlog when the listener closed).
  it('finishes every accepted call and exits 0', async () => {
    // The rule is 100 per minute in a fixed window whose keys expire at its end: a round
    // that straddles a minute boundary may find its first calls' keys gone, so it runs
    // again (a new process, new tenants) until one round fits in one window.
    const { rows, exit } = await inOneWindow(60_000, sigtermRound);
    expect(rows.filter((r) => !r.completed && r.decided).map((r) => r.detail)).toEqual([]);
    // Some calls were waiting on Redis when SIGTERM came, and were finished.
    expect(rows.filter((r) => r.completed)).not.toHaveLength(0);
    // Every answered call left its key: the lookup sees what the process decided.
    expect(rows.filter((r) => r.completed && !r.decided)).toEqual([]);
    expect(exit).toEqual({ code: 0, signal: null });
  });
});

/** One SIGTERM round: a new process, 200 calls around its SIGTERM, what Redis kept. */
async function sigtermRound() {
  const proxy = await FaultProxy.start(redis);
  const proc = await serve(join(fixtures, 'redis-svc'), proxy.url);
  const clients = connect(proc.grpcPort);
  try {
    await call(clients.rls, 'ShouldRateLimit', request('warmup'));
    proxy.setLatency(300);
    const run = `term${Date.now()}`;
    const pid = proc.child.pid!;
    const send = (i: number): Promise<Result> => {
      const tenant = `${run}-${i}`;
      return i % 2 === 0
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
    };
    const delayed = proxy.stats().chunksDelayed;
    const first = Array.from({ length: 100 }, (_, i) => send(i));
    await waitFor(() => (proxy.stats().chunksDelayed > delayed ? true : undefined), {
      what: 'the first calls to be on their way to Redis',
      timeoutMs: 5_000,
      intervalMs: 2,
    });
    const signalled = performance.now();
    process.kill(pid, 'SIGTERM');
    const second = Array.from({ length: 100 }, (_, i) => send(100 + i));
    const results = await Promise.all([...first, ...second]);
    const exit = await Promise.race([proc.exited, sleep(5_000).then(() => 'timeout' as const)]);
    const exitMs = Math.round(performance.now() - signalled);
    // Bucket keys are `<prefix>:{<tenant>}:<policy>` (src/stores/key.ts): the hash tag
    // is the tenant, so it names the call.
    const decided = new Set(
      (await redis.client().keys(`sl:{${run}-*}:*`)).map((k) =>
        Number(hashTagOf(k.slice('sl:'.length)).slice(run.length + 1)),
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
        `[service] SIGTERM with 100 calls waiting on Redis, 100 more sent after, ${t}: completed=${count(t, (r) => r.completed)} not accepted (undecided, no answer)=${count(t, (r) => !r.completed && !r.decided)} accepted but failed=${count(t, (r) => !r.completed && r.decided)}`,
      );
    }
    const unanswered = [...new Set(rows.filter((r) => !r.completed).map((r) => r.detail))];
    console.log(
      `[service] SIGTERM: exit ${JSON.stringify(exit)} ${exitMs} ms after SIGTERM; unanswered calls ended with: ${unanswered.join(' | ')}`,
    );
    return { rows, exit };
  } finally {
    clients.close();
    await proxy.close();
  }
}

/**
 * How one keep-alive call ended. `refused`: the connection attempt itself was refused
 * (ECONNREFUSED before the socket ever connected), so the request was never sent: the
 * client knows nothing happened and goes elsewhere. `failed`: the request was written to
 * a connection the server had accepted (a new one that connected, or a reused keep-alive
 * one) and no complete 200/429 answer came back (a reset, a hang-up, another status).
 */
type KeepAliveOutcome = 'completed' | 'refused' | { failed: string };

function keepAlivePost(agent: http.Agent, port: number, body: string): Promise<KeepAliveOutcome> {
  return new Promise((resolve) => {
    let connected = false;
    const req = http.request(
      { host: '127.0.0.1', port, path: '/json', method: 'POST', agent },
      (res) => {
        res.resume();
        res.on('end', () => {
          const s = res.statusCode ?? 0;
          resolve(s === 200 || s === 429 ? 'completed' : { failed: `http ${s}` });
        });
        res.on('error', (e) => resolve({ failed: `body ${e.message}` }));
      },
    );
    req.on('socket', (socket) => {
      if (!socket.connecting)
        connected = true; // a reused keep-alive connection
      else socket.once('connect', () => (connected = true));
    });
    req.on('error', (e: NodeJS.ErrnoException) =>
      resolve(
        e.code === 'ECONNREFUSED' && !connected
          ? 'refused'
          : {
              failed: `${e.code ?? ''} ${e.message}${req.reusedSocket ? ' (reused connection)' : ''}`,
            },
      ),
    );
    req.end(body);
  });
}

describe('SIGTERM under keep-alive HTTP load', () => {
  it('20 keep-alive clients in a loop: 0 failed calls, every client refused only at connect, exit 0', async () => {
    const proc = await serve(join(fixtures, 'redis-svc'), redis.url);
    const pid = proc.child.pid!;
    const run = `ka${Date.now()}`;
    let completed = 0;
    let signalled = false;
    const failures: string[] = [];
    const perClient = await Promise.all(
      Array.from({ length: 20 }, async (_, c) => {
        const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
        let mine = 0;
        try {
          for (let i = 0; i < 100_000; i++) {
            const outcome = await keepAlivePost(
              agent,
              proc.httpPort,
              JSON.stringify(request(`${run}-${c}-${i % 20}`)),
            );
            if (outcome === 'refused') return { completed: mine, refused: true };
            if (outcome === 'completed') {
              mine++;
              if (++completed === 400 && !signalled) {
                signalled = true;
                process.kill(pid, 'SIGTERM');
              }
            } else failures.push(outcome.failed);
          }
          return { completed: mine, refused: false };
        } finally {
          agent.destroy();
        }
      }),
    );
    const exit = await Promise.race([proc.exited, sleep(10_000).then(() => 'timeout' as const)]);
    const refused = perClient.filter((p) => p.refused).length;
    console.log(
      `[service] SIGTERM after 400 keep-alive calls: ${completed} completed, ${failures.length} failed, ${refused} of 20 clients ended refused at connect (never sent); exit ${JSON.stringify(exit)}${failures.length === 0 ? '' : `; failures: ${[...new Set(failures)].join(' | ')}`}`,
    );
    expect(signalled).toBe(true);
    expect(failures).toEqual([]);
    expect(refused).toBe(20);
    expect(exit).toEqual({ code: 0, signal: null });
  });
});
