/**
 * Exactness under contention against a real redis-server: many connections (and separate
 * Node processes) race at one bucket, and the bucket admits exactly what its capacity
 * allows — no lost updates, no partial consumption across a batch. Redis-only: the
 * in-process equivalent is trivially atomic and covered by the conformance suite.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import type { PolicyInput } from '../../../src/config/policies.js';
import { type Limiter } from '../../../src/limiter/limiter.js';
import { createLimiter } from '../../../src/local/create-limiter.js';
import { RedisStore } from '../../../src/stores/redis/redis-store.js';
import { RedisServer } from '../../support/redis-server.js';
import { waitFor } from '../../support/wait.js';
import type { HammerGo, HammerMessage } from './fixtures/hammer-process.js';
import { decidedByStore } from '../../support/check-results.js';
import { race, tenantRouteRound } from '../../support/contention.js';
import { mulberry32 as seededRandom, randomInt } from '../../support/random.js';

const CONNECTIONS = 64;
const ATTEMPTS_PER_CONNECTION = 5; // 64 × 5 = 320 attempts per repetition
const REPETITIONS = 20;

/** Refill of 1 unit per hour: over a sub-second race the capacity is the burst. */
const slow = { rate: 1, period: '1h', failureMode: 'closed', timeout: '30s' } as const;

let server: RedisServer;
let clients: Redis[];
let stores: RedisStore[];

beforeAll(async () => {
  server = await RedisServer.start();
  clients = Array.from({ length: CONNECTIONS }, () => server.client());
  await Promise.all(clients.map((c) => c.ping()));
  stores = clients.map((client) => new RedisStore({ client })); // server clock (default)
});

afterAll(async () => {
  await Promise.all((stores ?? []).map((s) => s.close()));
  await server?.stop();
});

/** One limiter per connection, all on the same policies. */
function limiters(policies: readonly PolicyInput[]): Limiter[] {
  return stores.map((store) => createLimiter({ store, policies }));
}

describe('RedisStore under contention (64 connections, server clock)', () => {
  it(`admits exactly the burst: 64 × ${ATTEMPTS_PER_CONNECTION} attempts of cost 1 at capacity 100, ${REPETITIONS} repetitions`, async () => {
    const ls = limiters([{ name: 'hot', match: ['tenant'], burst: 100, ...slow }]);
    // Every connection's first call sends the whole script: do that outside the race.
    await Promise.all(ls.map((l) => l.check({ tenant: 'warm-up' }, { cost: 0 })));
    const deviations: number[] = [];
    for (let rep = 0; rep < REPETITIONS; rep++) {
      const tenant = `exact-${rep}`;
      const results = await race(ls, ATTEMPTS_PER_CONNECTION, (l) => l.check({ tenant }));
      expect(results.every(decidedByStore)).toBe(true);
      const admitted = results.filter((r) => r.allowed).length;
      expect(results.filter((r) => !r.allowed).every((r) => r.status === 'OVER_LIMIT')).toBe(true);
      deviations.push(admitted - 100);
      const left = await ls[0]!.check({ tenant }, { cost: 0 });
      expect(left.decision!.remaining).toBeLessThan(0.01); // spent; refill is 1/h
    }
    console.log(
      `[concurrency] ${CONNECTIONS} connections × ${ATTEMPTS_PER_CONNECTION} attempts at capacity 100, ` +
        `${REPETITIONS} repetitions: admitted - 100 = [${deviations.join(', ')}]`,
    );
    expect(deviations).toEqual(Array.from({ length: REPETITIONS }, () => 0));
  });

  // With costs 1..7 the bucket always ends exactly empty (a cost-1 request is left to
  // fill it); with 3..7 it can end with 1 or 2 units that no denied request fits.
  it.each([
    [1, 7, 1],
    [3, 7, 2],
  ])(
    `admits a maximal set of mixed costs (%i..%i, seed %i) without exceeding 100, ${REPETITIONS} repetitions`,
    async (minCost, maxCost, seed) => {
      const ls = limiters([{ name: 'mixed', match: ['tenant'], burst: 100, ...slow }]);
      const random = seededRandom(seed);
      const summary: string[] = [];
      for (let rep = 0; rep < REPETITIONS; rep++) {
        const tenant = `mixed-${minCost}-${rep}`;
        const costs = Array.from({ length: CONNECTIONS * ATTEMPTS_PER_CONNECTION }, () =>
          randomInt(random, minCost, maxCost),
        );
        const results = await race(ls, ATTEMPTS_PER_CONNECTION, (l, i, j) =>
          l.check({ tenant }, { cost: costs[i * ATTEMPTS_PER_CONNECTION + j]! }),
        );
        expect(results.every(decidedByStore)).toBe(true);
        let admittedCost = 0;
        let minDenied = Infinity;
        results.forEach((r, k) => {
          if (r.allowed) admittedCost += costs[k]!;
          else minDenied = Math.min(minDenied, costs[k]!);
        });
        const remaining = (await ls[0]!.check({ tenant }, { cost: 0 })).decision!.remaining;
        expect(admittedCost).toBeLessThanOrEqual(100);
        // What is left is exactly what was not admitted (plus < 0.01 of hourly refill) ...
        expect(remaining).toBeGreaterThanOrEqual(100 - admittedCost);
        expect(remaining).toBeLessThan(100 - admittedCost + 0.01);
        // ... and no denied request would have fit it: the admitted set is maximal.
        expect(remaining).toBeLessThan(minDenied);
        summary.push(`${admittedCost}/${Math.floor(remaining)}/${minDenied}`);
      }
      console.log(
        `[concurrency] mixed costs ${minCost}..${maxCost}, ${REPETITIONS} repetitions, admitted cost/remaining/min denied cost: ${summary.join(' ')}`,
      );
    },
  );

  it(`is all-or-nothing across two policies (tenant burst 50, route burst 20), ${REPETITIONS} repetitions`, async () => {
    const ls = limiters([
      { name: 'tenant', match: ['tenant'], burst: 50, ...slow },
      { name: 'route', match: ['tenant', 'route'], burst: 20, ...slow },
    ]);
    const random = seededRandom(0xa11);
    const summary: string[] = [];
    for (let rep = 0; rep < REPETITIONS; rep++) {
      summary.push(await tenantRouteRound(ls, ATTEMPTS_PER_CONNECTION, random, `both-${rep}`));
    }
    console.log(
      `[concurrency] tenant 50 + route 20 (A, B, C), admitted units tenant=A+B+C per repetition: ${summary.join(' ')}`,
    );
  });
});

describe('RedisStore shared by three Node processes', () => {
  const BURST = 300;
  const ROUNDS = 5;
  const fixture = fileURLToPath(new URL('./fixtures/hammer-process.ts', import.meta.url));
  const children: ChildProcess[] = [];

  afterAll(async () => {
    for (const child of children) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });

  it(`admits exactly the limit across three processes (${BURST} each attempted, ${ROUNDS} rounds)`, async () => {
    const inbox = new Map<ChildProcess, HammerMessage[]>();
    for (let p = 0; p < 3; p++) {
      const child = fork(fixture, [], {
        execArgv: ['--import', 'tsx'],
        env: { ...process.env, SLUICE_REDIS_URL: server.url, SLUICE_BURST: String(BURST) },
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      children.push(child);
      inbox.set(child, []);
      child.on('message', (m: HammerMessage) => inbox.get(child)!.push(m));
    }
    const next = (child: ChildProcess): Promise<HammerMessage> =>
      waitFor(() => inbox.get(child)!.shift(), {
        what: `a message from hammer process ${child.pid}`,
        timeoutMs: 20_000,
        intervalMs: 5,
      });
    for (const child of children) expect(await next(child)).toMatchObject({ ready: true });

    const lines: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const tenant = `processes-${round}`;
      // All three start at the same wall-clock instant and keep 30 checks in flight each.
      const go: HammerGo = {
        go: true,
        tenant,
        attempts: BURST,
        wave: 30,
        startAtMs: Date.now() + 100,
      };
      for (const child of children) child.send(go);
      // Once each has fired a wave, all three go on together: they race for the rest.
      for (const child of children) expect(await next(child)).toEqual({ firstWave: true });
      for (const child of children) child.send({ resume: true });
      const counts = await Promise.all(children.map(next));
      const admitted = counts.map((c) => ('admitted' in c ? c.admitted : NaN));
      // How long all three were firing at once.
      const spans = counts.map((c) => ('firstMs' in c ? [c.firstMs, c.lastMs] : [NaN, NaN]));
      const overlapMs =
        Math.min(...spans.map(([, last]) => last!)) - Math.max(...spans.map(([first]) => first!));
      for (const c of counts) expect(c).toMatchObject({ tenant, other: 0 });
      expect(counts.map((c) => ('admitted' in c ? c.admitted + c.denied : NaN))).toEqual([
        BURST,
        BURST,
        BURST,
      ]);
      const total = admitted.reduce((a, b) => a + b, 0);
      // The three raced: each was still firing when the last one started (the resume
      // barrier makes sure of it). Without that, an exact total would prove nothing about
      // contention between processes.
      expect(overlapMs).toBeGreaterThan(0);
      lines.push(
        `round ${round}: ${admitted.join(' + ')} = ${total} (all three firing together for ${overlapMs} ms)`,
      );
      expect(total).toBe(BURST);
    }
    console.log(
      `[concurrency] 3 processes × ${BURST} attempts at limit ${BURST} (admitted per process):\n  ${lines.join('\n  ')}`,
    );
    for (const child of children) child.send({ stop: true });
    await Promise.all(
      children.map((child) =>
        child.exitCode !== null
          ? Promise.resolve()
          : new Promise((resolve) => child.once('exit', resolve)),
      ),
    );
    expect(children.map((c) => c.exitCode)).toEqual([0, 0, 0]);
  });
});
