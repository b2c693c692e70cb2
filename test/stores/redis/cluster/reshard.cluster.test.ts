/**
 * Resharding under traffic: the slot of a busy identity is migrated to another primary
 * (CLUSTER SETSLOT IMPORTING/MIGRATING, MIGRATE in small batches with pauses, SETSLOT
 * NODE) while 16 concurrent callers keep deciding on it. ioredis follows the ASK / MOVED
 * / TRYAGAIN replies (each proves the script did not run), so no caller sees an error and
 * the buckets stay exact.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLimiter } from '../../../../src/local/create-limiter.js';
import type { CheckResult } from '../../../../src/limiter/check-result.js';
import { RedisStore } from '../../../../src/stores/redis/redis-store.js';
import { RedisCluster } from '../../../support/redis-cluster.js';
import { sleep } from '../../../support/wait.js';

const slow = { rate: 1, period: '1h', failureMode: 'closed', timeout: '5s' } as const;
const LOOPS = 16;

let cluster: RedisCluster;
let store: RedisStore;

beforeAll(async () => {
  // No failover is under test here: a node the loaded machine starves for a second must
  // not be failed over mid-file (the default 1 s timeout is for the failover tests).
  cluster = await RedisCluster.start({ nodeTimeoutMs: 15_000 });
  store = new RedisStore({ client: cluster.client() });
  await store.ready();
});

afterAll(async () => {
  await store?.close();
  await cluster?.stop();
});

describe('RedisStore on Redis Cluster: resharding', () => {
  it('migrates the slot of a busy key under traffic with zero caller-visible errors, exactly', async () => {
    const limiter = createLimiter({
      store,
      policies: [
        { name: 'big', match: ['tenant'], burst: 1_000_000, ...slow },
        { name: 'small', match: ['tenant', { key: 'kind', value: 'small' }], burst: 300, ...slow },
      ],
    });
    const tenant = 'busy';
    const key = store.redisKey(`{${tenant}}:big`);
    const slot = await cluster.slotOfKey(key);
    const source = await cluster.nodeForSlot(slot);
    const target = (await cluster.primaries()).find((n) => n !== source)!;

    let stop = false;
    const results: { big: CheckResult[]; small: CheckResult[] } = { big: [], small: [] };
    const loops = Array.from({ length: LOOPS }, async (_, i) => {
      while (!stop) {
        if (i % 2 === 0) {
          results.big.push(await limiter.check({ tenant }, { policies: ['big'] }));
        } else {
          results.small.push(
            await limiter.check({ tenant, kind: 'small' }, { policies: ['small'] }),
          );
        }
      }
    });
    await sleep(200);
    const began = performance.now();
    const moved = await cluster.migrateSlot(slot, target, { pauseMs: 100, batch: 1 });
    const migrationMs = performance.now() - began;
    await sleep(200);
    stop = true;
    await Promise.all(loops);

    expect(await cluster.nodeForSlot(slot)).toBe(target);
    const all = [...results.big, ...results.small];
    const errors = all.filter((r) => r.decisions.some((d) => d.path !== 'store'));
    const bigAdmitted = results.big.filter((r) => r.allowed).length;
    const smallAdmitted = results.small.filter((r) => r.allowed).length;
    const bigLeft = (await limiter.check({ tenant }, { policies: ['big'], cost: 0 })).decision!
      .remaining;
    const smallLeft = (
      await limiter.check({ tenant, kind: 'small' }, { policies: ['small'], cost: 0 })
    ).decision!.remaining;
    console.log(
      `[cluster] reshard: slot ${slot} ${source.url} -> ${target.url}, ${moved} keys moved in ${migrationMs.toFixed(0)} ms under ${LOOPS} callers; ` +
        `${all.length} decisions, ${errors.length} caller-visible errors; big: admitted ${bigAdmitted}, used ${(1_000_000 - bigLeft).toFixed(3)}; ` +
        `small (burst 300): admitted ${smallAdmitted} of ${results.small.length}, left ${smallLeft.toFixed(3)}`,
    );
    expect(errors).toHaveLength(0);
    expect(moved).toBeGreaterThanOrEqual(2);
    expect(1_000_000 - bigLeft).toBeGreaterThan(bigAdmitted - 0.01);
    expect(1_000_000 - bigLeft).toBeLessThanOrEqual(bigAdmitted);
    expect(smallAdmitted).toBe(Math.min(300, results.small.length));
  });
});
