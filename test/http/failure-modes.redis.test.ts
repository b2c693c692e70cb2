/**
 * What the HTTP edge answers when the limiter cannot decide: a real redis-server, a
 * RedisStore connected to it, real Express and Fastify servers and `fetch`. The server
 * is stopped mid-test; nothing is mocked. Under `closed` the answer is 503 with its own
 * body (never 429); under `open` the request passes, without RateLimit headers (nothing
 * is known about the bucket), and is counted as `fail-open`.
 */
import { createServer } from 'node:http';
import express from 'express';
import Fastify, { type FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PolicyInput } from '../../src/config/policies.js';
import { ManualClock } from '../../src/core/clock.js';
import { createFastifyRateLimit } from '../../src/fastify.js';
import { byApiKey, createHttpRateLimit, type EdgeEvent } from '../../src/http.js';
import type { HttpRateLimit } from '../../src/http/node-middleware.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import { RedisStore } from '../../src/stores/redis/redis-store.js';
import { RedisServer, stopAllRedisServers } from '../support/redis-server.js';
import { sleep } from '../support/wait.js';
import { post } from '../support/api-key-requests.js';
import { listen, type Listening } from '../support/listen.js';
import { headersOf } from './serve.js';

const T0 = 1_700_000_000_000;
const JSON_TYPE = 'application/json; charset=utf-8';
const policy = (failureMode: 'open' | 'closed'): PolicyInput[] => [
  {
    name: `payments-${failureMode}`,
    match: ['tenant'],
    // 5/s, not faster: the client clock below stands still, but Redis expires a bucket by
    // its own clock once it would be full (deficit / rate: 1 s per transfer's 5 units at
    // 5/s; 50 ms at 100/s, which a busy machine passed between two transfers, and the
    // fifth then found a full bucket: 200 where 429).
    rate: 5,
    burst: 20,
    failureMode,
    // Long enough that no event-loop stall of a busy machine turns a store answer into a
    // timeout while Redis is up; once it is down, each check waits this long for it.
    timeout: '2s',
  },
];

let redis: RedisServer;
let store: RedisStore;
let seed: Redis;
const closers: (() => Promise<unknown>)[] = [];
const descriptor = byApiKey({
  key: 'tenant',
  resolve: (k) => (k === 'key-acme' ? 'acme' : undefined),
});

async function expressApp(mode: 'open' | 'closed') {
  const events: EdgeEvent[] = [];
  const limiter = createLimiter({ store, policies: policy(mode), clock: new ManualClock(T0) });
  const limits: HttpRateLimit = createHttpRateLimit({
    limiter,
    descriptor,
    onEvent: (e) => events.push(e),
  });
  const app = express();
  app.post('/transfers/:id', limits.route({ cost: 5 }), (_req, res) => res.json({ ok: true }));
  const s: Listening = await listen(createServer(app));
  closers.push(() => s.close());
  return { url: s.url, limits, events };
}

async function fastifyApp(mode: 'open' | 'closed') {
  const limiter = createLimiter({ store, policies: policy(mode), clock: new ManualClock(T0) });
  const limits = createFastifyRateLimit({ limiter, descriptor });
  const app: FastifyInstance = Fastify();
  await app.register(limits.plugin);
  app.post('/transfers/:id', { config: { sluice: { cost: 5 } } }, async () => ({ ok: true }));
  closers.push(() => app.close());
  return { url: await app.listen({ port: 0, host: '127.0.0.1' }), limits };
}

const transfer = (url: string) => post(`${url}/transfers/1`);

beforeAll(async () => {
  redis = await RedisServer.start();
  seed = new Redis({
    host: redis.host,
    port: redis.port,
    lazyConnect: true,
    retryStrategy: () => 25,
  });
  // Client clock: the limiters' ManualClock decides, so the values below are exact.
  store = new RedisStore({ client: seed, clock: 'client' });
  await store.ready();
});

afterAll(async () => {
  for (const close of closers.splice(0)) await close();
  await Promise.race([store.close(), sleep(1_000)]);
  seed.disconnect();
  await stopAllRedisServers();
});

describe('HTTP edge when Redis stops', () => {
  it('429 vs 503 vs pass-through: closed → 503, open → passes and is counted', async () => {
    const closedExpress = await expressApp('closed');
    const openExpress = await expressApp('open');
    const closedFastify = await fastifyApp('closed');

    // Redis up: decisions come from the store (15 of 20 left after a transfer).
    expect((await transfer(closedExpress.url)).headers.get('ratelimit')).toBe(
      '"payments-closed";r=15;t=1',
    );
    expect((await transfer(openExpress.url)).headers.get('ratelimit')).toBe(
      '"payments-open";r=15;t=1',
    );

    // Redis up, over the limit: a 429 from the store's decision.
    for (let i = 0; i < 3; i++) expect((await transfer(closedExpress.url)).status).toBe(200);
    const over = await transfer(closedExpress.url);
    expect([over.status, over.headers.get('retry-after'), await over.text()]).toEqual([
      429,
      '1',
      '{"error":"rate limit exceeded","policy":"payments-closed","retry_after_seconds":1}',
    ]);

    await redis.stop({ keepClients: true });

    // Side by side: each waits out its policy's timeout.
    const [closed, closedF, open] = await Promise.all([
      transfer(closedExpress.url),
      transfer(closedFastify.url),
      transfer(openExpress.url),
    ]);
    expect([closed.status, headersOf(closed), await closed.text()]).toEqual([
      503,
      { 'content-type': JSON_TYPE, 'content-length': '36' },
      '{"error":"rate limiter unavailable"}',
    ]);
    expect([closedF.status, headersOf(closedF), await closedF.text()]).toEqual([
      503,
      { 'content-type': JSON_TYPE, 'content-length': '36' },
      '{"error":"rate limiter unavailable"}',
    ]);
    expect([open.status, headersOf(open), await open.text()]).toEqual([
      200,
      { 'content-type': JSON_TYPE, 'content-length': '11' },
      '{"ok":true}',
    ]);

    expect(closedExpress.limits.stats()).toMatchObject({ allowed: 4, unavailable: 1, denied: 1 });
    expect(closedFastify.limits.stats()).toMatchObject({ allowed: 0, unavailable: 1, denied: 0 });
    expect(openExpress.limits.stats()).toMatchObject({ allowed: 1, 'fail-open': 1, denied: 0 });
    expect(openExpress.events.map((e) => [e.outcome, e.result?.decision?.path])).toEqual([
      ['allowed', 'store'],
      ['fail-open', 'fail-open'],
    ]);
    expect(closedExpress.events.map((e) => [e.outcome, e.result?.status])).toEqual([
      ...[1, 2, 3, 4].map(() => ['allowed', 'OK']),
      ['denied', 'OVER_LIMIT'],
      ['unavailable', 'UNAVAILABLE'],
    ]);
  });
});
