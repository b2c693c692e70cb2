/**
 * The admission boundary wired into sluice/http (Express 5) and sluice/fastify, through
 * real servers and real fetch calls: 503 bodies and Retry-After per reason, permits
 * released when responses close, the rate check first, and the Prometheus metrics.
 */
import { createServer } from 'node:http';
import express from 'express';
import Fastify from 'fastify';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { createFastifyRateLimit } from '../../src/fastify.js';
import { createHttpRateLimit, type EdgeEvent } from '../../src/http.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import {
  createAdmissionBoundary,
  OverloadMetrics,
  parseCriticality,
  type AdmissionBoundary,
} from '../../src/overload.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import { listen, type Listening } from '../support/listen.js';
import { snapshot } from './serve.js';

const running: Listening[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.close()));
});

/** A promise the test resolves to let held requests finish. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { opened, open };
}

function limiterOf(rate = 1_000) {
  return createLimiter({
    store: new MemoryStore(),
    policies: [{ name: 'per-tenant', match: ['tenant'], rate, burst: rate }],
  });
}

/** Waits until `check` holds, polling on the event loop (the server is in this process). */
async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((r) => setImmediate(r));
}

const JSON_TYPE = 'application/json; charset=utf-8';

describe('sluice/http with an overload boundary (Express)', () => {
  it('answers 503 + Retry-After naming the reason; the permit is held until the response closes', async () => {
    const registry = new Registry();
    const metrics = new OverloadMetrics(registry, 'api');
    const boundary = createAdmissionBoundary({
      limit: { algorithm: 'fixed', limit: 1 },
      queue: false,
      retryAfter: '2s',
      recorder: metrics,
    });
    metrics.observe(boundary);
    const events: EdgeEvent[] = [];
    const limits = createHttpRateLimit({
      limiter: limiterOf(),
      descriptor: () => ({ tenant: 'acme' }),
      overload: boundary,
      onEvent: (e) => events.push(e),
    });
    const hold = gate();
    const app = express();
    app.get('/slow', limits.route(), async (_req, res) => {
      await hold.opened;
      res.json({ ok: true });
    });
    const { url } = await listen(createServer(app)).then((s) => (running.push(s), s));

    const first = fetch(`${url}/slow`);
    await until(() => boundary.stats().inflight === 1);
    expect(await snapshot(await fetch(`${url}/slow`))).toEqual({
      status: 503,
      headers: {
        'retry-after': '2',
        'content-type': JSON_TYPE,
        'content-length': '96',
      },
      body: '{"error":"overloaded","reason":"shed","code":"SLUICE_ERR_OVERLOAD_SHED","retry_after_seconds":2}',
    });
    hold.open();
    expect((await first).status).toBe(200);
    await until(() => boundary.stats().inflight === 0);
    expect((await fetch(`${url}/slow`)).status).toBe(200);
    expect(limits.stats()).toMatchObject({ allowed: 2, overloaded: 1 });
    expect(events.filter((e) => e.outcome === 'overloaded').map((e) => e.overload)).toEqual([
      'shed',
    ]);

    await until(() => boundary.stats().inflight === 0);
    const text = await registry.metrics();
    expect(text).toContain(
      'sluice_overload_admissions_total{boundary="api",outcome="admitted",criticality="CRITICAL"} 2',
    );
    expect(text).toContain(
      'sluice_overload_admissions_total{boundary="api",outcome="shed",criticality="CRITICAL"} 1',
    );
    expect(text).toContain(
      'sluice_overload_completions_total{boundary="api",outcome="success",criticality="CRITICAL"} 2',
    );
    expect(text).toContain('sluice_overload_limit{boundary="api"} 1');
    expect(text).toContain('sluice_overload_inflight{boundary="api"} 0');
  });

  it('the rate check comes first: a rate denial is a 429 and takes no slot; 5xx answers open the breaker', async () => {
    const boundary = createAdmissionBoundary({
      limit: { algorithm: 'fixed', limit: 10 },
      breaker: { minimumCalls: 3, errorRatio: 1, open: '30s' },
    });
    const limits = createHttpRateLimit({
      limiter: limiterOf(1),
      descriptor: (req) => ({ tenant: String(req.headers['x-tenant']) }),
      overload: boundary,
    });
    const app = express();
    app.get('/fail', limits.route(), (_req, res) => {
      res.status(500).json({ ok: false });
    });
    const { url } = await listen(createServer(app)).then((s) => (running.push(s), s));
    const as = (tenant: string) => fetch(`${url}/fail`, { headers: { 'x-tenant': tenant } });
    expect((await as('a')).status).toBe(500);
    const denied = await as('a'); // tenant a is over its 1/s
    expect(denied.status).toBe(429);
    expect(boundary.stats().outcomes.admitted).toBe(1);
    expect((await as('b')).status).toBe(500);
    expect((await as('c')).status).toBe(500);
    await until(() => boundary.stats().breaker === 'open');
    const open = await as('d');
    expect(open.status).toBe(503);
    expect(open.headers.get('retry-after')).toBe('30');
    expect(JSON.parse(await open.text())).toMatchObject({ reason: 'breaker-open' });
  });
});

describe('sluice/http: a deadline the queue cannot meet', () => {
  it('is refused at once with reason deadline, while a request without one waits its turn', async () => {
    const boundary = createAdmissionBoundary({
      limit: { algorithm: 'fixed', limit: 1 },
      queue: { size: 10, maxWait: '10s' },
    });
    const limits = createHttpRateLimit({
      limiter: limiterOf(),
      descriptor: () => ({ tenant: 'acme' }),
      overload: boundary,
      deadlineMs: (req) => {
        const v = req.headers['x-deadline-ms'];
        return typeof v === 'string' ? Number(v) : undefined;
      },
    });
    const hold = gate();
    const app = express();
    app.get('/slow', limits.route(), async (_req, res) => {
      await hold.opened;
      res.json({ ok: true });
    });
    const { url } = await listen(createServer(app)).then((s) => (running.push(s), s));
    const first = fetch(`${url}/slow`);
    await until(() => boundary.stats().inflight === 1);
    const waiting = fetch(`${url}/slow`);
    await until(() => boundary.stats().queued === 1);
    // Already past: it could only fail after waiting, so it is answered now.
    const late = await fetch(`${url}/slow`, {
      headers: { 'x-deadline-ms': String(Date.now() - 1) },
    });
    expect(late.status).toBe(503);
    expect(JSON.parse(await late.text())).toMatchObject({
      reason: 'deadline',
      code: 'SLUICE_ERR_OVERLOAD_DEADLINE',
    });
    expect(boundary.stats().queued).toBe(1);
    hold.open();
    expect([(await first).status, (await waiting).status]).toEqual([200, 200]);
  });
});

describe('sluice/fastify with an overload boundary', () => {
  async function app(boundary: AdmissionBoundary, hold: Promise<void>) {
    const limits = createFastifyRateLimit({
      limiter: limiterOf(),
      descriptor: () => ({ tenant: 'acme' }),
      overload: boundary,
      // An internal caller sets the criticality; this app trusts it.
      criticality: (req) => parseCriticality(req.headers['x-criticality'] as string | undefined),
    });
    const f = Fastify();
    await f.register(limits.plugin);
    f.get('/work', async () => {
      await hold;
      return { ok: true };
    });
    await f.listen({ port: 0, host: '127.0.0.1' });
    const address = f.server.address() as { port: number };
    running.push({ port: address.port, url: '', close: () => f.close() });
    return `http://127.0.0.1:${address.port}`;
  }

  it('sheds SHEDDABLE at its ceiling while CRITICAL still gets in; slots come back when responses end', async () => {
    const boundary = createAdmissionBoundary({
      limit: { algorithm: 'fixed', limit: 4 },
      queue: false,
    });
    const hold = gate();
    const url = await app(boundary, hold.opened);
    const get = (criticality: string) =>
      fetch(`${url}/work`, { headers: { 'x-criticality': criticality } });
    // SHEDDABLE may fill ceil(4 × 0.5) = 2 slots, CRITICAL ceil(4 × 0.9) = 4.
    const held = [get('sheddable'), get('sheddable')];
    await until(() => boundary.stats().inflight === 2);
    const shed = await get('sheddable');
    expect(shed.status).toBe(503);
    expect(JSON.parse(await shed.text())).toMatchObject({ error: 'overloaded', reason: 'shed' });
    held.push(get('critical'), get('critical'));
    await until(() => boundary.stats().inflight === 4);
    expect((await get('critical')).status).toBe(503);
    hold.open();
    expect((await Promise.all(held)).map((r) => r.status)).toEqual([200, 200, 200, 200]);
    await until(() => boundary.stats().inflight === 0);
    expect(boundary.stats().outcomes).toMatchObject({ admitted: 4, shed: 2 });
  });
});
