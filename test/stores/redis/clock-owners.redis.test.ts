/**
 * Clock movement between Redis owners: bucket state written under the primary's clock,
 * then decided under a promoted replica's clock 5 s ahead or 5 s behind. The replica runs
 * under libfaketime (Redis takes `TIME` from the system clock), traffic goes through a
 * FaultProxy that is retargeted at the promotion, and the primary is killed by PID. The
 * test prints the admissions against what the policy permits by real time, before and
 * after, and checks them against the bound in docs/failure-modes.md ("Clocks"): a clock
 * ahead by `skew` may add up to `min(burst, rate × skew)`; a clock behind adds nothing.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLimiter } from '../../../src/local/create-limiter.js';
import { RedisStore } from '../../../src/stores/redis/redis-store.js';
import { decidedByStore } from '../../support/check-results.js';
import { ensureDebianCommand } from '../../support/debian-package.js';
import { fakeClockEnv } from '../../support/faketime.js';
import { closeAllFaultProxies, FaultProxy } from '../../support/fault-proxy.js';
import { RedisServer, stopAllRedisServers } from '../../support/redis-server.js';
import { sleep, waitFor } from '../../support/wait.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse())
    await Promise.resolve()
      .then(c)
      .catch(() => undefined);
});
afterAll(async () => {
  await closeAllFaultProxies();
  await stopAllRedisServers();
});

// A fresh machine installs libfaketime here, not inside a test's own timeout.
beforeAll(() => ensureDebianCommand('faketime', 'faketime').then(() => undefined), 600_000);

const RATE = 4; // units per second
const BURST = 20;
const SKEW_S = 5;
const WORKERS = 4;

async function run(skewS: number) {
  const primary = await RedisServer.start();
  const replica = await RedisServer.start({ replicaOf: primary, env: await fakeClockEnv(skewS) });
  cleanups.push(
    () => replica.stop(),
    () => primary.stop(),
  );
  const [tp, tr] = await Promise.all([primary.client().time(), replica.client().time()]);
  const measuredSkewMs =
    Number(tr[0]) * 1000 + Number(tr[1]) / 1000 - (Number(tp[0]) * 1000 + Number(tp[1]) / 1000);
  const proxy = await FaultProxy.start(primary);
  cleanups.push(() => proxy.close());
  const seed = new Redis({
    host: proxy.host,
    port: proxy.port,
    lazyConnect: true,
    retryStrategy: () => 25,
  });
  const store = new RedisStore({ client: seed });
  cleanups.push(() => Promise.race([store.close(), sleep(500)]));
  await store.ready();
  const limiter = createLimiter({
    store,
    policies: [
      {
        name: 'p',
        match: ['tenant'],
        rate: RATE,
        burst: BURST,
        failureMode: 'closed',
        timeout: '200ms',
      },
    ],
  });

  const admittedAt: number[] = [];
  let stop = false;
  const workers = Array.from({ length: WORKERS }, async () => {
    while (!stop) {
      const r = await limiter.check({ tenant: 'a' });
      if (r.allowed && decidedByStore(r)) admittedAt.push(performance.now());
      await sleep(10);
    }
  });
  const t0 = performance.now();
  // Before: one second on the primary (burst, then the refill).
  await sleep(1_000);
  await primary.kill();
  const killedAt = performance.now();
  await replica.client().replicaof('NO', 'ONE');
  proxy.setTarget(replica, { resetExisting: true });
  const promotedAt = performance.now();
  // After: two seconds on the promoted replica.
  await waitFor(() => (performance.now() - promotedAt >= 2_000 ? true : undefined), {
    what: 'two seconds after the promotion',
    timeoutMs: 5_000,
    intervalMs: 50,
  });
  stop = true;
  await Promise.all(workers);
  const end = performance.now();
  const before = admittedAt.filter((t) => t <= killedAt).length;
  const after = admittedAt.filter((t) => t > killedAt).length;
  // What the policy permits by real time since the first check: the burst plus the refill.
  const permittedBefore = BURST + (RATE * (killedAt - t0)) / 1000;
  const permitted = BURST + (RATE * (end - t0)) / 1000;
  const bound = skewS > 0 ? Math.min(BURST, RATE * skewS) : 0;
  console.log(
    `[clock] replica ${skewS > 0 ? '+' : ''}${skewS}s (measured ${Math.round(measuredSkewMs)}ms): before the failover ` +
      `${before} admitted, ${permittedBefore.toFixed(1)} permitted by real time; after ${after} admitted; total ` +
      `${before + after} against ${permitted.toFixed(1)} permitted by real time (extra ${(before + after - permitted).toFixed(1)}, ` +
      `documented bound ${bound} + at most ${WORKERS} writes lost to asynchronous replication)`,
  );
  return { measuredSkewMs, before, after, permittedBefore, permitted, bound };
}

describe('clock movement between owners (replica under libfaketime, promoted under traffic)', () => {
  it(`a replica ${SKEW_S}s ahead: extra capacity at most min(burst, rate × skew)`, async () => {
    const r = await run(SKEW_S);
    expect(r.measuredSkewMs).toBeGreaterThan(SKEW_S * 1000 - 500);
    expect(r.before).toBeLessThanOrEqual(Math.floor(r.permittedBefore));
    // The clock ahead refills the skew's worth early: visible, and within the bound.
    expect(r.before + r.after).toBeGreaterThan(Math.floor(r.permitted));
    expect(r.before + r.after).toBeLessThanOrEqual(Math.floor(r.permitted) + r.bound + WORKERS);
  });

  it(`a replica ${SKEW_S}s behind: no capacity created (nothing refills until its clock passes the stamps)`, async () => {
    const r = await run(-SKEW_S);
    expect(r.measuredSkewMs).toBeLessThan(-SKEW_S * 1000 + 500);
    expect(r.before).toBeLessThanOrEqual(Math.floor(r.permittedBefore));
    // Within 2 s of the promotion its clock is still behind the last stamp: only the
    // writes the replica may have missed (the primary's last turn) can be spent again.
    expect(r.after).toBeLessThanOrEqual(WORKERS);
    expect(r.before + r.after).toBeLessThanOrEqual(Math.floor(r.permitted) + WORKERS);
  });
});
