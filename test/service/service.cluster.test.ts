/**
 * Three `sluice serve` processes (the built CLI, dist/) on one real Redis Cluster
 * (3 primaries + 3 replicas): one started with `--redis-cluster host:port,...`, two with
 * upstream's `REDIS_TYPE=cluster` + `REDIS_URL` list. Together they enforce one global
 * 100/minute limit per tenant, for tenants spread over every primary.
 */
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keySlot } from '../../src/stores/redis/slot-groups.js';
import { inOneWindow } from '../support/one-window.js';
import { samplesOf } from '../support/prometheus-text.js';
import { RedisCluster } from '../support/redis-cluster.js';
import { type Serve, spawnServe, svcRequest as request } from '../support/sluice-serve.js';
import { call, connect } from './grpc/client.js';

const config = join(import.meta.dirname, 'fixtures', 'redis-svc');

const CALLS = 200;
const children: ChildProcess[] = [];
let cluster: RedisCluster;

beforeAll(async () => {
  // No failover is under test here: a node the loaded machine starves for a second must
  // not be failed over mid-file (the default 1 s timeout is for the failover tests).
  cluster = await RedisCluster.start({ nodeTimeoutMs: 15_000 });
});

afterAll(async () => {
  for (const child of children) {
    if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      process.kill(child.pid, 'SIGKILL');
    }
  }
  await cluster?.stop();
});

async function serve(mode: 'flag' | 'env'): Promise<Serve> {
  const list = cluster.startupNodes.map((n) => `${n.host}:${n.port}`).join(',');
  const s = await spawnServe(
    ['--config', config, ...(mode === 'flag' ? ['--redis-cluster', list] : [])],
    mode === 'env' ? { REDIS_TYPE: 'cluster', REDIS_URL: list } : {},
  );
  children.push(s.child);
  return s;
}

describe('sluice serve on one Redis Cluster', () => {
  it('three processes enforce one 100/minute limit per tenant: a tenant on each primary × 200 calls, exactly 100 OK each', async () => {
    const procs = await Promise.all([serve('flag'), serve('env'), serve('env')]);
    const clients = procs.map((p) => connect(p.grpcPort));
    try {
      await Promise.all(clients.map((c) => call(c.rls, 'ShouldRateLimit', request('warmup'))));
      // One tenant per primary: pick names until every primary owns one.
      const tenantsFor = async (attempt: number): Promise<Map<number, string>> => {
        const byPrimary = new Map<number, string>();
        for (let i = 0; byPrimary.size < 3; i++) {
          const tenant = `c-${process.pid}-${Date.now()}-${attempt}-${i}`;
          // The service's envoy rules key buckets by positional entries: the identity is the value.
          const key = `sl:{${encodeURIComponent(tenant)}}:x`;
          const port = (await cluster.nodeForSlot(keySlot(key))).port;
          if (!byPrimary.has(port)) byPrimary.set(port, tenant);
        }
        return byPrimary;
      };
      // All calls in one minute window (the rule is 100 per minute).
      const { primaries, answers, began } = await inOneWindow(60_000, async (attempt) => {
        const primaries = await tenantsFor(attempt);
        const began = performance.now();
        const answers = await Promise.all(
          [...primaries.values()].flatMap((tenant) =>
            Array.from({ length: CALLS }, (_, i) =>
              call<{ overallCode: string }>(
                clients[i % 3]!.rls,
                'ShouldRateLimit',
                request(tenant),
              ).then((r) => ({ tenant, proc: i % 3, code: r.overallCode })),
            ),
          ),
        );
        return { primaries, answers, began };
      });
      const tenants = [...primaries.values()];
      const callsMs = performance.now() - began;
      const okPer = tenants.map(
        (t) => answers.filter((a) => a.tenant === t && a.code === 'OK').length,
      );
      const overPer = tenants.map(
        (t) => answers.filter((a) => a.tenant === t && a.code === 'OVER_LIMIT').length,
      );
      const okByProc = [0, 1, 2].map(
        (p) => answers.filter((a) => a.proc === p && a.code === 'OK').length,
      );
      console.log(
        `[service] 3 processes on a Redis Cluster, ${tenants.length} tenants on ${primaries.size} primaries × ${CALLS} calls: OK per tenant ${okPer.join('/')}, OVER_LIMIT per tenant ${overPer.join('/')}, OK per process ${okByProc.join('/')}; ${answers.length} calls in ${callsMs.toFixed(0)} ms`,
      );
      // Where the buckets really are: keys per primary (the warm-up tenant adds one).
      const sizes = await Promise.all((await cluster.primaries()).map((n) => n.client().dbsize()));
      console.log(`[service] keys per primary: ${sizes.join('/')}`);
      expect(sizes.every((n) => n > 0)).toBe(true);
      expect(okPer).toEqual(tenants.map(() => 100));
      expect(overPer).toEqual(tenants.map(() => CALLS - 100));
      // Redis metrics by shard: every process called every primary, labelled host:port,
      // and read each primary's own script totals (INFO commandstats).
      const shards = (await cluster.primaries()).map((n) => `127.0.0.1:${n.port}`).sort();
      for (const p of procs) {
        const text = await (await fetch(`http://127.0.0.1:${p.httpPort}/metrics`)).text();
        const called = samplesOf(text)
          .filter((x) => x.name === 'sluice_redis_call_duration_seconds_count' && x.value > 0)
          .map((x) => x.labels['shard']);
        expect(new Set(called)).toEqual(new Set(shards));
        const served = samplesOf(text)
          .filter((x) => x.name === 'sluice_redis_script_calls_total' && x.value > 0)
          .map((x) => x.labels['shard']);
        expect(new Set(served)).toEqual(new Set(shards));
      }
    } finally {
      clients.forEach((c) => c.close());
    }
  });
});
