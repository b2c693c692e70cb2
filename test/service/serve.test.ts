/**
 * The service end to end on the embedded memory store with the example configs: a real
 * gRPC client (envoy's RateLimitService) and real HTTP requests against startService().
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../../src/service/main.js';
import { startExampleService, stillClock } from '../support/loopback-service.js';
import { call, connect, type Clients } from './grpc/client.js';

let svc: RunningService;
const clock = stillClock();
let clients: Clients;

beforeAll(async () => {
  svc = await startExampleService({
    clock, // time stands still unless a test moves it: no refill between calls
  });
  clients = connect(svc.grpcPort);
});
afterAll(async () => {
  clients?.close();
  await svc?.shutdown();
});

const transfer = (tenant: string) => ({
  domain: 'payments',
  descriptors: [
    {
      entries: [
        { key: 'tenant', value: tenant },
        { key: 'route', value: 'POST /transfers' },
      ],
    },
  ],
});

describe('sluice serve (memory store, example configs)', () => {
  it('answers ShouldRateLimit over gRPC: the burst of 20 OK, the rest OVER_LIMIT', async () => {
    const answers = await Promise.all(
      Array.from({ length: 30 }, () =>
        call<{ overallCode: string }>(clients.rls, 'ShouldRateLimit', transfer('grpc-tenant')),
      ),
    );
    expect(answers.filter((r) => r.overallCode === 'OK')).toHaveLength(20);
    expect(answers.filter((r) => r.overallCode === 'OVER_LIMIT')).toHaveLength(10);
  });

  it('answers /json like upstream (200, then 429 when over) and keeps tenants apart', async () => {
    const post = (tenant: string) =>
      fetch(`http://127.0.0.1:${svc.httpPort}/json`, {
        method: 'POST',
        body: JSON.stringify(transfer(tenant)),
      });
    const statuses = (await Promise.all(Array.from({ length: 30 }, () => post('json-tenant')))).map(
      (r) => r.status,
    );
    expect(statuses.filter((s) => s === 200)).toHaveLength(20);
    expect(statuses.filter((s) => s === 429)).toHaveLength(10);
    expect((await post('other-tenant')).status).toBe(200);
  });

  it('answers a descriptor with no rule as OK, and an unknown domain as OK', async () => {
    const r = await call<{ overallCode: string }>(clients.rls, 'ShouldRateLimit', {
      domain: 'nope',
      descriptors: [{ entries: [{ key: 'x', value: 'y' }] }],
    });
    expect(r.overallCode).toBe('OK');
  });

  it('serves the native /v1/check with the stable policy name and Retry-After', async () => {
    const check = () =>
      fetch(`http://127.0.0.1:${svc.httpPort}/v1/check`, {
        method: 'POST',
        body: JSON.stringify({ descriptor: { tenant: 'native', route: 'POST /transfers' } }),
      });
    const answers = [];
    for (let i = 0; i < 5; i++) answers.push(await check());
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 429]);
    // payments-tenant: burst 20, 100/s, a transfer costs 5. Four took the burst and the
    // clock stands still, so the fifth waits exactly 5 units / 100 per s = 50 ms: one
    // whole second in the header (rounded up).
    expect(answers[4]!.headers.get('retry-after')).toBe('1');
    const body = (await answers[4]!.json()) as { policy: string; retryAfterMs: number };
    expect(body.policy).toBe('payments-tenant');
    expect(body.retryAfterMs).toBe(50);
  });

  it('serves /rlconfig, /healthcheck and /metrics', async () => {
    const base = `http://127.0.0.1:${svc.httpPort}`;
    expect(await (await fetch(`${base}/rlconfig`)).text()).toContain(
      'payments.tenant.route_POST /transfers: unit=SECOND requests_per_unit=20',
    );
    expect(await (await fetch(`${base}/healthcheck`)).text()).toBe('OK');
    expect(await (await fetch(`${base}/metrics`)).text()).toContain(
      'sluice_config_load_total{result="success"} 1',
    );
  });
});

describe('sluice serve metrics', () => {
  it('times gRPC decisions in sluice_decision_duration_seconds', async () => {
    await call(clients.rls, 'ShouldRateLimit', transfer('metrics-tenant'));
    const text = await (await fetch(`http://127.0.0.1:${svc.httpPort}/metrics`)).text();
    expect(text).toMatch(
      /sluice_decision_duration_seconds_count\{transport="grpc",method="ShouldRateLimit"\} [1-9]/,
    );
  });
});

describe('sluice serve: upstream answer details', () => {
  it('reports duration_until_reset in whole seconds to the end of the epoch-aligned window', async () => {
    // the clock is at 1_700_000_000_000 ms = 20 s into a minute: 40 s until it ends
    const r = await fetch(`http://127.0.0.1:${svc.httpPort}/json`, {
      method: 'POST',
      body: JSON.stringify({
        domain: 'payments',
        descriptors: [{ entries: [{ key: 'tenant', value: 'reset' }] }],
      }),
    });
    const body = (await r.json()) as {
      statuses: { durationUntilReset: string; limitRemaining: number }[];
    };
    expect(body.statuses[0]).toMatchObject({ durationUntilReset: '40s', limitRemaining: 99 });
  });
});
