/**
 * The headers a client sees when a check is answered by a stage instead of the store: the
 * token batch (path `batch`) and the quota lease (path `lease`), through the node:http
 * middleware on a real Express server and real `fetch` calls. The limiter runs on a
 * MemoryStore with a ManualClock, so each value below is derived by hand in a comment, as
 * express.test.ts does for the plain store path.
 */
import { createServer } from 'node:http';
import express from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import type { PolicyInput } from '../../src/config/policies.js';
import { ManualClock } from '../../src/core/clock.js';
import { byApiKey, createHttpRateLimit } from '../../src/http.js';
import { type Limiter } from '../../src/limiter/limiter.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import { TokenBatchStage } from '../../src/local/token-batch.js';
import { QuotaAgent } from '../../src/quota/agent.js';
import { LeaseStage } from '../../src/quota/lease-stage.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import { asAcme } from '../support/api-key-requests.js';
import { listen, type Listening } from '../support/listen.js';
import { snapshot } from './serve.js';

const T0 = 1_700_000_000_000; // a whole second: lease windows start here
const JSON_TYPE = 'application/json; charset=utf-8';
const running: Listening[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.close()));
});

/**
 * GET /status (cost 1) as tenant acme, behind the rate limit of `limiter`; with `path`
 * /bulk, the same at cost 6.
 */
async function serveStatus(limiter: Limiter): Promise<(path?: string) => Promise<Response>> {
  const limits = createHttpRateLimit({
    limiter,
    descriptor: byApiKey({
      key: 'tenant',
      resolve: (k) => (k === 'key-acme' ? 'acme' : undefined),
    }),
  });
  const app = express();
  app.get('/status', limits.route({ cost: 1 }), (_req, res) => {
    res.json({ ok: true });
  });
  app.get('/bulk', limits.route({ cost: 6 }), (_req, res) => {
    res.json({ ok: true });
  });
  const s = await listen(createServer(app));
  running.push(s);
  return (path = '/status') => fetch(`${s.url}${path}`, asAcme);
}

describe('RateLimit headers and Retry-After on the batch path', () => {
  // 10/s, burst 10, reserved in batches of up to 4.
  const policies: PolicyInput[] = [
    { name: 'tenant', match: ['tenant'], rate: 10, burst: 10, batch: { size: 4, ttl: '1s' } },
  ];

  it('show what is left of the global bucket (the store and the reserve together), as the store path would', async () => {
    const clock = new ManualClock(T0);
    const limiter = createLimiter({ store: new MemoryStore(), policies, clock });
    const batch = limiter.stages.find((s) => s instanceof TokenBatchStage)!;
    const get = await serveStatus(limiter);
    const seen: string[] = [];
    for (let i = 0; i < 10; i++) {
      const res = await get();
      expect(res.status).toBe(200);
      seen.push(res.headers.get('ratelimit')!);
    }
    // Reservations 1, 2, 4 and then the 3 the store still holds (10 in all, 4 calls).
    // What is left is the store's remaining plus the reserve's unspent units:
    // 1st: store 9, reserve 0 → 9; 2nd: store 7, reserve 1 → 8; 3rd: 7 + 0 → 7;
    // 4th: store 3, reserve 3 → 6; ... 10th: 0 + 0 → 0. Every reset is under 1 s → t=1.
    expect(seen).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0].map((r) => `"tenant";r=${r};t=1`));
    expect(batch.stats).toMatchObject({ reservationCalls: 4, unitsReserved: 10, unitsSpent: 10 });
    // The 11th finds the bucket empty: one unit refills in 100 ms, rounded up to 1 s.
    expect(await snapshot(await get())).toEqual({
      status: 429,
      headers: {
        'content-type': JSON_TYPE,
        'content-length': '73',
        'retry-after': '1',
        'ratelimit-policy': '"tenant";q=10;w=1;sluice-burst=10',
        ratelimit: '"tenant";r=0;t=1',
      },
      body: '{"error":"rate limit exceeded","policy":"tenant","retry_after_seconds":1}',
    });
  });

  it('on a denial, still show what is left: the units the store holds plus those the reserve set aside', async () => {
    const clock = new ManualClock(T0);
    const limiter = createLimiter({ store: new MemoryStore(), policies, clock });
    const batch = limiter.stages.find((s) => s instanceof TokenBatchStage)!;
    const get = await serveStatus(limiter);
    for (let i = 0; i < 5; i++) expect((await get()).status).toBe(200);
    // As above, after 5: store 3, reserve 2 (of the 4th reservation) → r=5.
    // /bulk costs 6: the reserve's 2 are set aside and the store is asked for 4 of its 3,
    // denied. What is left is still 3 + 2 = 5 (the 2 go back to the reserve); the missing
    // unit refills in 100 ms, rounded up to 1 s.
    const denied = await snapshot(await get('/bulk'));
    expect(denied.status).toBe(429);
    expect(denied.headers).toMatchObject({ 'retry-after': '1', ratelimit: '"tenant";r=5;t=1' });
    expect(batch.stats).toMatchObject({ reservationCalls: 4, unitsReserved: 7, unitsSpent: 5 });
    // The 2 set aside are still there: the next check is answered from the reserve.
    expect((await get()).status).toBe(200);
    expect(batch.stats).toMatchObject({ reservationCalls: 4, unitsSpent: 6 });
  });
});

describe('RateLimit headers and Retry-After on the lease path', () => {
  const policies: PolicyInput[] = [
    { name: 'tenant', match: ['tenant'], rate: 100, burst: 20, failureMode: 'closed' },
  ];

  it("show the lease window's allowance less what it used, and the wait until the next window", async () => {
    const clock = new ManualClock(T0);
    const agent = new QuotaAgent({ agent: 'a', bucket: 'tenant', fallback: { kind: 'deny' } }, T0);
    // 3 units per 1 s window.
    agent.apply(
      {
        ...{ agent: 'a', bucket: 'tenant', rate: 3, burst: 3, windowMs: 1_000, ttlMs: 10_000 },
        ...{ version: 1, fencingToken: 1, issuedAtMs: T0 },
      },
      T0,
    );
    const stage = new LeaseStage({ policies: ['tenant'], agentFor: () => agent });
    const store = new MemoryStore();
    const limiter = createLimiter({ store, policies, clock, stages: [stage] });
    const get = await serveStatus(limiter);
    const seen: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await get();
      expect(res.status).toBe(200);
      seen.push(res.headers.get('ratelimit')!);
    }
    // 3 − 1, 3 − 2, 3 − 3 left; the window ends in 1,000 ms → t=1.
    expect(seen).toEqual(['"tenant";r=2;t=1', '"tenant";r=1;t=1', '"tenant";r=0;t=1']);
    // 250 ms on, the window is spent: 750 ms until the next, rounded up to 1 s. The
    // policy header is the policy's own (q=100), which the lease is a share of.
    clock.advance(250);
    expect(await snapshot(await get())).toEqual({
      status: 429,
      headers: {
        'content-type': JSON_TYPE,
        'content-length': '73',
        'retry-after': '1',
        'ratelimit-policy': '"tenant";q=100;w=1;sluice-burst=20',
        ratelimit: '"tenant";r=0;t=1',
      },
      body: '{"error":"rate limit exceeded","policy":"tenant","retry_after_seconds":1}',
    });
    // The next window: the allowance again, less the one unit this request takes.
    clock.advance(750);
    expect((await get()).headers.get('ratelimit')).toBe('"tenant";r=2;t=1');
    expect(agent.window(clock.nowMs()).used).toBe(1);
  });
});
