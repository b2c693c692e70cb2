/**
 * envoyproxy/ratelimit compatibility: matching and response rules from
 * docs/envoy-config.md, each on its own fixture domain (test/service/fixtures/compat/),
 * asked over real gRPC (envoy's ShouldRateLimit) and over real HTTP (`POST /json`), on the
 * embedded memory store and on a real redis-server. The clock stands still, so no window
 * rolls over between calls.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../../src/service/main.js';
import { startLoopbackService, stillClock } from '../support/loopback-service.js';
import { RedisServer } from '../support/redis-server.js';
import { call, connect, type Clients } from './grpc/client.js';

const fixtures = join(import.meta.dirname, 'fixtures/compat');
const UNLIMITED_REMAINING = 4294967295;

interface Limit {
  name: string;
  requestsPerUnit: number;
  unit: string;
}
interface Status {
  code: string;
  currentLimit: Limit | null;
  limitRemaining: number;
}
interface RlsAnswer {
  overallCode: string;
  statuses: Status[];
}

type Entries = Record<string, string>;
interface Descriptor {
  entries: Entries;
  limit?: { requestsPerUnit: number; unit: string };
}

const minute = (name: string, requestsPerUnit: number): Limit => ({
  name,
  requestsPerUnit,
  unit: 'MINUTE',
});
const ok = (limit: Limit, limitRemaining: number) => ({
  code: 'OK',
  currentLimit: limit,
  limitRemaining,
});
const over = (limit: Limit) => ({ code: 'OVER_LIMIT', currentLimit: limit, limitRemaining: 0 });
const noLimit = { code: 'OK', currentLimit: null, limitRemaining: 0 };

const setups = [
  { transport: 'gRPC', store: 'memory', redis: false },
  { transport: 'gRPC', store: 'redis', redis: true },
  { transport: '/json', store: 'memory', redis: false },
  { transport: '/json', store: 'redis', redis: true },
];

interface JsonStatus {
  code: string;
  currentLimit?: { name?: string; requestsPerUnit?: number; unit: string };
  limitRemaining?: number;
}

describe.each(setups)('envoy compatibility over $transport ($store store)', (setup) => {
  const { redis } = setup;
  let server: RedisServer | undefined;
  let svc: RunningService | undefined;
  let clients: Clients | undefined;

  beforeAll(async () => {
    if (redis) server = await RedisServer.start();
    svc = await startLoopbackService({
      envoyConfig: fixtures,
      ...(server === undefined ? {} : { redis: { type: 'single' as const, url: server.url } }),
      storeTimeoutMs: 5_000, // exactness, not latency, is under test here
      clock: stillClock(),
    });
    clients = connect(svc.grpcPort);
  }, 20_000);
  afterAll(async () => {
    clients?.close();
    await svc?.shutdown();
    await server?.stop();
  });

  /** One ShouldRateLimit call; returns only the fields the cases assert on. */
  async function ask(
    domain: string,
    descriptors: Descriptor[],
    hitsAddend?: number,
  ): Promise<{ overallCode: string; statuses: Status[] }> {
    const request = {
      domain,
      descriptors: descriptors.map((d) => ({
        entries: Object.entries(d.entries).map(([key, value]) => ({ key, value })),
        ...(d.limit === undefined ? {} : { limit: d.limit }),
      })),
      ...(hitsAddend === undefined ? {} : { hitsAddend }),
    };
    if (setup.transport === '/json') {
      const res = await fetch(`http://127.0.0.1:${svc!.httpPort}/json`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(request),
      });
      const body = (await res.json()) as { overallCode: string; statuses: JsonStatus[] };
      // upstream's JSON gateway: 429 exactly when the overall code is OVER_LIMIT
      expect(res.status).toBe(body.overallCode === 'OVER_LIMIT' ? 429 : 200);
      // protojson leaves default values (0, "", absent messages) out
      return {
        overallCode: body.overallCode,
        statuses: body.statuses.map(({ code, currentLimit, limitRemaining }) => ({
          code,
          currentLimit:
            currentLimit === undefined
              ? null
              : {
                  name: currentLimit.name ?? '',
                  requestsPerUnit: currentLimit.requestsPerUnit ?? 0,
                  unit: currentLimit.unit,
                },
          limitRemaining: limitRemaining ?? 0,
        })),
      };
    }
    const r = await call<RlsAnswer>(clients!.rls, 'ShouldRateLimit', request);
    return {
      overallCode: r.overallCode,
      statuses: r.statuses.map(({ code, currentLimit, limitRemaining }) => ({
        code,
        currentLimit:
          currentLimit === null
            ? null
            : {
                name: currentLimit.name,
                requestsPerUnit: currentLimit.requestsPerUnit,
                unit: currentLimit.unit,
              },
        limitRemaining,
      })),
    };
  }

  it('an exact key_value beats the key-only default', async () => {
    const gold = minute('gold', 5);
    const fallback = minute('plan-default', 10);
    expect(
      await ask('compat-exact', [
        { entries: { tenant: 'exact-1', plan: 'gold' } },
        { entries: { tenant: 'exact-1', plan: 'silver' } },
      ]),
    ).toEqual({ overallCode: 'OK', statuses: [ok(gold, 4), ok(fallback, 9)] });
    expect(await ask('compat-exact', [{ entries: { tenant: 'exact-1', plan: 'gold' } }])).toEqual({
      overallCode: 'OK',
      statuses: [ok(gold, 3)],
    });
  });

  it('a trailing wildcard value matches and beats the default', async () => {
    const api = minute('api', 3);
    const fallback = minute('path-default', 10);
    expect(
      await ask('compat-wildcard', [
        { entries: { tenant: 'wild-1', path: '/api/orders' } },
        { entries: { tenant: 'wild-1', path: '/api/' } },
        { entries: { tenant: 'wild-1', path: '/web/api/x' } },
      ]),
    ).toEqual({
      overallCode: 'OK',
      // each request value is its own bucket: /api/orders and /api/ count separately
      statuses: [ok(api, 2), ok(api, 2), ok(fallback, 9)],
    });
  });

  it('a descriptor shallower or deeper than the rule gets no limit', async () => {
    const route = minute('route', 5);
    expect(
      await ask('compat-depth', [
        { entries: { tenant: 'depth-1' } },
        { entries: { tenant: 'depth-1', route: 'r', extra: 'x' } },
        { entries: { tenant: 'depth-1', route: 'r' } },
      ]),
    ).toEqual({ overallCode: 'OK', statuses: [noLimit, noLimit, ok(route, 4)] });
  });

  it('does not backtrack to a sibling after a failed deeper match', async () => {
    const anyZone = minute('any-zone', 10);
    expect(
      await ask('compat-backtrack', [
        // region=eu matched exactly; zone=b has no node under it: no limit, even though
        // the default region has a key-only zone rule
        { entries: { tenant: 'back-1', region: 'eu', zone: 'b' } },
        { entries: { tenant: 'back-1', region: 'us', zone: 'b' } },
        { entries: { tenant: 'back-1', region: 'eu', zone: 'a' } },
      ]),
    ).toEqual({
      overallCode: 'OK',
      statuses: [noLimit, ok(anyZone, 9), ok(minute('eu-a', 5), 4)],
    });
  });

  it('an unlimited rule answers OK with 2^32-1 remaining, however often it is hit', async () => {
    for (let i = 0; i < 3; i++) {
      const r = await ask('compat-unlimited', [{ entries: { tenant: 'unl-1', internal: 'job' } }]);
      expect(r.overallCode).toBe('OK');
      expect(r.statuses).toHaveLength(1);
      expect(r.statuses[0]).toEqual({
        code: 'OK',
        currentLimit: null,
        limitRemaining: UNLIMITED_REMAINING,
      });
    }
  });

  it('a shadow_mode rule over its limit answers OK but is still counted', async () => {
    const shadowed = minute('shadowed', 2);
    const d = [{ entries: { tenant: 'shadow-1', feature: 'beta' } }];
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await ask('compat-shadow', d));
    expect(answers).toEqual([
      { overallCode: 'OK', statuses: [ok(shadowed, 1)] },
      { overallCode: 'OK', statuses: [ok(shadowed, 0)] },
      { overallCode: 'OK', statuses: [ok(shadowed, 0)] },
      { overallCode: 'OK', statuses: [ok(shadowed, 0)] },
    ]);
    // a different tenant has its own, untouched bucket
    expect(
      await ask('compat-shadow', [{ entries: { tenant: 'shadow-2', feature: 'beta' } }]),
    ).toEqual({ overallCode: 'OK', statuses: [ok(shadowed, 1)] });
  });

  it('a rule named in another matched rule’s replaces does not apply and is not counted', async () => {
    const legacy = { entries: { tenant: 'repl-1', legacy: 'v1' } };
    const modern = { entries: { tenant: 'repl-1', modern: 'v2' } };
    for (const remaining of [4, 3, 2]) {
      expect(await ask('compat-replaces', [legacy, modern])).toEqual({
        overallCode: 'OK',
        statuses: [noLimit, ok(minute('new', 5), remaining)],
      });
    }
    // alone, the old rule applies again, and its bucket was never touched
    expect(await ask('compat-replaces', [legacy])).toEqual({
      overallCode: 'OK',
      statuses: [ok(minute('old', 2), 1)],
    });
  });

  it('a request-level hits_addend of 3 consumes 3 from every descriptor', async () => {
    const op = minute('op', 10);
    const d = [
      { entries: { tenant: 'hits-1', op: 'read' } },
      { entries: { tenant: 'hits-1', op: 'write' } },
    ];
    expect(await ask('compat-hits', d, 3)).toEqual({
      overallCode: 'OK',
      statuses: [ok(op, 7), ok(op, 7)],
    });
    expect(await ask('compat-hits', d, 3)).toEqual({
      overallCode: 'OK',
      statuses: [ok(op, 4), ok(op, 4)],
    });
    expect(await ask('compat-hits', d, 3)).toEqual({
      overallCode: 'OK',
      statuses: [ok(op, 1), ok(op, 1)],
    });
    // 3 more do not fit the 1 left: over the limit, reported with 0 left as upstream does
    expect(await ask('compat-hits', d, 3)).toEqual({
      overallCode: 'OVER_LIMIT',
      statuses: [over(op), over(op)],
    });
  });

  it('a per-descriptor limit (2 per MINUTE) applies instead of the configured rule', async () => {
    const own = { name: '', requestsPerUnit: 2, unit: 'MINUTE' };
    const d = [
      {
        entries: { tenant: 'ovr-1', call: 'x' },
        limit: { requestsPerUnit: 2, unit: 'MINUTE' },
      },
    ];
    expect(await ask('compat-override', d)).toEqual({ overallCode: 'OK', statuses: [ok(own, 1)] });
    expect(await ask('compat-override', d)).toEqual({ overallCode: 'OK', statuses: [ok(own, 0)] });
    expect(await ask('compat-override', d)).toEqual({
      overallCode: 'OVER_LIMIT',
      statuses: [over(own)],
    });
    // without the override the configured 100/minute rule still holds for another tenant
    expect(await ask('compat-override', [{ entries: { tenant: 'ovr-2', call: 'x' } }])).toEqual({
      overallCode: 'OK',
      statuses: [ok(minute('call', 100), 99)],
    });
  });

  it('the overall code is OVER_LIMIT when one descriptor is over', async () => {
    const tight = minute('tight', 1);
    const loose = minute('loose', 10);
    const d = [
      { entries: { tenant: 'all-1', tight: 't' } },
      { entries: { tenant: 'all-1', loose: 'l' } },
    ];
    expect(await ask('compat-overall', d)).toEqual({
      overallCode: 'OK',
      statuses: [ok(tight, 0), ok(loose, 9)],
    });
    expect(await ask('compat-overall', d)).toEqual({
      overallCode: 'OVER_LIMIT',
      // as upstream, loose is charged although tight denies the request (all-or-nothing,
      // an opt-in, would answer 9: test/service/counting.test.ts)
      statuses: [over(tight), ok(loose, 8)],
    });
  });
  it('a `*` in the middle of a value, or several, matches any run of characters', async () => {
    const orders = minute('orders', 3);
    const price = minute('price', 2);
    const t = (path: string) => ({ entries: { tenant: 'mid-1', path } });
    expect(
      await ask('compat-wildcard-mid', [
        t('/v2/7/orders'),
        t('/v2/7/orders/1'),
        t('/v3/a/items/b/price'),
        t('/v3/a/b/items/c/d/price'),
        t('/v3/a/price'),
      ]),
    ).toEqual({
      overallCode: 'OK',
      statuses: [ok(orders, 2), noLimit, ok(price, 1), ok(price, 1), noLimit],
    });
    expect(await ask('compat-wildcard-mid', [t('/v3/a/items/b/price')])).toEqual({
      overallCode: 'OK',
      statuses: [ok(price, 0)],
    });
    expect(await ask('compat-wildcard-mid', [t('/v3/a/items/b/price')])).toEqual({
      overallCode: 'OVER_LIMIT',
      statuses: [over(price)],
    });
  });

  it('quota_mode: OVER_LIMIT only when every quota descriptor is over', async () => {
    const credits = minute('credits', 1);
    const bonus = minute('bonus', 2);
    const d = [
      { entries: { tenant: 'quota-1', credits: 'c' } },
      { entries: { tenant: 'quota-1', bonus: 'b' } },
    ];
    expect(await ask('compat-quota', d)).toEqual({
      overallCode: 'OK',
      statuses: [ok(credits, 0), ok(bonus, 1)],
    });
    // credits is over, bonus still fits: the request passes and bonus is charged
    expect(await ask('compat-quota', d)).toEqual({
      overallCode: 'OK',
      statuses: [over(credits), ok(bonus, 0)],
    });
    expect(await ask('compat-quota', d)).toEqual({
      overallCode: 'OVER_LIMIT',
      statuses: [over(credits), over(bonus)],
    });
  });

  it('share_threshold: every value matching the pattern shares one bucket', async () => {
    const docs = { name: 'docs', requestsPerUnit: 3, unit: 'HOUR' };
    const file = (f: string) => [{ entries: { file: f } }];
    expect(await ask('compat-metrics', file('docs/a.pdf'))).toEqual({
      overallCode: 'OK',
      statuses: [ok(docs, 2)],
    });
    expect(await ask('compat-metrics', file('docs/b.pdf'))).toEqual({
      overallCode: 'OK',
      statuses: [ok(docs, 1)],
    });
    expect(await ask('compat-metrics', file('docs/c.pdf'))).toEqual({
      overallCode: 'OK',
      statuses: [ok(docs, 0)],
    });
    expect(await ask('compat-metrics', file('docs/a.pdf'))).toEqual({
      overallCode: 'OVER_LIMIT',
      statuses: [over(docs)],
    });
  });

  it('metric keys: detailed_metric and value_to_metric add request values, nothing else does', async () => {
    await ask('compat-metrics', [{ entries: { client: 'mobile' } }]);
    await ask('compat-metrics', [{ entries: { route: '/a', user: 'u-secret' } }]);
    await ask('compat-metrics', [{ entries: { file: 'docs/x.pdf' } }]);
    const text = await (await fetch(`http://127.0.0.1:${svc!.httpPort}/metrics`)).text();
    const hits = (rule: string) =>
      text.includes(
        `sluice_rule_hits_total{domain="compat-metrics",rule="${rule}",outcome="total_hits"}`,
      );
    expect(hits('compat-metrics.client_mobile')).toBe(true);
    expect(hits('compat-metrics.route_/a.user')).toBe(true);
    expect(hits('compat-metrics.file_docs/*')).toBe(true);
    // the user value is not asked for in the key and never appears
    expect(text).not.toContain('u-secret');
    expect(text).not.toContain('x.pdf');
  });
});
