/**
 * The node:http / Express middleware through a real Express 5 server on 127.0.0.1 and
 * real `fetch` calls; the limiter runs on a MemoryStore with a ManualClock, so every
 * header value below is derived by hand in a comment.
 */
import { createServer, type IncomingMessage } from 'node:http';
import express, { type Express } from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import type { PolicyInput } from '../../src/config/policies.js';
import { ManualClock } from '../../src/core/clock.js';
import { SluiceError } from '../../src/core/errors.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import {
  byApiKey,
  byClientIp,
  createHttpRateLimit,
  type EdgeEvent,
  type HttpRateLimitOptions,
} from '../../src/http.js';
import { asAcme, post } from '../support/api-key-requests.js';
import { listen, type Listening } from '../support/listen.js';
import { snapshot } from './serve.js';

const T0 = 1_700_000_000_000;
const tenants: Record<string, string> = { 'key-acme': 'acme', 'key-globex': 'globex' };

/** The payments policy: tenant 100/s, burst 20; costs come from the routes. */
const payments: PolicyInput[] = [
  { name: 'payments-tenant', match: ['tenant'], rate: 100, burst: 20, failureMode: 'closed' },
];
const POLICY_HEADER = '"payments-tenant";q=100;w=1;sluice-burst=20';
const JSON_TYPE = 'application/json; charset=utf-8';

const running: Listening[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.close()));
});

async function serve(app: Express | ReturnType<typeof createServer>): Promise<string> {
  const server = typeof app === 'function' ? createServer(app) : app;
  const s = await listen(server);
  running.push(s);
  return s.url;
}

function setup(policies: PolicyInput[] = payments, options: Partial<HttpRateLimitOptions> = {}) {
  const clock = new ManualClock(T0);
  const limiter = createLimiter({ store: new MemoryStore(), policies, clock });
  const events: EdgeEvent[] = [];
  const errors: unknown[] = [];
  const limits = createHttpRateLimit({
    limiter,
    descriptor: byApiKey({ key: 'tenant', resolve: (k) => tenants[k] }),
    onEvent: (e) => events.push(e),
    onError: (e) => errors.push(e),
    ...options,
  });
  return { clock, limiter, limits, events, errors };
}

function paymentsApp(limits: ReturnType<typeof setup>['limits']): Express {
  const app = express();
  app.post('/transfers/:id', limits.route({ cost: 5 }), (_req, res) => {
    res.json({ ok: true });
  });
  app.get('/transfers/:id/status', limits.route({ cost: 1 }), (_req, res) => {
    res.json({ status: 'settled' });
  });
  return app;
}

describe('Express: allowed and denied responses', () => {
  it('an allowed request carries RateLimit-Policy and RateLimit, exactly', async () => {
    const { limits } = setup();
    const url = await serve(paymentsApp(limits));
    expect(await snapshot(await post(`${url}/transfers/1`))).toEqual({
      status: 200,
      headers: {
        'content-type': JSON_TYPE,
        'content-length': '11',
        'ratelimit-policy': POLICY_HEADER,
        // 20 - 5 = 15 left; the 5 refill in 5 / 100/s = 50ms, rounded up to 1s
        ratelimit: '"payments-tenant";r=15;t=1',
      },
      body: '{"ok":true}',
    });
  });

  it('a denied request gets 429, Retry-After, the headers and the exact JSON body', async () => {
    const { limits, events } = setup();
    const url = await serve(paymentsApp(limits));
    for (const id of [1, 2, 3, 4]) expect((await post(`${url}/transfers/${id}`)).status).toBe(200);
    expect(await snapshot(await post(`${url}/transfers/5`))).toEqual({
      status: 429,
      headers: {
        'content-type': JSON_TYPE,
        'content-length': '82',
        'retry-after': '1', // 5 units at 100/s = 50ms, rounded up
        'ratelimit-policy': POLICY_HEADER,
        ratelimit: '"payments-tenant";r=0;t=1',
      },
      body: '{"error":"rate limit exceeded","policy":"payments-tenant","retry_after_seconds":1}',
    });
    expect(events.map((e) => [e.outcome, e.route, e.policy])).toEqual([
      ...[1, 2, 3, 4].map(() => ['allowed', 'POST /transfers/:id', 'payments-tenant']),
      ['denied', 'POST /transfers/:id', 'payments-tenant'],
    ]);
    expect(limits.stats()).toMatchObject({ allowed: 4, denied: 1 });
  });

  it('scopes by the route template: /transfers/1 and /transfers/2 share one bucket per tenant', async () => {
    const { limits } = setup();
    const url = await serve(paymentsApp(limits));
    const remaining = [];
    for (const id of ['1', '2', '1', 'abc']) {
      remaining.push((await post(`${url}/transfers/${id}`)).headers.get('ratelimit'));
    }
    expect(remaining).toEqual([
      '"payments-tenant";r=15;t=1',
      '"payments-tenant";r=10;t=1',
      '"payments-tenant";r=5;t=1',
      '"payments-tenant";r=0;t=1',
    ]);
    // another tenant has its own bucket
    expect((await post(`${url}/transfers/1`, 'key-globex')).headers.get('ratelimit')).toBe(
      '"payments-tenant";r=15;t=1',
    );
  });

  it('charges each route its own cost: status 1, transfer 5', async () => {
    const { limits } = setup();
    const url = await serve(paymentsApp(limits));
    const seen = [];
    for (let i = 0; i < 3; i++) {
      seen.push((await fetch(`${url}/transfers/${i}/status`, asAcme)).headers.get('ratelimit'));
    }
    seen.push((await post(`${url}/transfers/9`)).headers.get('ratelimit'));
    expect(seen).toEqual([
      '"payments-tenant";r=19;t=1', // 1 unit refills in 10ms → 1s
      '"payments-tenant";r=18;t=1',
      '"payments-tenant";r=17;t=1',
      '"payments-tenant";r=12;t=1',
    ]);
  });

  it("passes the route template to the policies' cost rules when the route sets no cost", async () => {
    const { limits } = setup([
      {
        ...payments[0]!,
        cost: {
          default: 1,
          rules: [
            { when: { route: 'POST /transfers/:id' }, cost: 5 },
            { when: { route: 'GET /transfers/:id/status' }, cost: 2 },
          ],
        },
      },
    ]);
    const app = express();
    app.post('/transfers/:id', limits.route(), (_req, res) => res.json({}));
    app.get('/transfers/:id/status', limits.route(), (_req, res) => res.json({}));
    const url = await serve(app);
    expect((await post(`${url}/transfers/7`)).headers.get('ratelimit')).toBe(
      '"payments-tenant";r=15;t=1',
    );
    expect((await fetch(`${url}/transfers/7/status`, asAcme)).headers.get('ratelimit')).toBe(
      '"payments-tenant";r=13;t=1',
    );
  });
});

describe('Express: Retry-After against the manual clock', () => {
  // 1 unit per 10 s, burst 2: after two requests the next one needs a full 10 s.
  const slow: PolicyInput[] = [
    { name: 'tenant-slow', match: ['tenant'], rate: 1, period: '10s', burst: 2 },
  ];

  it('is the denying wait in whole seconds, rounded up, as the clock moves', async () => {
    const { limits, clock } = setup(slow);
    const url = await serve(paymentsApp(limits));
    const status = () => fetch(`${url}/transfers/1/status`, asAcme);
    expect((await status()).status).toBe(200);
    expect((await status()).status).toBe(200);
    const rows: [advanceMs: number, status: number, retryAfter: string | null, body: string][] = [
      // t0: the bucket is empty; one unit comes back in 10,000ms
      [0, 429, '10', '10'],
      // +2,500ms: 7,500ms left → 8
      [2_500, 429, '8', '8'],
      // +7,499ms: 1ms left → rounded up to 1, never 0
      [7_499, 429, '1', '1'],
      // +1ms: exactly one unit is back
      [1, 200, null, ''],
    ];
    for (const [advance, code, retryAfter, seconds] of rows) {
      clock.advance(advance);
      const res = await status();
      const body = await res.text();
      expect([res.status, res.headers.get('retry-after')]).toEqual([code, retryAfter]);
      if (code === 429) {
        expect(body).toBe(
          `{"error":"rate limit exceeded","policy":"tenant-slow","retry_after_seconds":${seconds}}`,
        );
        expect(res.headers.get('ratelimit')).toBe(`"tenant-slow";r=0;t=${seconds}`);
      }
    }
  });

  it('takes the longest wait, and names its policy, when several policies deny', async () => {
    const { limits } = setup([
      { name: 'tenant-second', match: ['tenant'], rate: 1, period: '10s', burst: 1 },
      { name: 'tenant-minute', match: ['tenant'], rate: 1, period: '1m', burst: 1 },
    ]);
    const url = await serve(paymentsApp(limits));
    expect((await fetch(`${url}/transfers/1/status`, asAcme)).status).toBe(200);
    expect(await snapshot(await fetch(`${url}/transfers/1/status`, asAcme))).toEqual({
      status: 429,
      headers: {
        'content-type': JSON_TYPE,
        'content-length': '81',
        'retry-after': '60',
        'ratelimit-policy':
          '"tenant-second";q=1;w=10;sluice-burst=1, "tenant-minute";q=1;w=60;sluice-burst=1',
        ratelimit: '"tenant-second";r=0;t=10, "tenant-minute";r=0;t=60',
      },
      body: '{"error":"rate limit exceeded","policy":"tenant-minute","retry_after_seconds":60}',
    });
  });
});

describe('Express: header options', () => {
  it('adds the legacy X-RateLimit-* headers when asked', async () => {
    const { limits } = setup(payments, { headers: { legacy: true } });
    const url = await serve(paymentsApp(limits));
    const res = await post(`${url}/transfers/1`);
    expect([
      res.headers.get('x-ratelimit-limit'),
      res.headers.get('x-ratelimit-remaining'),
      res.headers.get('x-ratelimit-reset'),
    ]).toEqual(['20', '15', '1']);
  });

  it('leaves allowed responses without rate-limit headers when onAllowed is false, but not 429s', async () => {
    const { limits } = setup(payments, { headers: { onAllowed: false } });
    const url = await serve(paymentsApp(limits));
    expect((await snapshot(await post(`${url}/transfers/1`))).headers).toEqual({
      'content-type': JSON_TYPE,
      'content-length': '11',
    });
    for (let i = 0; i < 3; i++) await post(`${url}/transfers/1`);
    const denied = await post(`${url}/transfers/1`);
    expect([denied.status, denied.headers.get('ratelimit')]).toEqual([
      429,
      '"payments-tenant";r=0;t=1',
    ]);
  });

  it('never advertises shadow policies', async () => {
    const { limits } = setup([
      ...payments,
      { name: 'trial-cap', match: ['tenant'], rate: 1, burst: 10, shadow: true },
    ]);
    const url = await serve(paymentsApp(limits));
    const res = await post(`${url}/transfers/1`);
    expect([res.headers.get('ratelimit-policy'), res.headers.get('ratelimit')]).toEqual([
      POLICY_HEADER,
      '"payments-tenant";r=15;t=1',
    ]);
  });
});

describe('Express: errors never leak', () => {
  it('a descriptor builder that throws gives a generic 500 and reaches onError', async () => {
    const boom = new Error('tenant database password=hunter2 unreachable');
    const { limits, errors, events } = setup(payments, {
      descriptor: () => {
        throw boom;
      },
    });
    const url = await serve(paymentsApp(limits));
    expect(await snapshot(await post(`${url}/transfers/1`))).toEqual({
      status: 500,
      headers: { 'content-type': JSON_TYPE, 'content-length': '26' },
      body: '{"error":"internal error"}',
    });
    expect(errors).toEqual([boom]);
    expect(events.map((e) => e.outcome)).toEqual(['error']);
  });

  it('an invalid descriptor (a value over the length limit) is a 500, not a 400 with details', async () => {
    const { limits, errors } = setup(payments, {
      descriptor: (req: IncomingMessage) => ({ tenant: String(req.headers['x-tenant']) }),
    });
    const url = await serve(paymentsApp(limits));
    const res = await fetch(`${url}/transfers/1/status`, {
      headers: { 'x-tenant': 'x'.repeat(2000) },
    });
    expect([res.status, await res.text()]).toEqual([500, '{"error":"internal error"}']);
    expect((errors[0] as SluiceError).code).toBe('SLUICE_ERR_DESCRIPTOR_INVALID');
  });

  it('a rate limit mounted with app.use (no route template) is refused with a 500, never keyed by URL', async () => {
    const { limits, errors } = setup();
    const app = express();
    app.use(limits.route());
    app.get('/anything', (_req, res) => res.json({}));
    const url = await serve(app);
    const res = await fetch(`${url}/anything`, asAcme);
    expect([res.status, await res.text()]).toEqual([500, '{"error":"internal error"}']);
    expect((errors[0] as SluiceError).code).toBe('SLUICE_ERR_HTTP_CONFIG_INVALID');
  });

  it('an app.use rate limit with an explicit name works', async () => {
    const { limits, events } = setup();
    const app = express();
    app.use(limits.route({ name: 'ANY /api', cost: 2 }));
    app.get('/anything/:x', (_req, res) => res.json({}));
    const url = await serve(app);
    const res = await fetch(`${url}/anything/1`, asAcme);
    expect([res.status, res.headers.get('ratelimit')]).toEqual([200, '"payments-tenant";r=18;t=1']);
    expect(events[0]?.route).toBe('ANY /api');
  });

  it('refuses invalid options at start-up rather than answering 500 to every request', () => {
    for (const bad of [{ timeoutMs: 0 }, { routeKey: '' }, { trustProxy: ['10.0.0.0/40'] }]) {
      expect(() => setup(payments, bad as Partial<HttpRateLimitOptions>)).toThrow(
        expect.objectContaining({ code: 'SLUICE_ERR_HTTP_CONFIG_INVALID' }),
      );
    }
  });

  it('refuses an invalid route cost when the route is declared', () => {
    const { limits } = setup();
    expect(() => limits.route({ cost: -1 })).toThrow(
      expect.objectContaining({ code: 'SLUICE_ERR_HTTP_CONFIG_INVALID' }),
    );
    expect(() => limits.route({ cost: 1.5 })).toThrow(/non-negative safe integer/);
  });

  it('lets a request without identity through unchecked and counts it as skipped', async () => {
    const { limits } = setup();
    const url = await serve(paymentsApp(limits));
    const res = await fetch(`${url}/transfers/1`, { method: 'POST' });
    expect(await snapshot(res)).toEqual({
      status: 200,
      headers: { 'content-type': JSON_TYPE, 'content-length': '11' },
      body: '{"ok":true}',
    });
    expect(limits.stats()).toEqual({
      allowed: 0,
      'fail-open': 0,
      denied: 0,
      unavailable: 0,
      skipped: 1,
      error: 0,
      overloaded: 0,
    });
  });
});

describe('Express: routers and plain node:http', () => {
  it('labels a mounted router’s routes with the prefix it is given', async () => {
    const { limits, events } = setup(payments, { prefix: '/v1' });
    const router = express.Router();
    router.post('/transfers/:id', limits.route({ cost: 5 }), (_req, res) => res.json({}));
    const app = express();
    app.use('/v1', router);
    const url = await serve(app);
    expect((await post(`${url}/v1/transfers/3`)).status).toBe(200);
    expect(events.map((e) => e.route)).toEqual(['POST /v1/transfers/:id']);
  });

  it('checks plain node:http handlers with check()', async () => {
    const { limits } = setup();
    const server = createServer((req, res) => {
      void (async () => {
        if (!(await limits.check(req, res, { name: 'POST /transfers/:id', cost: 5 }))) return;
        res.end('done');
      })();
    });
    const url = await serve(server);
    const answers = [];
    for (let i = 0; i < 5; i++) {
      const res = await post(`${url}/transfers/${i}`);
      answers.push([res.status, res.headers.get('ratelimit'), await res.text()]);
    }
    expect(answers).toEqual([
      [200, '"payments-tenant";r=15;t=1', 'done'],
      [200, '"payments-tenant";r=10;t=1', 'done'],
      [200, '"payments-tenant";r=5;t=1', 'done'],
      [200, '"payments-tenant";r=0;t=1', 'done'],
      [
        429,
        '"payments-tenant";r=0;t=1',
        '{"error":"rate limit exceeded","policy":"payments-tenant","retry_after_seconds":1}',
      ],
    ]);
  });
});

describe('Express: client address and spoofing', () => {
  // One request per client address, then 429: the bucket shows whose identity was used.
  const perIp: PolicyInput[] = [
    { name: 'per-ip', match: ['client_ip'], rate: 1, period: '1h', burst: 1 },
  ];

  function ipApp(options: Partial<HttpRateLimitOptions>) {
    const seen: string[] = [];
    const { limits } = setup(perIp, {
      descriptor: async (req, ctx) => {
        const d = (await byClientIp<IncomingMessage>()(req, ctx)) as Record<string, string>;
        seen.push(d['client_ip']!);
        return d;
      },
      ...options,
    });
    const app = express();
    app.get('/whoami', limits.route(), (_req, res) => res.json({}));
    return { app, seen };
  }

  it('without a trusted proxy, a client-sent X-Forwarded-For does not change its identity', async () => {
    const { app, seen } = ipApp({});
    const url = await serve(app);
    const a = await fetch(`${url}/whoami`, { headers: { 'x-forwarded-for': '203.0.113.9' } });
    const b = await fetch(`${url}/whoami`, { headers: { 'x-forwarded-for': '198.51.100.7' } });
    const c = await fetch(`${url}/whoami`, { headers: { forwarded: 'for=192.0.2.1' } });
    expect([a.status, b.status, c.status]).toEqual([200, 429, 429]);
    expect(seen).toEqual(['127.0.0.1', '127.0.0.1', '127.0.0.1']);
  });

  it('with one trusted hop, the entry that hop appended is the client, spoofed entries before it ignored', async () => {
    const { app, seen } = ipApp({ trustProxy: 1 });
    const url = await serve(app);
    const statuses = [];
    for (const xff of [
      '203.0.113.9', // the proxy (127.0.0.1, the socket peer) saw 203.0.113.9
      '203.0.113.10', // another client: its own bucket
      '6.6.6.6, 203.0.113.9', // 203.0.113.9 again, trying to pass as 6.6.6.6
    ]) {
      statuses.push((await fetch(`${url}/whoami`, { headers: { 'x-forwarded-for': xff } })).status);
    }
    expect(statuses).toEqual([200, 200, 429]);
    expect(seen).toEqual(['203.0.113.9', '203.0.113.10', '203.0.113.9']);
  });

  it('with a trusted CIDR and the Forwarded header, walks back to the first untrusted address', async () => {
    const { app, seen } = ipApp({
      trustProxy: ['127.0.0.1/32', '10.0.0.0/8'],
      forwardedHeader: 'forwarded',
    });
    const url = await serve(app);
    await fetch(`${url}/whoami`, {
      headers: { forwarded: 'for=6.6.6.6, for="[2001:DB8::17]:4711";proto=https, for=10.1.2.3' },
    });
    // X-Forwarded-For is not the configured header: ignored
    await fetch(`${url}/whoami`, { headers: { 'x-forwarded-for': '203.0.113.9' } });
    expect(seen).toEqual(['2001:db8::17', '127.0.0.1']);
  });
});
