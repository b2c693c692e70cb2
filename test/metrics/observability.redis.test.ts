/**
 * Every metric family of docs/metrics.md, read from the real service's `GET /metrics`
 * while it runs on a real redis-server behind a fault proxy: allowed, denied, shadow,
 * a Redis outage answered fail-open and fail-closed, recovery, a refused check, a
 * rejected config reload; then 10,000 distinct identities, which add no series.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parsePolicyText } from '../../src/config/load.js';
import { bucketKey } from '../../src/stores/key.js';
import { hashedKey } from '../../src/metrics/hashed-key.js';
import type { RunningService } from '../../src/service/main.js';
import type { FaultProxy } from '../support/fault-proxy.js';
import { samplesOf, sumOf } from '../support/prometheus-text.js';
import type { RedisServer } from '../support/redis-server.js';
import { startServiceBehindProxy } from '../support/service-behind-proxy.js';
import { stillClock } from '../support/loopback-service.js';
import { waitFor } from '../support/wait.js';

/**
 * Every policy waits up to 2s for the store: a healthy call on a loaded machine must not
 * time out (a timeout would add an error series the traffic does not imply; 500ms and 50ms
 * were passed at a load average of 17-24). The outage's calls wait for it, 4 × 2s at most.
 * Token buckets refilling one unit a day: no refill to speak of during the test, and no
 * window boundary to cross whatever the time (Redis's clock decides).
 */
const POLICIES = `
policies:
  - name: open-api
    match: [{ key: tenant }]
    algorithm: token-bucket
    rate: 1
    period: 1d
    burst: 2
    failureMode: open
    timeout: 2s
  - name: shadow-probe
    match: [{ key: tenant }]
    algorithm: token-bucket
    rate: 1
    period: 1d
    burst: 1
    shadow: true
    timeout: 2s
  - name: closed-api
    match: [{ key: user }]
    algorithm: token-bucket
    rate: 1
    period: 1d
    burst: 100
    failureMode: closed
    timeout: 2s
`;

let dir: string;
let redis: RedisServer;
let proxy: FaultProxy;
let svc: RunningService;

async function check(body: object): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${svc.httpPort}/v1/check`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  await res.arrayBuffer();
  return res.status;
}

async function scrape(): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${svc.httpPort}/metrics`);
  expect(res.status).toBe(200);
  return res.text();
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sluice-observability-'));
  writeFileSync(join(dir, 'policies.yaml'), POLICIES);
  ({ redis, proxy, svc } = await startServiceBehindProxy({
    policiesFile: join(dir, 'policies.yaml'),
    clock: stillClock(),
  }));
});
afterAll(async () => {
  await svc?.shutdown();
  await proxy?.close();
  await redis?.stop();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

describe('GET /metrics of the running service', () => {
  it('shows every family with the values the traffic implies', async () => {
    const shard = proxy.url.replace('redis://', '');
    let httpCalls = 0;
    const call = async (body: object): Promise<number> => {
      httpCalls++;
      return check(body);
    };

    // Healthy. Tenant a: open-api (burst 2) admits twice and denies the third; the shadow
    // probe (burst 1) would deny the second and third but never blocks.
    expect(await call({ descriptor: { tenant: 'a' } })).toBe(200);
    expect(await call({ descriptor: { tenant: 'a' } })).toBe(200);
    expect(await call({ descriptor: { tenant: 'a' } })).toBe(429);
    expect(await call({ descriptor: { user: 'u' } })).toBe(200);

    // Outage: Redis refuses connections and the open ones are reset. Calls wait for a
    // reconnect within their timeout, then the failure modes decide.
    proxy.refuse(true);
    proxy.resetAll();
    expect(await call({ descriptor: { tenant: 'b' } })).toBe(200); // fail-open
    expect(await call({ descriptor: { tenant: 'b' } })).toBe(200);
    expect(await call({ descriptor: { user: 'v' } })).toBe(503); // fail-closed
    expect(await call({ descriptor: { user: 'v' } })).toBe(503);

    // Recovery: user w's checks fail closed until the store answers again.
    proxy.refuse(false);
    let recoveringFailures = 0;
    await waitFor(
      async () => {
        const status = await call({ descriptor: { user: 'w' } });
        if (status === 200) return true;
        expect(status).toBe(503);
        recoveringFailures++;
        return undefined;
      },
      { what: 'the store back after the outage', timeoutMs: 10_000, intervalMs: 20 },
    );

    // A refused check (unknown policy) and a rejected reload.
    expect(await call({ descriptor: { tenant: 'a' }, policies: ['nope'] })).toBe(400);
    writeFileSync(join(dir, 'policies.yaml'), 'policies: [{ name: 1 }]');
    expect(await svc.reload()).toBe(false);
    writeFileSync(join(dir, 'policies.yaml'), POLICIES);

    const t = await scrape();
    const v = (name: string, labels: Record<string, string> = {}) => sumOf(t, name, labels);
    const failedCalls = 4 + recoveringFailures;
    console.log(
      `[observability] outage: 4 calls + ${recoveringFailures} while reconnecting failed; ` +
        `store errors by reason ${JSON.stringify(
          Object.fromEntries(
            samplesOf(t)
              .filter((s) => s.name === 'sluice_store_errors_total')

              .map((s) => [`${s.labels['code']}/${s.labels['reason']}`, s.value]),
          ),
        )}; ` +
        `redis errors on ${shard}: ${v('sluice_redis_errors_total', { shard })}`,
    );

    // Decisions by policy, status and path.
    const d = (policy: string, status: string, path: string) =>
      v('sluice_decisions_total', { policy, status, path });
    expect(d('open-api', 'OK', 'store')).toBe(2);
    expect(d('open-api', 'OVER_LIMIT', 'store')).toBe(1);
    expect(d('open-api', 'OK', 'fail-open')).toBe(2);
    expect(d('shadow-probe', 'OK', 'shadow')).toBe(1 + 2); // first check, then the outage's two
    expect(d('shadow-probe', 'OVER_LIMIT', 'shadow')).toBe(2);
    expect(d('closed-api', 'OK', 'store')).toBe(2); // u, then w once back
    expect(d('closed-api', 'UNAVAILABLE', 'fail-closed')).toBe(2 + recoveringFailures);

    // Limiter errors by code, store errors by code and reason: one per failed store call.
    expect(v('sluice_store_errors_total')).toBe(failedCalls);
    expect(
      v('sluice_store_errors_total', { reason: 'connection' }) +
        v('sluice_store_errors_total', { reason: 'timeout' }),
    ).toBe(failedCalls);
    expect(v('sluice_limiter_errors_total', { code: 'SLUICE_ERR_POLICY_UNKNOWN' })).toBe(1);
    expect(
      v('sluice_limiter_errors_total') -
        v('sluice_limiter_errors_total', { code: 'SLUICE_ERR_POLICY_UNKNOWN' }),
    ).toBe(failedCalls);

    // Decision latency: per check in the limiter, per call in the HTTP server.
    expect(v('sluice_check_duration_seconds_count', { outcome: 'ok' })).toBe(2 + 1 + 2 + 1);
    expect(v('sluice_check_duration_seconds_count', { outcome: 'over_limit' })).toBe(1);
    expect(v('sluice_check_duration_seconds_count', { outcome: 'unavailable' })).toBe(
      2 + recoveringFailures,
    );
    expect(v('sluice_check_duration_seconds_count', { outcome: 'invalid' })).toBe(1);
    expect(
      v('sluice_decision_duration_seconds_count', { transport: 'http', method: 'Check' }),
    ).toBe(httpCalls);

    // Store calls: every check that reached the store is one call, answered or failed.
    expect(v('sluice_store_call_duration_seconds_count', { result: 'ok' })).toBe(3 + 2);
    expect(v('sluice_store_call_duration_seconds_count', { result: 'error' })).toBe(failedCalls);

    // Redis per shard (the node's host:port) and per script: the answered calls took time
    // on the wire; the outage's failures are the shard's errors.
    // (A failed call may have gone out: on the link just reset, or one reconnecting.)
    const scriptCalls = v('sluice_redis_call_duration_seconds_count', {
      shard,
      script: 'applyBatches',
    });
    expect(scriptCalls).toBeGreaterThanOrEqual(5);
    expect(scriptCalls).toBeLessThanOrEqual(5 + failedCalls);
    expect(v('sluice_redis_errors_total', { shard })).toBeGreaterThanOrEqual(1);
    // The node's own script time (INFO commandstats at scrape): this service is its only
    // client, so it ran the calls answered above.
    const serverCalls = v('sluice_redis_script_calls_total', { shard });
    console.log(
      `[observability] ${shard}: ${scriptCalls} script calls timed on the wire; INFO commandstats: ${serverCalls} calls, ${v('sluice_redis_script_seconds_total', { shard })} s`,
    );
    expect(serverCalls).toBeGreaterThanOrEqual(5);
    expect(serverCalls).toBeLessThanOrEqual(scriptCalls);
    expect(v('sluice_redis_script_seconds_total', { shard })).toBeGreaterThan(0);
    expect(
      samplesOf(t)
        .filter((s) => s.name.startsWith('sluice_redis_'))
        .every((s) => s.labels['shard'] === shard),
    ).toBe(true);

    // Remaining capacity after each store decision of open-api: about 1/2, about 0, 0.
    const ratio = (le: string) => v('sluice_remaining_ratio_bucket', { policy: 'open-api', le });
    expect([ratio('0.05'), ratio('0.75'), ratio('1')]).toEqual([2, 3, 3]);

    // Active keys per policy: tenants a and b; users u, v and w.
    expect(v('sluice_active_keys', { policy: 'open-api' })).toBe(2);
    expect(v('sluice_active_keys', { policy: 'closed-api' })).toBe(3);

    // Config loads: the start-up load and the rejected reload.
    expect(v('sluice_config_load_total', { result: 'success' })).toBe(1);
    expect(v('sluice_config_load_total', { result: 'error' })).toBe(1);
    expect(v('sluice_config_last_success_timestamp_seconds')).toBeGreaterThan(1.7e9);

    // Stage families are exported (no stage runs in this service yet).
    for (const f of ['granted', 'spent', 'returned', 'overshoot']) {
      expect(t).toContain(`# TYPE sluice_stage_${f}_units_total counter`);
    }
    expect(v('sluice_metric_series_dropped_total')).toBe(0);
  });

  it('adds no series for 10,000 distinct identities, and lists the hot one hashed', async () => {
    // Fill the hot-key table (10 entries) first: its series are bounded, not absent.
    for (let i = 0; i < 20; i++)
      await svc.service.check({ entries: [{ key: 'tenant', value: `warm-${i}` }] });
    const before = samplesOf(await scrape());
    // Every fourth check is tenant "whale": its two buckets (one per tenant policy) each
    // get 12.5 % of the units the table sees, above 1/k = 10 %, so space-saving must list them.
    const N = 10_000;
    for (let i = 0; i < N; i += 100) {
      await Promise.all(
        Array.from({ length: 100 }, (_, j) =>
          svc.service.check({
            entries: [{ key: 'tenant', value: (i + j) % 4 === 0 ? 'whale' : `id-${i + j}` }],
          }),
        ),
      );
    }
    const text = await scrape();
    const after = samplesOf(text);
    console.log(
      `[observability] series before ${before.length}, after ${N} checks of ${N * 0.75 + 1} distinct identities: ${after.length}`,
    );
    const id = (x: { name: string; labels: Record<string, string> }) =>
      `${x.name}${JSON.stringify(x.labels)}`;
    // Hot keys change (their 10 series name the busiest buckets of the moment); every
    // other series is the same set.
    const steady = (xs: typeof before) =>
      xs.filter((x) => x.name !== 'sluice_hot_key_units').map(id);
    expect(steady(after).filter((x) => !steady(before).includes(x))).toEqual([]);
    expect(after.length).toBe(before.length);
    expect(text).not.toMatch(/id-\d|whale/);

    // The whale's two buckets (open-api and shadow-probe) are the top two, hashed.
    const { policies } = parsePolicyText(POLICIES, 'policies.yaml');
    const whale = (name: string) =>
      hashedKey(
        bucketKey(
          policies.find((p) => p.name === name)!,
          [{ key: 'tenant', value: 'whale' }],
        ),
      );
    const hot = after.filter((s) => s.name === 'sluice_hot_key_units');
    expect(hot).toHaveLength(10);
    const top2 = hot.filter((s) => s.labels['rank'] === '1' || s.labels['rank'] === '2');
    expect(new Set(top2.map((s) => s.labels['key']))).toEqual(
      new Set([whale('open-api'), whale('shadow-probe')]),
    );
    expect(svc.metrics.limiter.hotKeys()[0]!.count).toBeGreaterThanOrEqual(N / 4);

    // Active keys: 7,501 identities plus a, b and the 20 warm ones, estimated within 10 %.
    const active = sumOf(text, 'sluice_active_keys', { policy: 'open-api' });
    console.log(`[observability] sluice_active_keys{policy="open-api"} ${active} (true 7523)`);
    expect(Math.abs(active - 7_523) / 7_523).toBeLessThan(0.1);
  });
});
