/**
 * Failover with a lagging replica: what `replicatedAck` (WAIT) saves. The replica follows
 * its primary through a FaultProxy on the replication link, so the stream can be held (a
 * long latency: bytes are kept, not lost, as real lag keeps them). Three stores consume on
 * the primary meanwhile, one key each: without WAIT, with WAIT, and with strict WAIT. Then
 * the primary is killed by PID, the proxy closed (the held bytes never arrive) and the
 * replica promoted; each key's overshoot is the admissions its callers acted on that the
 * promoted replica never saw. Real redis-server processes; only the public Limiter API.
 */
import { afterAll, afterEach, expect, it } from 'vitest';
import type { CheckResult } from '../../../src/limiter/check-result.js';
import { type Limiter } from '../../../src/limiter/limiter.js';
import { createLimiter } from '../../../src/local/create-limiter.js';
import { bucketKey } from '../../../src/stores/key.js';
import { toDescriptor } from '../../../src/core/descriptor.js';
import { RedisStore, type RedisStoreOptions } from '../../../src/stores/redis/redis-store.js';
import { decidedByStore } from '../../support/check-results.js';
import { closeAllFaultProxies, FaultProxy } from '../../support/fault-proxy.js';
import { RedisServer, stopAllRedisServers } from '../../support/redis-server.js';
import { tokensIn } from '../../support/redis-state.js';
import { waitFor } from '../../support/wait.js';

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

const BURST = 100;
const policies = [
  {
    name: 'p',
    match: ['tenant'],
    rate: 1,
    period: '1h',
    burst: BURST,
    failureMode: 'closed' as const,
    // Above WAIT's timeout: a short WAIT is answered by the store, not by this deadline.
    timeout: '10s',
  },
];

// WAIT's timeout is far above a loopback round trip on a loaded machine, so only the hold
// makes it short; degraded for longer than the test, so every consume after that skips WAIT.
const ACK = { replicas: 1, timeoutMs: 1_000, degradedForMs: 60_000 };
const MODES = {
  off: {},
  wait: { replicatedAck: ACK },
  strict: { replicatedAck: { ...ACK, strict: true } },
} as const satisfies Record<string, Omit<RedisStoreOptions, 'client'>>;
type Mode = keyof typeof MODES;

it('overshoot after promotion from one held stream: WAIT off, WAIT on, strict (strict loses none)', async () => {
  const primary = await RedisServer.start();
  const replica = await RedisServer.start();
  const link = await FaultProxy.start(primary);
  cleanups.push(
    () => replica.stop(),
    () => primary.stop(),
    () => link.close(),
  );
  const admin = primary.client();
  const follower = replica.client();
  await follower.replicaof(link.host, String(link.port));
  // The replica has everything written so far once a marker written after it is acknowledged
  // (WAIT on the admin connection covers the replication offset of its own last write).
  const caughtUp = (what: string) =>
    waitFor(
      async () => {
        await admin.set('marker', String(performance.now()));
        return Number(await admin.wait(1, 1_000)) >= 1 ? true : undefined;
      },
      { what, timeoutMs: 20_000 },
    );
  await caughtUp('the replica to stream through the proxy');

  const limiters = {} as Record<Mode, { limiter: Limiter; store: RedisStore }>;
  for (const mode of Object.keys(MODES) as Mode[]) {
    const store = RedisStore.connect(primary.url, MODES[mode]);
    cleanups.push(() => Promise.race([store.close(), new Promise((r) => setTimeout(r, 500))]));
    await store.ready();
    limiters[mode] = { store, limiter: createLimiter({ store, policies }) };
  }
  const admitted = { off: 0, wait: 0, strict: 0 };
  const unavailable = { off: 0, wait: 0, strict: 0 };
  const round = async (): Promise<void> => {
    for (const mode of Object.keys(MODES) as Mode[]) {
      const r: CheckResult = await limiters[mode].limiter.check({ tenant: mode });
      if (r.allowed) admitted[mode]++;
      else if (r.status === 'UNAVAILABLE') unavailable[mode]++;
      if (!r.allowed && decidedByStore(r)) throw new Error(`${mode}: denied by the store`);
    }
  };
  // Replicated: 10 consumes per key while the stream flows.
  for (let i = 0; i < 10; i++) await round();
  const beforeHold = { ...admitted };
  // Only once the replica has them: bytes still on their way at the hold would be held too.
  await caughtUp('the replica to acknowledge the 10 consumes per key made before the hold');
  // Hold the stream: every byte on the link (writes one way, acks the other) waits.
  link.setLatency(60_000);
  for (let i = 0; i < 20; i++) await round();
  const waitStats = { ...limiters.wait.store.replicatedAckStats };
  const strictStats = { ...limiters.strict.store.replicatedAckStats };

  await primary.kill();
  await link.close();
  await follower.replicaof('NO', 'ONE');
  const consumedOnReplica = {} as Record<Mode, number>;
  for (const mode of Object.keys(MODES) as Mode[]) {
    const p = limiters[mode].limiter.policies[0]!;
    const key = limiters[mode].store.redisKey(bucketKey(p, toDescriptor({ tenant: mode })));
    // rate 1/h: the refill since the first consume is well under one unit.
    consumedOnReplica[mode] = Math.round(BURST - ((await tokensIn(follower, key)) ?? BURST));
  }
  const overshoot = (m: Mode): number => Math.max(0, admitted[m] - consumedOnReplica[m]);
  for (const mode of Object.keys(MODES) as Mode[]) {
    console.log(
      `[lagging-replica] ${mode}: admitted ${admitted[mode]} (${beforeHold[mode]} before the hold, ` +
        `${admitted[mode] - beforeHold[mode]} during it), UNAVAILABLE ${unavailable[mode]}; the promoted ` +
        `replica had ${consumedOnReplica[mode]} consumed: overshoot ${overshoot(mode)} (of burst ${BURST})`,
    );
  }
  console.log(
    `[lagging-replica] WAIT stats: on ${JSON.stringify(waitStats)}, strict ${JSON.stringify(strictStats)}`,
  );

  // Before the hold every mode admitted all and the replica has them.
  for (const mode of Object.keys(MODES) as Mode[]) {
    expect(beforeHold[mode]).toBe(10);
    expect(consumedOnReplica[mode]).toBeGreaterThanOrEqual(10);
  }
  // Without WAIT every consume during the hold is lost: overshoot 20.
  expect(admitted.off).toBe(30);
  expect(overshoot('off')).toBe(20);
  // WAIT: the first consume of the hold waits 1 s, comes back short, and is admitted;
  // the primary is then degraded, so the rest are admitted without a WAIT.
  expect(waitStats.short).toBeGreaterThanOrEqual(1);
  expect(waitStats.skipped).toBeGreaterThanOrEqual(1);
  expect(overshoot('wait')).toBe(20);
  // Strict: nothing unreplicated was admitted; the failure mode (closed) answered.
  expect(admitted.strict).toBe(10);
  expect(unavailable.strict).toBe(20);
  expect(overshoot('strict')).toBe(0);
});
