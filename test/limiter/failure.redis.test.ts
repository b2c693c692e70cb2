/**
 * The limiter under real faults: a real redis-server, a RedisStore connected through
 * FaultProxy (or straight to the server when the server itself is what fails), and only
 * the public Limiter API. Every test prints what it observed against what the policy
 * permits (`[failure] …` lines); docs/failure-modes.md quotes those figures.
 *
 * Timings are asserted as bounds that hold on a loaded 2-core CI machine, never as exact
 * values: an answer at the deadline is checked against a timer started beside the check
 * (Node runs due timers in order of expiry, so event-loop lag delays both alike), and other
 * bounds come from the mechanism (the watchdog's cycle, the reconnect interval) with room
 * for lag. The seed client given to each RedisStore sets only a fast `retryStrategy`
 * (25 ms), so reconnects are quick; every other connection setting is what RedisStore
 * itself chooses.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { systemClock, type Clock } from '../../src/core/clock.js';
import type { Decision } from '../../src/core/decision.js';
import { toDescriptor, type DescriptorInput } from '../../src/core/descriptor.js';
import { parsePolicies, type PolicyInput } from '../../src/config/policies.js';
import type { CheckResult } from '../../src/limiter/check-result.js';
import { type CheckOptions, type Limiter } from '../../src/limiter/limiter.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import { bucketKey, dedupKey } from '../../src/stores/key.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import { RedisStore, type RedisStoreOptions } from '../../src/stores/redis/redis-store.js';
import type { Store } from '../../src/stores/store.js';
import { beforeTimer } from '../support/before-timer.js';
import { decidedByStore } from '../support/check-results.js';
import { closeAllFaultProxies, FaultProxy, type ProxyTarget } from '../support/fault-proxy.js';
import {
  RedisServer,
  type RedisServerOptions,
  stopAllRedisServers,
} from '../support/redis-server.js';
import { sleep, waitFor } from '../support/wait.js';
import { tokensIn } from '../support/redis-state.js';

/** The seed client's reconnect interval (its `retryStrategy`). */
const RECONNECT_MS = 25;

function report(line: string): void {
  console.log(`[failure] ${line}`);
}

const ms = (x: number): string => `${Math.round(x)}ms`;

// ---------------------------------------------------------------------------------------
// Rig: servers, proxies and stores made here are torn down after each test.

const cleanups: (() => unknown)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) {
    await Promise.resolve()
      .then(cleanup)
      .catch(() => undefined);
  }
});

afterAll(async () => {
  await closeAllFaultProxies();
  await stopAllRedisServers();
});

async function startServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const server = await RedisServer.start(options);
  cleanups.push(() => server.stop());
  return server;
}

async function startProxy(target: ProxyTarget): Promise<FaultProxy> {
  const proxy = await FaultProxy.start(target);
  cleanups.push(() => proxy.close());
  return proxy;
}

interface Connected {
  readonly store: RedisStore;
  /** The store's own connection (the duplicate it made of the seed), for observation only. */
  readonly connection: () => Redis;
  /** How many times that connection became ready (1 = never reconnected). */
  readonly readyCount: () => number;
}

/** A RedisStore whose seed client points at `target` (a proxy or a server). */
function connectStore(
  target: ProxyTarget,
  options: Omit<RedisStoreOptions, 'client'> = {},
): Connected {
  const seed = new Redis({
    host: target.host,
    port: target.port,
    lazyConnect: true,
    retryStrategy: () => RECONNECT_MS,
  });
  let connection: Redis | undefined;
  let ready = 0;
  // Observe the connection RedisStore duplicates from the seed (status, reconnects).
  seed.duplicate = ((override?: Parameters<Redis['duplicate']>[0]) => {
    connection = Redis.prototype.duplicate.call(seed, override) as Redis;
    connection.on('ready', () => {
      ready += 1;
    });
    return connection;
  }) as Redis['duplicate'];
  const store = new RedisStore({ ...options, client: seed });
  cleanups.push(async () => {
    // quit() waits for Redis; a partitioned or dead server must not hang the teardown.
    await Promise.race([store.close(), sleep(1_000)]);
    connection?.disconnect();
  });
  return { store, connection: () => connection!, readyCount: () => ready };
}

/** The full Redis key of a policy's bucket for a descriptor. */
function rawKey(limiter: Limiter, store: RedisStore, policy: string, d: DescriptorInput): string {
  const p = limiter.policies.find((x) => x.name === policy);
  if (p === undefined) throw new Error(`no policy ${policy}`);
  return store.redisKey(bucketKey(p, toDescriptor(d)));
}

/** Polls `check` until the store decides again; returns how long that took, in ms. */
async function untilStore(
  check: () => Promise<CheckResult>,
  what: string,
  timeoutMs = 5_000,
): Promise<number> {
  const t0 = performance.now();
  await waitFor(async () => (decidedByStore(await check()) ? true : undefined), {
    what,
    timeoutMs,
    intervalMs: 20,
  });
  return performance.now() - t0;
}

/** Like {@link untilStore} but resolves `undefined` instead of throwing on timeout. */
async function storeBackWithin(
  check: () => Promise<CheckResult>,
  timeoutMs: number,
): Promise<number | undefined> {
  const t0 = performance.now();
  while (performance.now() - t0 < timeoutMs) {
    if (decidedByStore(await check())) return performance.now() - t0;
    await sleep(20);
  }
  return undefined;
}

const first = (r: CheckResult): Decision => {
  const d = r.decisions[0];
  if (d === undefined) throw new Error('no decision');
  return d;
};

/** Refill of one unit per hour: within a test the capacity is the burst. */
const slow = { rate: 1, period: '1h', burst: 10 } as const;
/** Practically unlimited, so a healthy store always says OK. */
const roomy = { rate: 100_000, burst: 100_000 } as const;

// ---------------------------------------------------------------------------------------

describe('1. timeout before the write (upstream blackhole)', () => {
  it('answers within the deadline with each failure mode, never OVER_LIMIT, and consumes nothing', async () => {
    const server = await startServer();
    const proxy = await startProxy(server);
    const { store } = connectStore(proxy);
    const direct = server.client();
    const limiter = createLimiter({
      store,
      policies: [
        { name: 'closed', match: ['closed'], ...slow, failureMode: 'closed', timeout: '50ms' },
        { name: 'open', match: ['open'], ...slow, failureMode: 'open', timeout: '50ms' },
        {
          name: 'stale',
          match: ['stale'],
          ...slow,
          failureMode: 'stale',
          stale: { ttl: '10s', fallback: 'closed' },
          timeout: '50ms',
        },
        {
          name: 'shadow',
          match: ['shadow'],
          ...slow,
          failureMode: 'closed',
          shadow: true,
          timeout: '50ms',
        },
        // The caller's budget (50ms) is shorter than this policy's timeout: it applies.
        { name: 'budget', match: ['budget'], ...slow, failureMode: 'closed', timeout: '5s' },
      ],
    });
    // A store answer for the stale policy's bucket (a cost-0 read writes nothing).
    await untilStore(() => limiter.check({ stale: 'x' }, { cost: 0 }), 'the store to answer');

    proxy.blackhole('upstream');
    const cases: [string, DescriptorInput, CheckOptions][] = [
      ['closed', { closed: 'x' }, {}],
      ['open', { open: 'x' }, {}],
      ['stale', { stale: 'x' }, {}],
      ['shadow', { shadow: 'x' }, {}],
      ['budget', { budget: 'x' }, { timeoutMs: 50 }],
    ];
    const seen: Record<string, { r: CheckResult; ms: number; beforeTwiceDeadline: boolean }> = {};
    for (const [name, d, options] of cases) {
      const t0 = performance.now();
      const { r, ok } = await beforeTimer(limiter.check(d, options), 2 * 50);
      seen[name] = { r, ms: performance.now() - t0, beforeTwiceDeadline: ok };
    }
    const line = Object.entries(seen)
      .map(([n, { r, ms: t }]) => `${n} → ${r.status}/${first(r).path} in ${ms(t)}`)
      .join('; ');

    proxy.heal();
    proxy.resetAll(); // the dropped commands left the connection's RESP stream out of step
    await untilStore(() => limiter.check({ closed: 'x' }, { cost: 0 }), 'the store to come back');
    const charged: number[] = [];
    for (const [name, d] of cases) {
      const tokens = await tokensIn(direct, rawKey(limiter, store, name, d));
      charged.push(tokens === undefined ? 0 : slow.burst - tokens);
    }
    const totalCharged = charged.reduce((a, b) => a + b, 0);
    report(
      `timeout before the write (upstream blackhole, deadline 50ms): ${line}; ` +
        `Redis charged ${totalCharged} time(s) for ${cases.length} attempts (permitted 0: no command reached Redis)`,
    );

    for (const { r, ms: t, beforeTwiceDeadline } of Object.values(seen)) {
      // At the 50 ms deadline: not before it, and not after a 100 ms timer started with it.
      expect(t).toBeGreaterThanOrEqual(45);
      expect(beforeTwiceDeadline).toBe(true);
      expect(r.status).not.toBe('OVER_LIMIT');
    }
    expect(seen['closed']!.r).toMatchObject({ allowed: false, status: 'UNAVAILABLE' });
    expect(first(seen['closed']!.r).path).toBe('fail-closed');
    expect(seen['open']!.r).toMatchObject({ allowed: true, status: 'OK' });
    expect(first(seen['open']!.r).path).toBe('fail-open');
    expect(seen['stale']!.r).toMatchObject({ allowed: true, status: 'OK' });
    expect(first(seen['stale']!.r).path).toBe('stale');
    expect(seen['shadow']!.r).toMatchObject({ allowed: true, status: 'OK' });
    expect(first(seen['shadow']!.r).path).toBe('shadow');
    expect(seen['budget']!.r).toMatchObject({ allowed: false, status: 'UNAVAILABLE' });
    expect(charged).toEqual([0, 0, 0, 0, 0]);
    for (const [, d] of cases) {
      expect(first(await limiter.check(d, { cost: 0 })).remaining).toBeCloseTo(slow.burst, 2);
    }
  });
});

describe('1b. a deadline longer than a Node timer can hold', () => {
  it('a policy timeout beyond 2^31-1 ms (~24.8 days) waits for the store instead of firing at 1ms', async () => {
    const server = await startServer();
    const proxy = await startProxy(server);
    const { store } = connectStore(proxy);
    const limiter = createLimiter({
      store,
      policies: [{ name: 'long', match: ['t'], ...slow, failureMode: 'closed', timeout: '30d' }],
    });
    await store.ready();
    proxy.setLatency(20); // every round trip takes at least 40ms
    const t0 = performance.now();
    const r = await limiter.check({ t: 'x' });
    const t = performance.now() - t0;
    report(
      `policy timeout 30d with a 40ms round trip: ${r.status}/${first(r).path} after ${ms(t)}`,
    );
    expect(first(r).path).toBe('store');
    expect(t).toBeGreaterThanOrEqual(40); // it waited for the store, through the round trip
  });
});

describe('2. reply lost after the write', () => {
  it('is ambiguous; a retry with the same request id returns the original decision and charges once; without an id nothing is resent', async () => {
    const server = await startServer();
    const proxy = await startProxy(server);
    const { store } = connectStore(proxy);
    const direct = server.client();
    const policies: PolicyInput[] = [
      { name: 'p', match: ['tenant'], ...slow, failureMode: 'closed', timeout: '1s' },
      { name: 'o', match: ['open'], ...slow, failureMode: 'open', timeout: '1s' },
    ];
    const limiter = createLimiter({ store, policies });
    // Load the script first: the lost reply must be the one of a script that ran.
    await untilStore(() => limiter.check({ tenant: 'warm' }, { cost: 0 }), 'the store to answer');
    const keyA = rawKey(limiter, store, 'p', { tenant: 'a' });
    const keyB = rawKey(limiter, store, 'p', { tenant: 'b' });

    // With a request id.
    proxy.dropNextReply({ thenReset: true });
    const t0 = performance.now();
    const lost = await limiter.check({ tenant: 'a' }, { cost: 3, requestId: 'r1' });
    const lostMs = performance.now() - t0;
    expect(proxy.stats().repliesDropped).toBe(1);
    expect(lost).toMatchObject({ allowed: false, status: 'UNAVAILABLE' });
    expect(lostMs).toBeLessThan(1_000);
    expect(first(lost).path).toBe('fail-closed');
    expect(await tokensIn(direct, keyA)).toBe(7); // it was applied all the same
    const record = await direct.getBuffer(
      store.redisKey(
        dedupKey(bucketKey(limiter.policies[0]!, toDescriptor({ tenant: 'a' })), 'r1'),
      ),
    );
    expect(record).not.toBeNull();

    const retry = await limiter.check({ tenant: 'a' }, { cost: 3, requestId: 'r1' });
    const afterRetry = await tokensIn(direct, keyA);
    const directStore = connectStore(server).store;
    const peek = await createLimiter({ store: directStore, policies }).check(
      { tenant: 'a' },
      { cost: 0 },
    );
    const chargesA = slow.burst - (afterRetry ?? slow.burst);
    report(
      `reply lost, retried with request id: first attempt ${lost.status}/${first(lost).path} after ${ms(lostMs)} ` +
        `(the reset, not the 1s deadline), ` +
        `retry ${retry.status}/${first(retry).path} remaining ${first(retry).remaining}; ` +
        `charged ${Math.round(chargesA / 3)} time(s) for 2 attempts (permitted 1)`,
    );
    expect(retry).toMatchObject({ allowed: true, status: 'OK' });
    expect(first(retry).path).toBe('store');
    // The original decision, as Redis recorded it when it applied the first attempt.
    // (the reply as sent: status byte, then remaining, retry-after and reset-after as doubles)
    expect(record!.readUInt8(0)).toBe(0);
    expect(first(retry).remaining).toBe(record!.readDoubleLE(1));
    expect(first(retry).retryAfterMs).toBe(record!.readDoubleLE(9));
    expect(first(retry).resetAfterMs).toBe(record!.readDoubleLE(17));
    expect(first(retry).remaining).toBe(7);
    expect(afterRetry).toBe(7);
    expect(first(peek).path).toBe('store');
    expect(first(peek).remaining).toBeCloseTo(7, 2);

    // Without a request id: the store's connection never resends the lost command.
    proxy.dropNextReply({ thenReset: true });
    const lostB = await limiter.check({ tenant: 'b' }, { cost: 3 });
    expect(lostB.status).toBe('UNAVAILABLE');
    expect(await tokensIn(direct, keyB)).toBe(7);
    await untilStore(() => limiter.check({ tenant: 'warm' }, { cost: 0 }), 'a reconnect');
    await sleep(200);
    const afterReconnect = await tokensIn(direct, keyB);
    // A blind retry by the caller (no id) is a new request: it is charged again.
    const blind = await limiter.check({ tenant: 'b' }, { cost: 3 });
    const afterBlind = await tokensIn(direct, keyB);
    report(
      `reply lost, closed policy, no request id: answered ${lostB.status} yet charged ` +
        `${Math.round((slow.burst - (afterReconnect ?? slow.burst)) / 3)} time(s) after the reconnect (nothing resent; ` +
        `under-use: 3 units for 0 admitted); a blind caller retry ${blind.status} → charged ` +
        `${Math.round((slow.burst - (afterBlind ?? slow.burst)) / 3)} times for one admitted request (permitted 1)`,
    );
    expect(afterReconnect).toBe(7);
    expect(blind.status).toBe('OK');
    expect(afterBlind).toBeCloseTo(4, 2); // 4 plus a refill of 1 unit/h

    // An open policy: the lost reply becomes an admission, and Redis charged it once.
    const keyO = rawKey(limiter, store, 'o', { open: 'a' });
    await untilStore(() => limiter.check({ tenant: 'warm' }, { cost: 0 }), 'a reconnect');
    proxy.dropNextReply({ thenReset: true });
    const lostO = await limiter.check({ open: 'a' }, { cost: 3 });
    const chargedO = slow.burst - ((await tokensIn(direct, keyO)) ?? slow.burst);
    report(
      `reply lost, open policy: ${lostO.status}/${first(lostO).path}, Redis charged ${Math.round(chargedO / 3)} time(s) ` +
        `(the admission was accounted: 1 admitted, 1 charged)`,
    );
    expect(lostO).toMatchObject({ allowed: true, status: 'OK' });
    expect(first(lostO).path).toBe('fail-open');
    expect(chargedO).toBeCloseTo(3, 2);
  });
});

describe('3. Redis killed under traffic', () => {
  it('decides by failure mode within the deadline, stays bounded, and resumes after restart with the same store', async () => {
    const MAX_IN_FLIGHT = 16;
    const DEADLINE = 50;
    const STALE_TTL = 300;
    const server = await startServer();
    const { store, readyCount } = connectStore(server, { maxInFlight: MAX_IN_FLIGHT });
    const limiter = createLimiter({
      store,
      policies: [
        { name: 'closed', match: ['closed'], ...roomy, failureMode: 'closed', timeout: DEADLINE },
        { name: 'open', match: ['open'], ...roomy, failureMode: 'open', timeout: DEADLINE },
        {
          name: 'stale',
          match: ['stale'],
          ...roomy,
          failureMode: 'stale',
          stale: { ttl: STALE_TTL, fallback: 'closed' },
          timeout: DEADLINE,
        },
        {
          name: 'shadow',
          match: ['shadow'],
          ...roomy,
          failureMode: 'closed',
          shadow: true,
          timeout: DEADLINE,
        },
      ],
    });
    let unhandled = 0;
    const onUnhandled = (): void => {
      unhandled += 1;
    };
    process.on('unhandledRejection', onUnhandled);
    cleanups.push(() => process.off('unhandledRejection', onUnhandled));
    await untilStore(() => limiter.check({ closed: 'x' }, { cost: 0 }), 'the store to answer');

    const MODES = ['closed', 'open', 'stale', 'shadow'] as const;
    type Mode = (typeof MODES)[number];
    interface Rec {
      start: number;
      end: number;
      mode: Mode;
      r: CheckResult;
    }
    const recs: Rec[] = [];
    let stop = false;
    let maxInFlight = 0;
    let late = 0;
    const worker = async (w: number): Promise<void> => {
      for (let i = w; !stop; i++) {
        const mode = MODES[i % MODES.length]!;
        const start = performance.now();
        const pending = limiter.check({ [mode]: 'x' });
        maxInFlight = Math.max(maxInFlight, store.inFlight);
        const { r, ok } = await beforeTimer(pending, 2 * DEADLINE);
        if (!ok) late += 1;
        recs.push({ start, end: performance.now(), mode, r });
        await sleep(4);
      }
    };
    const workers = Array.from({ length: 8 }, (_, w) => worker(w));

    await sleep(300);
    await server.kill();
    const killedAt = performance.now();
    await sleep(600);
    const restartAt = performance.now();
    await server.restart();
    const restartedAt = performance.now();
    // Shadow decisions are on the 'shadow' path either way: recovery is seen on the others.
    const recovered = (x: Rec): boolean =>
      x.start >= restartedAt && x.mode !== 'shadow' && decidedByStore(x.r);
    const back = await waitFor(
      () =>
        new Set(recs.filter(recovered).map((x) => x.mode)).size === 3
          ? Math.min(...recs.filter(recovered).map((x) => x.end))
          : undefined,
      {
        what: 'store decisions for every enforced policy after the restart',
        timeoutMs: 5_000,
        intervalMs: 10,
      },
    );
    await sleep(100);
    stop = true;
    await Promise.all(workers);

    const down = recs.filter((x) => x.start >= killedAt && x.end <= restartAt);
    const of = (mode: Mode): Rec[] => down.filter((x) => x.mode === mode);
    const count = (xs: Rec[], p: (x: Rec) => boolean): string =>
      `${xs.filter(p).length}/${xs.length}`;
    const lastStaleAnswer = Math.max(
      ...recs
        .filter((x) => x.mode === 'stale' && x.start < killedAt && decidedByStore(x.r))
        .map((x) => x.start),
    );
    const maxLatency = Math.max(...recs.map((x) => x.end - x.start));
    const outageMs = restartAt - killedAt;
    report(
      `Redis killed under traffic: ${recs.length} checks, ${down.length} during the ${ms(outageMs)} outage: ` +
        `closed → ${count(of('closed'), (x) => x.r.status === 'UNAVAILABLE')} UNAVAILABLE (under-use: all denied); ` +
        `open → ${count(of('open'), (x) => x.r.allowed)} admitted without accounting (overshoot not bounded by the policy); ` +
        `stale (ttl ${STALE_TTL}ms, fallback closed) → ${count(of('stale'), (x) => first(x.r).path === 'stale')} from the local budget, ` +
        `${count(of('stale'), (x) => first(x.r).path === 'fail-closed')} fallback UNAVAILABLE; ` +
        `shadow → ${count(of('shadow'), (x) => x.r.allowed && first(x.r).path === 'shadow')} allowed on the shadow path; ` +
        `max latency ${ms(maxLatency)} (deadline ${DEADLINE}ms), ${late} after a timer of twice the deadline started with them; ` +
        `max inFlight ${maxInFlight} (cap ${MAX_IN_FLIGHT}); ` +
        `unhandled rejections ${unhandled}; store path back ${ms(back - restartedAt)} after restart() resolved ` +
        `(${ms(back - restartAt)} after it was called), same limiter and store, connection ready ${readyCount()} times`,
    );

    expect(recs.length).toBeGreaterThan(200);
    for (const mode of MODES) expect(of(mode).length).toBeGreaterThan(0);
    for (const x of of('closed')) {
      expect(x.r).toMatchObject({ allowed: false, status: 'UNAVAILABLE' });
      expect(first(x.r).path).toBe('fail-closed');
    }
    for (const x of of('open')) {
      expect(x.r).toMatchObject({ allowed: true, status: 'OK' });
      expect(first(x.r).path).toBe('fail-open');
    }
    expect(
      of('stale').filter((x) => x.start - lastStaleAnswer > STALE_TTL + 5).length,
    ).toBeGreaterThan(0);
    for (const x of of('stale')) {
      // From the local budget within the TTL of the last answer, the fallback after it.
      if (x.start - lastStaleAnswer > STALE_TTL + 5) {
        expect(x.r).toMatchObject({ allowed: false, status: 'UNAVAILABLE' });
        expect(first(x.r).path).toBe('fail-closed');
      } else if (first(x.r).path === 'stale') {
        expect(x.r.allowed).toBe(true);
      } else {
        expect(first(x.r).path).toBe('fail-closed');
      }
    }
    for (const x of of('shadow')) {
      expect(x.r).toMatchObject({ allowed: true, status: 'OK' });
      expect(first(x.r).path).toBe('shadow');
    }
    expect(recs.filter((x) => x.r.status === 'OVER_LIMIT')).toHaveLength(0);
    // Every check answered by its deadline: none waited for the reconnect or the restart.
    expect(late).toBe(0);
    expect(maxInFlight).toBeLessThanOrEqual(MAX_IN_FLIGHT);
    expect(unhandled).toBe(0);
    expect(readyCount()).toBeGreaterThanOrEqual(2); // the same connection object reconnected
    // Back on the store path within a reconnect interval (25 ms) and a ready check of the
    // restarted server, with room for a loaded machine; not after a backoff or a watchdog.
    expect(back - restartedAt).toBeLessThan(1_000);
  });
});

describe('4. stuck connection (both directions blackholed)', () => {
  /**
   * Blackholes both directions for `holdMs` under traffic, heals, and measures how long
   * until the same store decides again (undefined: not within `recoverWithinMs`).
   */
  async function stuck(holdMs: number, recoverWithinMs: number) {
    const MAX_IN_FLIGHT = 50;
    const STUCK_AFTER_MS = 300;
    const server = await startServer();
    const proxy = await startProxy(server);
    const { store, connection } = connectStore(proxy, {
      maxInFlight: MAX_IN_FLIGHT,
      stuckAfterMs: STUCK_AFTER_MS,
    });
    const limiter = createLimiter({
      store,
      policies: [{ name: 'p', match: ['t'], ...roomy, failureMode: 'closed', timeout: '50ms' }],
    });
    await untilStore(() => limiter.check({ t: 'x' }, { cost: 0 }), 'the store to answer');
    proxy.blackhole('both');
    const t0 = performance.now();
    let maxInFlight = 0;
    let checks = 0;
    const paths = new Map<string, number>();
    await Promise.all(
      Array.from({ length: 10 }, async () => {
        while (performance.now() - t0 < holdMs) {
          const pending = limiter.check({ t: 'x' });
          maxInFlight = Math.max(maxInFlight, store.inFlight);
          const r = await pending;
          checks += 1;
          const key = `${r.status}/${first(r).path}`;
          paths.set(key, (paths.get(key) ?? 0) + 1);
          await sleep(5);
        }
      }),
    );
    const statusAtHeal = connection().status;
    const connectionsBeforeHeal = proxy.stats().accepted;
    const heldMs = performance.now() - t0;
    proxy.heal();
    const recoveredMs = await storeBackWithin(
      () => limiter.check({ t: 'x' }, { cost: 0 }),
      recoverWithinMs,
    );
    return {
      maxInFlight,
      MAX_IN_FLIGHT,
      STUCK_AFTER_MS,
      heldMs,
      checks,
      paths,
      statusAtHeal,
      connectionsBeforeHeal,
      connections: proxy.stats().accepted,
      recoveredMs,
    };
  }

  /**
   * What the watchdog guarantees. A connection lives at least `stuckAfterMs` from its
   * first unanswered command, or from its TCP connect when its ready check is lost, so the
   * partition opened at most one connection per `stuckAfterMs` after the first; and it
   * opened at least one (the watchdog fired). After heal the store is back within one
   * cycle (the connection then open is given up after `stuckAfterMs` at most, and the next
   * works), plus the reconnect interval, with room for a loaded machine.
   */
  function expectWatchdog(r: Awaited<ReturnType<typeof stuck>>): void {
    expect(r.maxInFlight).toBeLessThanOrEqual(r.MAX_IN_FLIGHT);
    expect([...r.paths.keys()]).toEqual(['UNAVAILABLE/fail-closed']);
    expect(r.connectionsBeforeHeal).toBeGreaterThanOrEqual(2);
    expect(r.connectionsBeforeHeal).toBeLessThanOrEqual(
      1 + Math.floor(r.heldMs / r.STUCK_AFTER_MS),
    );
    expect(r.recoveredMs).toBeDefined();
    expect(r.recoveredMs!).toBeLessThan(r.STUCK_AFTER_MS + RECONNECT_MS + 700);
  }

  const describeRun = (holdMs: number, r: Awaited<ReturnType<typeof stuck>>): string =>
    `stuck connection for ${holdMs}ms (stuckAfterMs ${r.STUCK_AFTER_MS}, maxInFlight ${r.MAX_IN_FLIGHT}): ${r.checks} checks → ` +
    [...r.paths].map(([k, n]) => `${n} ${k}`).join(', ') +
    `; max inFlight ${r.maxInFlight}; connection status at heal "${r.statusAtHeal}", ` +
    `${r.connectionsBeforeHeal} TCP connection(s) opened by then (${ms(r.heldMs)} in; at most ` +
    `${1 + Math.floor(r.heldMs / r.STUCK_AFTER_MS)}: one per stuckAfterMs after the first), ${r.connections} in all; ` +
    (r.recoveredMs === undefined
      ? 'store path NOT back within 5000ms after heal'
      : `store path back ${ms(r.recoveredMs)} after heal, same store`);

  it('a partition shorter than the watchdog cycle: bounded in-flight, the watchdog reconnects, the store works after heal', async () => {
    const r = await stuck(1_000, 5_000);
    report(describeRun(1_000, r));
    expectWatchdog(r);
  });

  it('a partition that lasts (3s): in-flight stays bounded and the store works again after heal', async () => {
    // Long enough for the watchdog's reconnect (stuckAfterMs + ioredis' 2s disconnect
    // timeout for the FIN that the partition swallows) to happen inside the partition.
    const r = await stuck(3_000, 5_000);
    report(describeRun(3_000, r));
    expectWatchdog(r);
  });
});

describe('5. stale mode on Redis', () => {
  it('spends at most the last known remaining plus the refill over the TTL, then falls back', async () => {
    const TTL = 1_000;
    const server = await startServer();
    const { store } = connectStore(server);
    const limiter = createLimiter({
      store,
      policies: [
        {
          name: 'stale',
          match: ['tenant'],
          rate: 10,
          burst: 20,
          failureMode: 'stale',
          stale: { ttl: TTL, fallback: 'closed' },
          timeout: '1s',
        },
      ],
    });
    await untilStore(() => limiter.check({ tenant: 'warm' }, { cost: 0 }), 'the store to answer');
    const spend = await limiter.check({ tenant: 'a' }, { cost: 15 });
    const reportedBy = systemClock.nowMs(); // the store's answer is no later than this
    expect(first(spend).path).toBe('store');
    expect(first(spend).remaining).toBe(5);
    await server.kill();

    const runs: Promise<{ at: number; r: CheckResult }>[] = [];
    const t0 = performance.now();
    while (performance.now() - t0 < 1_500) {
      const at = systemClock.nowMs();
      runs.push(limiter.check({ tenant: 'a' }, { timeoutMs: 20 }).then((r) => ({ at, r })));
      await sleep(10);
    }
    const results = await Promise.all(runs);
    const admitted = results.filter((x) => x.r.allowed);
    const afterTtl = results.filter((x) => x.at - reportedBy > TTL + 5);
    const permitted = 5 + (10 * TTL) / 1_000;
    report(
      `stale mode, Redis killed (rate 10/s, burst 20, last known remaining 5, ttl 1s): ` +
        `admitted ${admitted.length} of ${results.length} attempts over 1.5s (permitted ${permitted} = 5 + 10 refilled over the TTL), ` +
        `all on path ${[...new Set(admitted.map((x) => first(x.r).path))].join('/')}; ` +
        `after the TTL ${afterTtl.filter((x) => x.r.status === 'UNAVAILABLE').length}/${afterTtl.length} UNAVAILABLE (fallback closed)`,
    );
    expect(admitted.length).toBeLessThanOrEqual(permitted);
    expect(admitted.length).toBeGreaterThanOrEqual(5);
    for (const x of admitted) expect(first(x.r).path).toBe('stale');
    expect(afterTtl.length).toBeGreaterThan(10);
    for (const x of afterTtl) {
      expect(x.r).toMatchObject({ allowed: false, status: 'UNAVAILABLE' });
      expect(first(x.r).path).toBe('fail-closed');
    }
    // Within the TTL, a denial is the local budget's OVER_LIMIT, still on the stale path.
    for (const x of results.filter((y) => !y.r.allowed && y.r.status === 'OVER_LIMIT')) {
      expect(first(x.r).path).toBe('stale');
    }
  });
});

describe('6. clocks of two owners', () => {
  const policies: PolicyInput[] = [
    { name: 'p', match: ['tenant'], rate: 10, burst: 20, failureMode: 'closed', timeout: '1s' },
  ];
  const ahead: Clock = { nowMs: () => systemClock.nowMs() + 10_000 };

  it('client clock: the owner 10s behind creates no capacity and its retry-after includes the lag; the owner ahead does', async () => {
    const server = await startServer();
    const a = connectStore(server, { clock: 'client' }).store;
    const b = connectStore(server, { clock: 'client' }).store;
    const limiterA = createLimiter({ store: a, policies, clock: ahead });
    const limiterB = createLimiter({ store: b, policies, clock: systemClock });

    // A (10s ahead) empties the bucket; B (10s behind A) checks at once.
    const takenA = await limiterA.check({ tenant: 'x' }, { cost: 20 });
    const deniedB = await limiterB.check({ tenant: 'x' });
    let admittedB = 0;
    const t0 = performance.now();
    while (performance.now() - t0 < 300) {
      if ((await limiterB.check({ tenant: 'x' })).allowed) admittedB += 1;
      await sleep(20);
    }
    const elapsed = performance.now() - t0;

    // The other way round: B (behind) empties, A (10s ahead) refills 10s early.
    const t1 = performance.now(); // no later than the instant B's check decides at
    const takenB = await limiterB.check({ tenant: 'y' }, { cost: 20 });
    let admittedA = 0;
    for (let i = 0; i < 40; i++)
      if ((await limiterA.check({ tenant: 'y' })).allowed) admittedA += 1;
    // Refill since B emptied the bucket, in real time: at most this (rate 10/s).
    const refilled = Math.floor(((performance.now() - t1) * 10) / 1_000);

    report(
      `client clock, A 10s ahead of B: after A took the burst, B denied (${deniedB.status}) with retry-after ` +
        `${ms(deniedB.retryAfterMs)} (lag 10000ms + 100ms for one unit); B admitted ${admittedB} in the next ` +
        `${ms(elapsed)} (permitted ${Math.floor((elapsed * 10) / 1000)} by real time: under-use); reverse: after B took the burst, ` +
        `A admitted ${admittedA} in 40 tries (permitted ${refilled} by real time: overshoot ${admittedA - refilled}, capped by the burst)`,
    );
    expect(takenA.allowed).toBe(true);
    expect(deniedB).toMatchObject({ allowed: false, status: 'OVER_LIMIT' });
    expect(first(deniedB).path).toBe('store');
    expect(deniedB.retryAfterMs).toBeGreaterThan(9_000);
    expect(deniedB.retryAfterMs).toBeLessThanOrEqual(10_100 + 1);
    expect(admittedB).toBe(0);
    expect(takenB.allowed).toBe(true);
    expect(admittedA).toBeGreaterThanOrEqual(20); // the skew handed A a full burst
    expect(admittedA).toBeLessThanOrEqual(20 + refilled);
  });

  it('server clock: one clock, so both owners see the same state whatever their own clocks say', async () => {
    const server = await startServer();
    const a = connectStore(server).store; // clock: 'server' (the default)
    const b = connectStore(server).store;
    const limiterA = createLimiter({ store: a, policies, clock: ahead });
    const limiterB = createLimiter({ store: b, policies, clock: systemClock });

    await limiterA.check({ tenant: 'x' }, { cost: 20 });
    const deniedB = await limiterB.check({ tenant: 'x' });
    const [peekA, peekB] = [
      await limiterA.check({ tenant: 'x' }, { cost: 0 }),
      await limiterB.check({ tenant: 'x' }, { cost: 0 }),
    ];
    const t0 = performance.now(); // no later than the server's instant for B's check
    await limiterB.check({ tenant: 'y' }, { cost: 20 });
    let admittedA = 0;
    for (let i = 0; i < 40; i++)
      if ((await limiterA.check({ tenant: 'y' })).allowed) admittedA += 1;
    // Refill since B emptied the bucket, by the server's clock: at most this (rate 10/s).
    const refilled = ((performance.now() - t0) * 10) / 1_000;
    report(
      `server clock, limiter clocks 10s apart: after A took the burst, B denied with retry-after ` +
        `${ms(deniedB.retryAfterMs)} (one unit: 100ms); remaining seen by A ${first(peekA).remaining.toFixed(3)}, ` +
        `by B ${first(peekB).remaining.toFixed(3)}; reverse: A admitted ${admittedA} in 40 tries (permitted ${refilled.toFixed(1)}: the refill meanwhile)`,
    );
    expect(deniedB).toMatchObject({ allowed: false, status: 'OVER_LIMIT' });
    expect(deniedB.retryAfterMs).toBeGreaterThan(0);
    expect(deniedB.retryAfterMs).toBeLessThanOrEqual(100);
    // Both read the same state; only the refill between the two reads differs.
    expect(Math.abs(first(peekA).remaining - first(peekB).remaining)).toBeLessThan(1);
    expect(admittedA).toBeLessThanOrEqual(Math.floor(refilled));
  });
});

describe('7. failover to a promoted replica', () => {
  it('resumes on the store path without restarting the limiter; reports the window and the overshoot', async () => {
    const BURST = 100;
    const WORKERS = 4;
    const primary = await startServer();
    const replica = await startServer({ replicaOf: primary });
    // startServer({ replicaOf }) returns once the primary streams writes to the replica.
    const proxy = await startProxy(primary);
    const { store } = connectStore(proxy);
    const limiter = createLimiter({
      store,
      policies: [
        {
          name: 'p',
          match: ['tenant'],
          rate: 1,
          period: '1h',
          burst: BURST,
          failureMode: 'closed',
          timeout: '100ms',
        },
      ],
    });
    await untilStore(() => limiter.check({ tenant: 'warm' }, { cost: 0 }), 'the store to answer');

    interface Rec {
      start: number;
      end: number;
      r: CheckResult;
    }
    const recs: Rec[] = [];
    let stop = false;
    const workers = Array.from({ length: WORKERS }, async () => {
      while (!stop) {
        const start = performance.now();
        const r = await limiter.check({ tenant: 'a' });
        recs.push({ start, end: performance.now(), r });
        await sleep(3);
      }
    });
    const admittedByStore = (): number =>
      recs.filter((x) => x.r.allowed && decidedByStore(x.r)).length;
    await waitFor(() => (admittedByStore() >= 50 ? true : undefined), {
      what: '50 admissions before the failover',
      timeoutMs: 10_000,
      intervalMs: 5,
    });
    await primary.kill();
    const killedAt = performance.now();
    const admittedBeforeKill = recs.filter((x) => x.end <= killedAt && x.r.allowed).length;
    const promote = replica.client();
    await promote.replicaof('NO', 'ONE');
    const replicaTokens = await tokensIn(promote, rawKey(limiter, store, 'p', { tenant: 'a' }));
    proxy.setTarget(replica, { resetExisting: true });
    const promotedAt = performance.now();
    const backAt = await waitFor(
      () => recs.find((x) => x.start >= promotedAt && decidedByStore(x.r))?.end,
      { what: 'a store decision after the promotion', timeoutMs: 5_000, intervalMs: 5 },
    );
    // Drain the bucket on the new primary.
    await waitFor(
      () =>
        recs.filter(
          (x) => x.start >= promotedAt && decidedByStore(x.r) && x.r.status === 'OVER_LIMIT',
        ).length >= 20
          ? true
          : undefined,
      { what: 'the bucket to run dry after the promotion', timeoutMs: 10_000, intervalMs: 5 },
    );
    stop = true;
    await Promise.all(workers);

    const admitted = admittedByStore();
    const overshoot = admitted - BURST;
    const unavailable = recs.filter((x) => x.r.status === 'UNAVAILABLE').length;
    const consumedOnReplica = replicaTokens === undefined ? 0 : Math.round(BURST - replicaTokens);
    const lostWrites = Math.max(0, admittedBeforeKill - consumedOnReplica);
    report(
      `failover (kill primary, REPLICAOF NO ONE, proxy retargeted): unavailable for ${ms(backAt - killedAt)} ` +
        `from the kill (${ms(backAt - promotedAt)} after retargeting), ${unavailable} UNAVAILABLE/fail-closed decisions; ` +
        `admitted ${admitted} with burst ${BURST}: overshoot ${Math.max(0, overshoot)}, under-use ${Math.max(0, -overshoot)}; ` +
        `the promoted replica had ${consumedOnReplica} units consumed for ${admittedBeforeKill} admissions answered ` +
        `before the kill (${lostWrites} acknowledged writes lost to async replication, ` +
        `${Math.max(0, consumedOnReplica - admittedBeforeKill)} applied whose replies were lost)`,
    );
    // Back within the reconnect interval (25 ms) and a ready check of the promoted replica,
    // with room for a loaded machine; not after a backoff or the stuck watchdog (2 s).
    expect(backAt - promotedAt).toBeLessThan(1_000);
    expect(recs.filter((x) => x.start >= backAt && decidedByStore(x.r)).length).toBeGreaterThan(0);
    // Meanwhile, the failure mode decided: UNAVAILABLE, never a false OK or OVER_LIMIT.
    for (const x of recs.filter((y) => !decidedByStore(y.r))) {
      expect(x.r).toMatchObject({ allowed: false, status: 'UNAVAILABLE' });
      expect(first(x.r).path).toBe('fail-closed');
    }
    // The replica is in steady state, on loopback: it gets each write in the same
    // event-loop turn of the primary as the reply, so a SIGKILL loses at most the writes
    // of the last turn, one per worker; the replica holds every other answered write.
    expect(overshoot).toBeLessThanOrEqual(WORKERS);
    expect(consumedOnReplica).toBeGreaterThanOrEqual(admittedBeforeKill - WORKERS);
    // Under-use: a write applied whose caller was not admitted got the failure mode's
    // answer, so there are at most as many as UNAVAILABLE answers.
    expect(-overshoot).toBeLessThanOrEqual(unavailable);
  });
});

describe('8. policy reload under traffic', () => {
  const pair = (a: number, b: number) =>
    parsePolicies([
      { name: 'a', match: ['tenant'], rate: 1_000, burst: a, failureMode: 'closed', timeout: '5s' },
      { name: 'b', match: ['tenant'], rate: 1_000, burst: b, failureMode: 'closed', timeout: '5s' },
    ]);
  const oldSet = pair(10, 20);
  const newSet = pair(30, 40);

  async function reloadUnderTraffic(name: string, store: Store): Promise<void> {
    const limiter = createLimiter({ store, policies: oldSet });
    const TOTAL = 2_000;
    let started = 0;
    let toggles = 0;
    let failed = 0;
    const limits = new Map<string, number>();
    const flip = setInterval(() => {
      toggles += 1;
      limiter.setPolicies(toggles % 2 === 1 ? newSet : oldSet);
    }, 2);
    try {
      await Promise.all(
        Array.from({ length: 64 }, async () => {
          while (started < TOTAL) {
            const i = started++;
            try {
              const r = await limiter.check({ tenant: `t${i % 40}` });
              if (!decidedByStore(r)) failed += 1;
              const key = r.decisions.map((d) => `${d.policy}:${d.limit}`).join(',');
              limits.set(key, (limits.get(key) ?? 0) + 1);
            } catch {
              failed += 1;
            }
            await sleep(0); // yield to the timers, so reloads land between checks
          }
        }),
      );
    } finally {
      clearInterval(flip);
    }
    report(
      `policy reload under traffic (${name}): ${TOTAL} checks, ${toggles} reloads, ${failed} failed decisions; ` +
        `limit pairs seen: ${[...limits].map(([k, n]) => `(${k}) ×${n}`).join(', ')} (permitted: (10,20) or (30,40), never a mix)`,
    );
    expect(failed).toBe(0);
    expect([...limits.keys()].sort()).toEqual(['a:10,b:20', 'a:30,b:40']);
    expect(toggles).toBeGreaterThanOrEqual(3);
  }

  it('memory store: every check uses one whole policy set', async () => {
    await reloadUnderTraffic('memory store', new MemoryStore());
  });

  it('Redis store: every check uses one whole policy set', async () => {
    const server = await startServer();
    await reloadUnderTraffic('Redis store', connectStore(server).store);
  });
});
