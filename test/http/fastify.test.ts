/**
 * The Fastify plugin through a real Fastify 5 server on 127.0.0.1 and real `fetch`; the
 * limiter runs on a MemoryStore with a ManualClock.
 */
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import type { PolicyInput } from '../../src/config/policies.js';
import { ManualClock } from '../../src/core/clock.js';
import { SluiceError } from '../../src/core/errors.js';
import { createFastifyRateLimit, type FastifyRateLimitOptions } from '../../src/fastify.js';
import { byApiKey, byClientIp, type EdgeEvent } from '../../src/http.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import { asAcme, post } from '../support/api-key-requests.js';
import { headersOf } from './serve.js';

const T0 = 1_700_000_000_000;
const tenants: Record<string, string> = { 'key-acme': 'acme', 'key-globex': 'globex' };
const payments: PolicyInput[] = [
  { name: 'payments-tenant', match: ['tenant'], rate: 100, burst: 20, failureMode: 'closed' },
];
const POLICY_HEADER = '"payments-tenant";q=100;w=1;sluice-burst=20';
const JSON_TYPE = 'application/json; charset=utf-8';

const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((a) => a.close()));
});

async function start(
  policies: PolicyInput[] = payments,
  options: Partial<FastifyRateLimitOptions> = {},
  routes?: (app: FastifyInstance) => void,
) {
  const clock = new ManualClock(T0);
  const limiter = createLimiter({ store: new MemoryStore(), policies, clock });
  const events: EdgeEvent[] = [];
  const errors: unknown[] = [];
  const limits = createFastifyRateLimit({
    limiter,
    descriptor: byApiKey({ key: 'tenant', resolve: (k) => tenants[k] }),
    onEvent: (e) => events.push(e),
    onError: (e) => errors.push(e),
    ...options,
  });
  const app = Fastify();
  apps.push(app);
  await app.register(limits.plugin);
  if (routes) routes(app);
  else {
    app.post('/transfers/:id', { config: { sluice: { cost: 5 } } }, async () => ({ ok: true }));
    app.get('/transfers/:id/status', { config: { sluice: { cost: 1 } } }, async () => ({
      status: 'settled',
    }));
    app.get('/health', { config: { sluice: false } }, async () => ({ up: true }));
  }
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  return { url, clock, limits, events, errors };
}

describe('Fastify plugin', () => {
  it('answers allowed and denied requests with exact headers and bodies', async () => {
    const { url, limits } = await start();
    const first = await post(`${url}/transfers/1`);
    expect([first.status, headersOf(first), await first.text()]).toEqual([
      200,
      {
        'content-type': JSON_TYPE,
        'content-length': '11',
        'ratelimit-policy': POLICY_HEADER,
        ratelimit: '"payments-tenant";r=15;t=1',
      },
      '{"ok":true}',
    ]);
    for (const id of [2, 3, 4]) expect((await post(`${url}/transfers/${id}`)).status).toBe(200);
    const denied = await post(`${url}/transfers/5`);
    expect([denied.status, headersOf(denied), await denied.text()]).toEqual([
      429,
      {
        'content-type': JSON_TYPE,
        'content-length': '82',
        'retry-after': '1',
        'ratelimit-policy': POLICY_HEADER,
        ratelimit: '"payments-tenant";r=0;t=1',
      },
      '{"error":"rate limit exceeded","policy":"payments-tenant","retry_after_seconds":1}',
    ]);
    expect(limits.stats()).toMatchObject({ allowed: 4, denied: 1 });
  });

  it('scopes by routeOptions.url: /transfers/1 and /transfers/2 share one bucket; costs 5 and 1', async () => {
    const { url, events } = await start();
    const seen = [
      (await post(`${url}/transfers/1`)).headers.get('ratelimit'),
      (await post(`${url}/transfers/2`)).headers.get('ratelimit'),
      (await fetch(`${url}/transfers/2/status`, asAcme)).headers.get('ratelimit'),
      (await fetch(`${url}/transfers/3/status`, asAcme)).headers.get('ratelimit'),
      (await post(`${url}/transfers/2`, 'key-globex')).headers.get('ratelimit'),
    ];
    expect(seen).toEqual([
      '"payments-tenant";r=15;t=1',
      '"payments-tenant";r=10;t=1',
      '"payments-tenant";r=9;t=1',
      '"payments-tenant";r=8;t=1',
      '"payments-tenant";r=15;t=1', // another tenant, another bucket
    ]);
    expect(events.map((e) => e.route)).toEqual([
      'POST /transfers/:id',
      'POST /transfers/:id',
      'GET /transfers/:id/status',
      'GET /transfers/:id/status',
      'POST /transfers/:id',
    ]);
  });

  it('computes Retry-After from the manual clock, rounded up', async () => {
    const { url, clock } = await start([
      { name: 'tenant-slow', match: ['tenant'], rate: 1, period: '10s', burst: 1 },
    ]);
    const status = () => fetch(`${url}/transfers/1/status`, asAcme);
    expect((await status()).status).toBe(200);
    const got = [];
    for (const advance of [0, 4_001, 5_998, 1]) {
      clock.advance(advance);
      const res = await status();
      got.push([res.status, res.headers.get('retry-after')]);
    }
    // 10,000ms → 10; 5,999ms → 6; 1ms → 1; then the unit is back
    expect(got).toEqual([
      [429, '10'],
      [429, '6'],
      [429, '1'],
      [200, null],
    ]);
  });

  it('skips exempt routes and 404s, and answers a throwing builder with a generic 500', async () => {
    const boom = new Error('secret detail');
    const { url, errors, limits } = await start(payments, {
      descriptor: (req: FastifyRequest) => {
        if (req.headers['x-boom'] !== undefined) throw boom;
        return { tenant: 'acme' };
      },
    });
    expect((await fetch(`${url}/health`)).headers.get('ratelimit')).toBeNull();
    expect((await fetch(`${url}/nope`)).status).toBe(404);
    const res = await fetch(`${url}/transfers/1/status`, { headers: { 'x-boom': '1' } });
    expect([res.status, headersOf(res), await res.text()]).toEqual([
      500,
      { 'content-type': JSON_TYPE, 'content-length': '26' },
      '{"error":"internal error"}',
    ]);
    expect(errors).toEqual([boom]);
    expect(limits.stats()).toMatchObject({ allowed: 0, error: 1, skipped: 0 });
  });

  it('applies to routes registered in the parent scope (skip-override) and under prefixes', async () => {
    const { url, events } = await start(payments, {}, (app) => {
      void app.register(
        async (child) => {
          child.post('/transfers/:id', { config: { sluice: { cost: 5 } } }, async () => ({}));
        },
        { prefix: '/v1' },
      );
    });
    const res = await post(`${url}/v1/transfers/42`);
    expect([res.status, res.headers.get('ratelimit')]).toEqual([200, '"payments-tenant";r=15;t=1']);
    expect(events.map((e) => e.route)).toEqual(['POST /v1/transfers/:id']);
  });

  it('refuses a route with an invalid cost at registration', async () => {
    const limiter = createLimiter({ store: new MemoryStore(), policies: payments });
    const limits = createFastifyRateLimit({ limiter, descriptor: () => ({ tenant: 'a' }) });
    const app = Fastify();
    apps.push(app);
    await app.register(limits.plugin);
    let error: unknown;
    try {
      app.get('/x', { config: { sluice: { cost: -2 } } }, async () => ({}));
      await app.ready();
    } catch (e) {
      error = e;
    }
    expect((error as SluiceError).code).toBe('SLUICE_ERR_HTTP_CONFIG_INVALID');
    expect((error as Error).message).toBe(
      'route GET /x: route cost must be a non-negative safe integer, got -2',
    );
  });

  it('ignores a client-sent X-Forwarded-For without a trusted proxy, reads it with one trusted hop', async () => {
    const seen: string[] = [];
    const descriptor = async (
      req: FastifyRequest,
      ctx: Parameters<FastifyRateLimitOptions['descriptor']>[1],
    ) => {
      const d = (await byClientIp<FastifyRequest>()(req, ctx)) as Record<string, string>;
      seen.push(d['client_ip']!);
      return d;
    };
    const perIp: PolicyInput[] = [
      { name: 'per-ip', match: ['client_ip'], rate: 1, period: '1h', burst: 1 },
    ];
    const routes = (app: FastifyInstance) => app.get('/whoami', async () => ({}));
    const direct = await start(perIp, { descriptor }, routes);
    const behindProxy = await start(perIp, { descriptor, trustProxy: 1 }, routes);
    const hit = (url: string, xff: string) =>
      fetch(`${url}/whoami`, { headers: { 'x-forwarded-for': xff } }).then((r) => r.status);
    expect([
      await hit(direct.url, '203.0.113.9'),
      await hit(direct.url, '203.0.113.10'),
      await hit(behindProxy.url, '203.0.113.9'),
      await hit(behindProxy.url, '6.6.6.6, 203.0.113.10'),
      await hit(behindProxy.url, '203.0.113.9'),
    ]).toEqual([200, 429, 200, 200, 429]);
    expect(seen).toEqual(['127.0.0.1', '127.0.0.1', '203.0.113.9', '203.0.113.10', '203.0.113.9']);
  });
});
