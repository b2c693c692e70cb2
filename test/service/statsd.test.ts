/**
 * statsd end to end: the real service sends upstream's stat names to a real listener,
 * DogStatsD over UDP (spawned `sluice serve`, USE_DOG_STATSD) and plain statsd over TCP
 * (startService), each with EXTRA_TAGS, while Prometheus keeps answering on /metrics.
 */
import { createSocket } from 'node:dgram';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PolicyError } from '../../src/core/errors.js';
import { readServiceSettings } from '../../src/service/env-settings.js';
import { startLoopbackService, stillClock } from '../support/loopback-service.js';
import { spawnServe, stopServe } from '../support/sluice-serve.js';
import { waitFor } from '../support/wait.js';
import { call, connect, type Clients } from './grpc/client.js';

const config = join(import.meta.dirname, 'fixtures/statsd/stats.yaml');
const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

/** Statsd lines received, and each counter's sum over every flush. */
class Received {
  readonly lines: string[] = [];
  add(text: string): void {
    this.lines.push(...text.split('\n').filter((l) => l !== ''));
  }
  /** The sum of counter `name` (the part before `:`), over lines ending with `suffix`. */
  count(name: string, suffix = ''): number {
    return this.lines
      .filter((l) => l.startsWith(`${name}:`) && l.endsWith(`|c${suffix}`))
      .reduce((sum, l) => sum + Number(l.slice(name.length + 1).split('|')[0]), 0);
  }
}

/** The calls every test makes: acme ×3 (limit 2), one address, an unknown domain. */
async function traffic(clients: Clients): Promise<void> {
  const rls = (domain: string, entries: { key: string; value: string }[][]) =>
    call(clients.rls, 'ShouldRateLimit', {
      domain,
      descriptors: entries.map((e) => ({ entries: e })),
    });
  for (let i = 0; i < 3; i++) await rls('stats', [[{ key: 'tenant', value: 'acme' }]]);
  await rls('stats', [[{ key: 'remote_address', value: '10.0.0.1' }]]);
  await rls('nope', [[{ key: 'a', value: 'b' }], [{ key: 'c', value: 'd' }]]);
}

/** Upstream's counts for {@link traffic} (limit 2, near-limit threshold 1). */
const EXPECTED: Record<string, number> = {
  'ratelimit.service.rate_limit.stats.tenant_acme.total_hits': 3,
  'ratelimit.service.rate_limit.stats.tenant_acme.within_limit': 2,
  'ratelimit.service.rate_limit.stats.tenant_acme.near_limit': 1,
  'ratelimit.service.rate_limit.stats.tenant_acme.over_limit': 1,
  'ratelimit.service.rate_limit.stats.remote_address_10_0_0_1.total_hits': 1,
  'ratelimit.service.rate_limit.stats.remote_address_10_0_0_1.within_limit': 1,
  'ratelimit.service.rate_limit.nope.domain_not_found': 2,
  'ratelimit.service.config_load_success': 1,
  'ratelimit_server.ShouldRateLimit.total_requests': 5,
};

describe('statsd', () => {
  it("USE_DOG_STATSD: upstream's names over UDP, EXTRA_TAGS as DogStatsD tags", async () => {
    const udp = createSocket('udp4');
    const got = new Received();
    udp.on('message', (m) => got.add(m.toString()));
    await new Promise<void>((resolve) => udp.bind(0, '127.0.0.1', resolve));
    cleanup.push(() => udp.close());
    const serve = await spawnServe(['--config', config], {
      USE_DOG_STATSD: 'true',
      STATSD_HOST: '127.0.0.1',
      STATSD_PORT: String(udp.address().port),
      STATS_FLUSH_INTERVAL: '50ms',
      EXTRA_TAGS: 'env:test,team:rl',
    });
    cleanup.push(() => stopServe(serve));
    const clients = connect(serve.grpcPort);
    cleanup.push(() => clients.close());
    await traffic(clients);
    const tags = '|#env:test,team:rl';
    await waitFor(
      () => Object.entries(EXPECTED).every(([n, v]) => got.count(n, tags) === v) || undefined,
      { what: `every expected count, got:\n${got.lines.join('\n')}`, timeoutMs: 10_000 },
    );
    for (const [name, value] of Object.entries(EXPECTED))
      expect([name, got.count(name, tags)]).toEqual([name, value]);
    expect(
      got.lines.some((l) =>
        /^ratelimit_server\.ShouldRateLimit\.response_time:\d+\|ms\|#env:test,team:rl$/.test(l),
      ),
    ).toBe(true);
    // Prometheus stays.
    const prom = await (await fetch(`http://127.0.0.1:${serve.httpPort}/metrics`)).text();
    expect(prom).toContain('sluice_config_load_total');
  });

  it('USE_STATSD: plain statsd over TCP, as upstream, EXTRA_TAGS written into the names', async () => {
    const got = new Received();
    const sockets: Socket[] = [];
    const tcp = createServer((s) => {
      sockets.push(s);
      s.on('data', (b) => got.add(b.toString()));
    });
    await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
    cleanup.push(
      () =>
        new Promise((resolve) => {
          sockets.forEach((s) => s.destroy());
          tcp.close(resolve);
        }),
    );
    const port = (tcp.address() as { port: number }).port;
    const svc = await startLoopbackService({
      envoyConfig: config,
      clock: stillClock(),
      statsd: {
        flavor: 'statsd',
        host: '127.0.0.1',
        port,
        extraTags: { env: 'test' },
        flushIntervalMs: 50,
      },
    });
    cleanup.push(() => svc.shutdown());
    const clients = connect(svc.grpcPort);
    cleanup.push(() => clients.close());
    await traffic(clients);
    const tagged = (name: string) => `${name}.__env=test`;
    await waitFor(
      () => Object.entries(EXPECTED).every(([n, v]) => got.count(tagged(n)) === v) || undefined,
      { what: `every expected count, got:\n${got.lines.join('\n')}`, timeoutMs: 10_000 },
    );
    for (const [name, value] of Object.entries(EXPECTED))
      expect([name, got.count(tagged(name))]).toEqual([name, value]);
    expect(got.lines.every((l) => !l.includes('|#'))).toBe(true);
  });

  it('settings: off unless asked; one sink at a time; EXTRA_TAGS and the flush interval read', () => {
    expect(readServiceSettings({}).statsd).toBeUndefined();
    expect(
      readServiceSettings({
        USE_STATSD: 'true',
        EXTRA_TAGS: 'a:1,b:x:y',
        STATS_FLUSH_INTERVAL: '1m',
      }).statsd,
    ).toEqual({
      flavor: 'statsd',
      host: 'localhost',
      port: 8125,
      extraTags: { a: '1', b: 'x:y' },
      flushIntervalMs: 60_000,
    });
    let issues: unknown;
    try {
      readServiceSettings({ USE_STATSD: 'true', USE_DOG_STATSD: 'true' });
    } catch (e) {
      issues = (e as PolicyError).issues;
    }
    expect(issues).toEqual([
      {
        path: 'USE_STATSD, USE_DOG_STATSD',
        message: 'set only one of them to true (one statsd sink at a time, as upstream)',
      },
    ]);
  });
});
