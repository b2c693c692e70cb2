/**
 * The node:http / Express middleware with a cost known only from the response
 * (`route({ cost, settle })`, docs/costs.md), through a real Express 5 server on
 * 127.0.0.1 and real `fetch` calls. The limiter runs on a MemoryStore with a ManualClock
 * whose tokens refill one per hour, so the figures are exact. Each test waits for the
 * settle through `onSettle`, never by time.
 */
import { createServer } from 'node:http';
import express, { type Express } from 'express';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import type { PolicyInput } from '../../src/config/policies.js';
import { ManualClock } from '../../src/core/clock.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import { createFastifyRateLimit } from '../../src/fastify.js';
import { byApiKey, createHttpRateLimit, type EdgeSettleEvent } from '../../src/http.js';
import { createAdmissionBoundary } from '../../src/overload.js';
import { asAcme, post } from '../support/api-key-requests.js';
import { listen, type Listening } from '../support/listen.js';

const tokens: PolicyInput[] = [
  { name: 'model-tokens', match: ['tenant'], rate: 1, period: '1h', burst: 1_000 },
];

const running: Listening[] = [];
const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.close()));
  await Promise.all(apps.splice(0).map((a) => a.close()));
});

async function serve(app: Express): Promise<string> {
  const s = await listen(createServer(app));
  running.push(s);
  return s.url;
}

function setup(extra: Partial<Parameters<typeof createHttpRateLimit>[0]> = {}) {
  const clock = new ManualClock(1_700_000_000_000);
  const limiter = createLimiter({ store: new MemoryStore(), policies: tokens, clock });
  const settles: EdgeSettleEvent[] = [];
  const waiting: ((e: EdgeSettleEvent) => void)[] = [];
  const errors: unknown[] = [];
  const limits = createHttpRateLimit({
    limiter,
    descriptor: byApiKey({
      key: 'tenant',
      resolve: (k) => (k === 'key-acme' ? 'acme' : undefined),
    }),
    onError: (e) => errors.push(e),
    onSettle: (e) => {
      settles.push(e);
      waiting.shift()?.(e);
    },
    ...extra,
  });
  /** The next settle, when it has happened. */
  const nextSettle = () =>
    new Promise<EdgeSettleEvent>((resolve) => {
      waiting.push(resolve);
    });
  const remaining = async () =>
    (await limiter.check({ tenant: 'acme' }, { cost: 0 })).decision!.remaining;
  return { limiter, limits, settles, nextSettle, errors, remaining };
}

describe('route({ cost, settle }): the cost known only from the response', () => {
  it('charges the actual the handler reported in a header, not the estimate', async () => {
    const { limits, nextSettle, remaining } = setup();
    const app = express();
    app.post(
      '/generate',
      limits.route({ cost: 300, settle: (_req, res) => Number(res.getHeader('x-usage-tokens')) }),
      (_req, res) => {
        res.setHeader('x-usage-tokens', '42');
        res.json({ text: 'hello' });
      },
    );
    const url = await serve(app);
    const settled = nextSettle();
    const res = await post(`${url}/generate`);
    expect(res.status).toBe(200);
    // The reserve took 300 before the handler ran: the header says what was left then (700,
    // full again in 300 tokens at one per hour: 1,080,000 s).
    expect(res.headers.get('ratelimit')).toBe('"model-tokens";r=700;t=1080000');
    await res.text();
    expect(await settled).toMatchObject({ route: 'POST /generate', actual: 42, finished: true });
    expect(await remaining()).toBe(1_000 - 42);
  });

  it('charges an actual above the estimate (res.locals), down to the debt cap', async () => {
    const { limits, nextSettle, remaining, limiter } = setup();
    const app = express();
    app.post(
      '/generate',
      limits.route({ cost: 100, settle: (_req, res) => res.locals?.['usage'] as number }),
      (_req, res) => {
        res.locals['usage'] = 900;
        res.json({ ok: true });
      },
    );
    const url = await serve(app);
    const first = nextSettle();
    await (await post(`${url}/generate`)).text();
    await first;
    expect(await remaining()).toBe(100);
    const second = nextSettle();
    await (await post(`${url}/generate`)).text();
    // 100 left, 100 reserved, 800 more: 800 below empty allowed (maxDebt = the burst).
    expect((await second).result?.cappedUnits).toBe(0);
    const denied = await limiter.check({ tenant: 'acme' }, { cost: 1 });
    expect(denied.retryAfterMs).toBe(801 * 3_600_000);
  });

  it('settles an aborted request at what the handler reported so far, or at the estimate', async () => {
    const { limits, nextSettle, remaining } = setup();
    const reported = new Map<string, number>();
    let entered: () => void = () => {};
    const app = express();
    app.post(
      '/stream',
      limits.route({
        cost: 200,
        settle: (req) => reported.get(String(req.headers['x-call'])),
      }),
      (req, res) => {
        const call = String(req.headers['x-call']);
        if (call === 'partial') reported.set(call, 15);
        res.write('partial output');
        entered();
        // Never ends: the client goes away.
      },
    );
    const url = await serve(app);
    for (const [call, expected] of [
      ['partial', 15],
      ['silent', 200],
    ] as const) {
      const before = await remaining();
      const inHandler = new Promise<void>((resolve) => {
        entered = resolve;
      });
      const settled = nextSettle();
      const aborter = new AbortController();
      const res = fetch(`${url}/stream`, {
        method: 'POST',
        headers: { ...asAcme.headers, 'x-call': call },
        signal: aborter.signal,
      }).catch(() => undefined);
      await inHandler;
      aborter.abort();
      await res;
      expect(await settled).toMatchObject({ actual: expected, finished: false });
      expect(await remaining()).toBe(before - expected);
    }
  });

  it('a settle that throws or returns a bad number settles at the estimate and reports the error', async () => {
    const { limits, nextSettle, remaining, errors } = setup();
    const app = express();
    app.post('/bad', limits.route({ cost: 50, settle: () => -3 }), (_req, res) => {
      res.json({ ok: true });
    });
    const url = await serve(app);
    const settled = nextSettle();
    await (await post(`${url}/bad`)).text();
    expect(await settled).toMatchObject({ actual: 50 });
    expect(await remaining()).toBe(950);
    expect(errors).toHaveLength(1);
    expect((errors[0] as { code?: string }).code).toBe('SLUICE_ERR_HTTP_CONFIG_INVALID');
  });

  it('a denied reservation answers 429 and settles nothing; settle without cost is refused at set-up', async () => {
    const { limits, settles, nextSettle } = setup();
    expect(() => limits.route({ settle: () => 1 })).toThrow(
      expect.objectContaining({ code: 'SLUICE_ERR_HTTP_CONFIG_INVALID' }),
    );
    const app = express();
    app.post('/big', limits.route({ cost: 1_000, settle: () => 1_000 }), (_req, res) => {
      res.json({ ok: true });
    });
    app.post('/read', limits.route({ cost: 0, settle: () => 0 }), (_req, res) => {
      res.json({ ok: true });
    });
    const url = await serve(app);
    const first = nextSettle();
    expect((await post(`${url}/big`)).status).toBe(200);
    await first;
    // The whole burst is in use (settled at 1,000): the next reservation is denied.
    expect((await post(`${url}/big`)).status).toBe(429);
    const read = nextSettle();
    await (await post(`${url}/read`)).text();
    await read;
    // The denial left no settle behind it.
    expect(settles.map((e) => e.route)).toEqual(['POST /big', 'POST /read']);
  });

  it('a request the admission boundary refuses after its reservation gives the estimate back', async () => {
    const boundary = createAdmissionBoundary({
      limit: { algorithm: 'fixed', limit: 1 },
      queue: false,
    });
    const { limits, nextSettle, remaining } = setup({ overload: boundary });
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let entered: () => void = () => {};
    const inHandler = new Promise<void>((resolve) => {
      entered = resolve;
    });
    const app = express();
    app.post('/generate', limits.route({ cost: 100, settle: () => 10 }), async (_req, res) => {
      entered();
      await held;
      res.json({ ok: true });
    });
    const url = await serve(app);
    const first = post(`${url}/generate`);
    await inHandler;
    // The one slot is taken: this one is reserved, then refused with a 503, and cancelled.
    const cancelled = nextSettle();
    expect((await post(`${url}/generate`)).status).toBe(503);
    expect(await cancelled).toMatchObject({ actual: 0, finished: false });
    // The first still holds its 100.
    expect(await remaining()).toBe(900);
    const settled = nextSettle();
    release();
    expect((await first).status).toBe(200);
    expect(await settled).toMatchObject({ actual: 10, finished: true });
    expect(await remaining()).toBe(990);
  });
});

describe('Fastify: config.sluice { cost, settle }', () => {
  it('charges the actual the handler reported, not the estimate; a route with settle needs cost', async () => {
    const clock = new ManualClock(1_700_000_000_000);
    const limiter = createLimiter({ store: new MemoryStore(), policies: tokens, clock });
    let settled: (e: EdgeSettleEvent) => void = () => {};
    const done = new Promise<EdgeSettleEvent>((resolve) => {
      settled = resolve;
    });
    const limits = createFastifyRateLimit({
      limiter,
      descriptor: byApiKey({
        key: 'tenant',
        resolve: (k) => (k === 'key-acme' ? 'acme' : undefined),
      }),
      onSettle: (e) => settled(e),
    });
    const app = Fastify();
    apps.push(app);
    await app.register(limits.plugin);
    app.post(
      '/generate',
      {
        config: {
          sluice: {
            cost: 300,
            settle: (_request, reply) => Number(reply.getHeader('x-usage-tokens')),
          },
        },
      },
      async (_request, reply) => {
        void reply.header('x-usage-tokens', '42');
        return { text: 'hello' };
      },
    );
    expect(() =>
      app.post('/bad', { config: { sluice: { settle: () => 1 } } }, async () => ({})),
    ).toThrow(expect.objectContaining({ code: 'SLUICE_ERR_HTTP_CONFIG_INVALID' }));
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    const res = await post(`${url}/generate`);
    expect(res.status).toBe(200);
    await res.text();
    expect(await done).toMatchObject({ route: 'POST /generate', actual: 42, finished: true });
    const read = await limiter.check({ tenant: 'acme' }, { cost: 0 });
    expect(read.decision!.remaining).toBe(1_000 - 42);
  });
});
