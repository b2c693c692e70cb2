/**
 * The scenario matrix and the contenders ("sides") of each scenario: Sluice through its
 * public API (createLimiter + MemoryStore / RedisStore.connect), a baseline build of
 * Sluice ("before", with `--before <dir>`), the peer (rate-limiter-flexible's
 * RateLimiterMemory / RateLimiterRedis) and, for the memory store, a bare Map token
 * bucket as the in-process ceiling. Every side of a scenario draws keys from the same
 * seeded ring.
 */
import type { Redis } from 'ioredis';
import {
  RateLimiterMemory,
  RateLimiterRedis,
  type RateLimiterAbstract,
} from 'rate-limiter-flexible';
import type { CheckResult, MemoryStore, PolicyInput } from '../../src/index.js';
import type { RedisStore } from '../../src/redis.js';
import type { DriveOptions, Operation } from './driver.js';
import type { SluiceModules } from './sluice.js';
import { RING_MASK, type Distribution } from './rng.js';

export type StoreKind = 'memory' | 'redis';
export type Mode = 'allow' | 'deny';
export type AlgorithmName = 'tb' | 'gcra' | 'fw' | 'swc';
/** `-sync`: the same build through `checkSync`, in a plain loop. */
export type SideName = 'sluice' | 'sluice-sync' | 'before' | 'before-sync' | 'peer' | 'bare';

export interface Scenario {
  readonly id: string;
  readonly store: StoreKind;
  readonly concurrency: number;
  readonly dist: Distribution;
  readonly mode: Mode;
  readonly algorithm: AlgorithmName;
  /** Two policies on one identity: tenant, and tenant + route. */
  readonly multi: boolean;
  /**
   * Memory store only: Sluice through `checkSync` and the bare bucket called directly, in a
   * plain loop (the peer has no synchronous API and is awaited as always).
   */
  readonly sync?: boolean;
  /**
   * Memory store, async scenario: Sluice (and the baseline) also run through `checkSync`
   * in a plain loop, as sides of their own, against the same awaited peer.
   */
  readonly syncSides?: boolean;
}

/** Keys in the uniform and Zipf distributions. */
export const KEYS = 100_000;
/** The seed of every key ring: same sequence on every run and for every side. */
export const SEED = 20_261_130;
/** Memory scenarios time one decision in this many (see bench/lib/driver.ts). */
const MEMORY_SAMPLE_EVERY = 8;
export const ROUTES = [
  'GET /a',
  'GET /b',
  'POST /c',
  'GET /d',
  'PUT /e',
  'GET /f',
  'POST /g',
  'GET /h',
];

export const ALGORITHM_KIND = {
  tb: 'token-bucket',
  gcra: 'gcra',
  fw: 'fixed-window',
  swc: 'sliding-window-counter',
} as const;

/** The matrix: token bucket over every store × concurrency × distribution × mode, then sweeps. */
export function allScenarios(): Scenario[] {
  const out: Scenario[] = [];
  const add = (s: Omit<Scenario, 'id'>): void => {
    const alg = s.multi ? `${s.algorithm}+route` : s.algorithm;
    const id = `${s.store}/c${s.concurrency}/${s.dist}/${alg}/${s.mode}${s.sync ? '/sync' : ''}`;
    out.push({ ...s, id });
  };
  for (const store of ['memory', 'redis'] as const) {
    for (const concurrency of [1, 64, 256]) {
      for (const dist of ['hot', 'uniform', 'zipf'] as const) {
        for (const mode of ['allow', 'deny'] as const) {
          const syncSides = store === 'memory' && concurrency === 64 && dist === 'zipf';
          add({
            store,
            concurrency,
            dist,
            mode,
            algorithm: 'tb',
            multi: false,
            ...(syncSides && mode === 'allow' ? { syncSides } : {}),
          });
        }
      }
    }
    for (const algorithm of ['gcra', 'fw', 'swc'] as const) {
      add({ store, concurrency: 64, dist: 'zipf', mode: 'allow', algorithm, multi: false });
    }
    add({ store, concurrency: 64, dist: 'zipf', mode: 'deny', algorithm: 'gcra', multi: false });
    add({ store, concurrency: 64, dist: 'zipf', mode: 'allow', algorithm: 'tb', multi: true });
    if (store === 'memory') {
      for (const dist of ['hot', 'uniform', 'zipf'] as const) {
        add({
          store,
          concurrency: 1,
          dist,
          mode: 'allow',
          algorithm: 'tb',
          multi: false,
          sync: true,
        });
      }
      add({
        store,
        concurrency: 1,
        dist: 'zipf',
        mode: 'deny',
        algorithm: 'tb',
        multi: false,
        sync: true,
      });
    }
  }
  return out;
}

/**
 * Algorithm params: allow-heavy is so generous nothing is ever denied; deny-heavy admits
 * one unit per key per minute, so nearly every decision after a key's first is denied.
 */
export function policyParams(algorithm: AlgorithmName, mode: Mode): Record<string, unknown> {
  const big = 1_000_000_000;
  if (algorithm === 'tb' || algorithm === 'gcra') {
    return mode === 'allow' ? { rate: big, burst: big } : { rate: 1, period: '1m', burst: 1 };
  }
  return mode === 'allow' ? { limit: big, window: '1s' } : { limit: 1, window: '1m' };
}

export function sluicePolicies(s: Scenario): PolicyInput[] {
  const algorithm = ALGORITHM_KIND[s.algorithm];
  const params = policyParams(s.algorithm, s.mode);
  // Every decision must come from the store: a generous deadline and fail-closed, so a
  // slow store shows as denials (the allowed % column), never as admissions it never made.
  const common = { algorithm, ...params, timeout: '5s', failureMode: 'closed' } as const;
  const policies: PolicyInput[] = [{ name: 'tenant', match: ['tenant'], ...common }];
  if (s.multi) {
    policies.push({ name: 'route', match: ['tenant', 'route'], ...common });
  }
  return policies;
}

/**
 * The rows issue 16 asks for, in both modes (`--headline`; the pinned mode's default):
 * Redis c=1 Zipf, c=64 Zipf, one hot key at c=64, and the memory store at c=64 Zipf
 * (async `check` and `checkSync`).
 */
export const HEADLINE = [
  'redis/c1/zipf/tb/allow',
  'redis/c64/zipf/tb/allow',
  'redis/c64/hot/tb/allow',
  'memory/c64/zipf/tb/allow',
] as const;

/** The sides of a scenario, in the order they run in a round. */
export function sideNames(s: Scenario, withBefore: boolean): SideName[] {
  const out: SideName[] = ['sluice'];
  if (s.syncSides === true) out.push('sluice-sync');
  if (withBefore) out.push('before');
  if (withBefore && s.syncSides === true) out.push('before-sync');
  out.push('peer');
  if (s.store === 'memory') out.push('bare');
  return out;
}

/** One contender, ready to drive. */
export interface Side {
  readonly name: SideName;
  readonly op: Operation<unknown>;
  readonly allowed: (value: unknown) => boolean;
  /** `op` returns its value directly (see DriveOptions.sync). */
  readonly sync?: boolean;
  /** Redis key pattern of its buckets (for MEMORY USAGE), when on Redis. */
  readonly keyPattern?: string;
  close(): Promise<void>;
}

const tenantName = (i: number): string => `tenant-${i}`;
/**
 * Prebuilt key strings, so no side pays for formatting its key input. Sluice gets a new
 * descriptor object per decision, as a server builds one per request from the request's
 * fields (never a reused or frozen one, which a cache keyed by object could recognise).
 */
const TENANTS = Array.from({ length: KEYS }, (_, i) => tenantName(i));

const isAllowedResult = (r: unknown): boolean => (r as CheckResult).allowed;
const isTrue = (r: unknown): boolean => r === true;

export interface SideContext {
  readonly ring: Uint32Array;
  /** Sluice's compiled modules (see sluice.ts). */
  readonly sluice: SluiceModules;
  /** The baseline's, with `--before`. */
  readonly before?: SluiceModules;
  /** For Redis sides: the benchmark's server. */
  readonly redisPort?: number;
}

/** A client of the benchmark's Redis (the peer's), once ready. */
async function redisClient(ctx: SideContext): Promise<Redis> {
  const { Redis } = await import('ioredis');
  const client = new Redis({ host: '127.0.0.1', port: ctx.redisPort!, lazyConnect: true });
  await client.connect();
  return client;
}

/** The side `name` of scenario `s`. */
export function makeSide(name: SideName, s: Scenario, ctx: SideContext): Promise<Side> {
  switch (name) {
    case 'sluice':
    case 'sluice-sync':
      return makeSluice(s, ctx, name, ctx.sluice);
    case 'before':
    case 'before-sync':
      if (ctx.before === undefined) throw new Error(`side ${name} needs --before <dir>`);
      return makeSluice(s, ctx, name, ctx.before);
    case 'peer':
      return makePeer(s, ctx);
    case 'bare':
      return Promise.resolve(makeBare(s, ctx));
  }
}

/** How `side` of `s` is driven for `durationMs`. */
export function driveOptions(s: Scenario, side: Side, durationMs: number): DriveOptions<unknown> {
  return {
    concurrency: s.concurrency,
    durationMs,
    allowed: side.allowed,
    sync: side.sync === true,
    // In process, per-decision clock reads would cost as much as a decision: time a sample.
    sampleEvery: s.store === 'memory' ? MEMORY_SAMPLE_EVERY : 1,
  };
}

/** Whether side `name` runs its decisions in a plain loop (see DriveOptions.sync). */
export function isSyncSide(name: SideName, s: Scenario): boolean {
  if (name.endsWith('-sync')) return true;
  return (name === 'sluice' || name === 'before' || name === 'bare') && s.sync === true;
}

async function makeSluice(
  s: Scenario,
  ctx: SideContext,
  name: SideName,
  modules: SluiceModules,
): Promise<Side> {
  const { ring } = ctx;
  let store: MemoryStore | RedisStore;
  if (s.store === 'memory') {
    store = new modules.main.MemoryStore();
  } else {
    // As a user starts it: a URL, a prefix, then ready.
    store = modules.redis.RedisStore.connect(`redis://127.0.0.1:${ctx.redisPort!}`, {
      prefix: name.startsWith('before') ? 'slbb' : 'slb',
    });
    await store.ready();
  }
  const limiter = modules.main.createLimiter({ store, policies: sluicePolicies(s) });
  let cursor = 0;
  const sync = isSyncSide(name, s);
  const op: Operation<unknown> = s.multi
    ? () => {
        const n = cursor++;
        const d = { tenant: TENANTS[ring[n & RING_MASK]!]!, route: ROUTES[n & 7]! };
        return sync ? limiter.checkSync(d) : limiter.check(d);
      }
    : sync
      ? () => limiter.checkSync({ tenant: TENANTS[ring[cursor++ & RING_MASK]!]! })
      : () => limiter.check({ tenant: TENANTS[ring[cursor++ & RING_MASK]!]! });
  return {
    name,
    op,
    allowed: isAllowedResult,
    sync,
    ...(s.store === 'redis' ? { keyPattern: name.startsWith('before') ? 'slbb:*' : 'slb:*' } : {}),
    close: () => store.close(),
  };
}

async function makePeer(s: Scenario, ctx: SideContext): Promise<Side> {
  const { ring } = ctx;
  const opts =
    s.mode === 'allow' ? { points: 1_000_000_000, duration: 1 } : { points: 1, duration: 60 };
  let client: Redis | undefined;
  const make = (keyPrefix: string): RateLimiterAbstract => {
    if (s.store === 'memory') return new RateLimiterMemory({ ...opts, keyPrefix });
    return new RateLimiterRedis({ ...opts, keyPrefix, storeClient: client });
  };
  if (s.store === 'redis') client = await redisClient(ctx);
  const tenantLimiter = make('rlf');
  const routeLimiter = make('rlfr');
  const yes = (): boolean => true;
  // rate-limiter-flexible rejects with a RateLimiterRes when over the limit, and with an
  // Error when the store fails: only the former is a decision.
  const no = (e: unknown): boolean => {
    if (e instanceof Error) throw e;
    return false;
  };
  let cursor = 0;
  const op: Operation<unknown> = s.multi
    ? () => {
        const n = cursor++;
        const tenant = TENANTS[ring[n & RING_MASK]!]!;
        // No all-or-nothing across limiters in the peer: both are consumed.
        return Promise.all([
          tenantLimiter.consume(tenant).then(yes, no),
          routeLimiter.consume(`${tenant}|${ROUTES[n & 7]!}`).then(yes, no),
        ]).then(([a, b]) => a && b);
      }
    : () => tenantLimiter.consume(TENANTS[ring[cursor++ & RING_MASK]!]!).then(yes, no);
  return {
    name: 'peer',
    op,
    allowed: isTrue,
    ...(s.store === 'redis' ? { keyPattern: 'rlf*' } : {}),
    close: async () => {
      client?.disconnect();
      if (s.store === 'memory') {
        await forgetAll(tenantLimiter, KEYS, (i) => TENANTS[i]!);
        if (s.multi) {
          await forgetAll(routeLimiter, KEYS * 8, (i) => `${TENANTS[i >> 3]!}|${ROUTES[i & 7]!}`);
        }
      }
    },
  };
}

/**
 * Deletes every key the scenario may have used from a RateLimiterMemory. Its records hold
 * a timer each until they expire (60 s in deny scenarios), so a dropped limiter stays in
 * the heap that long: without this, its leftovers loaded the garbage collector during
 * later scenarios, whichever side ran then (one full run measured Sluice's two-policy
 * rounds at 95 µs of CPU per decision).
 */
async function forgetAll(
  limiter: RateLimiterAbstract,
  total: number,
  key: (i: number) => string,
): Promise<void> {
  for (let i = 0; i < total; i += 10_000) {
    const chunk: Promise<boolean>[] = [];
    for (let j = i; j < Math.min(total, i + 10_000); j++) chunk.push(limiter.delete(key(j)));
    await Promise.all(chunk);
  }
}

/**
 * A bare JS Map token bucket (one object per key, Date.now(), no TTL, no bound, no
 * validation): what a decision costs with nothing but the arithmetic. The in-process
 * ceiling for the memory store; it always runs a token bucket.
 */
function makeBare(s: Scenario, ctx: SideContext): Side {
  const { ring } = ctx;
  const p = policyParams('tb', s.mode) as { rate: number; burst: number; period?: string };
  const rate = p.rate;
  const periodMs = p.period === '1m' ? 60_000 : 1_000;
  const burst = p.burst;
  const buckets = new Map<string, { tokens: number; ts: number }>();
  const take = (key: string, now: number): boolean => {
    let b = buckets.get(key);
    if (b === undefined) {
      b = { tokens: burst, ts: now };
      buckets.set(key, b);
    } else if (now > b.ts) {
      b.tokens = Math.min(burst, b.tokens + ((now - b.ts) * rate) / periodMs);
      b.ts = now;
    }
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return true;
    }
    return false;
  };
  let cursor = 0;
  const op: Operation<unknown> = s.multi
    ? () => {
        const n = cursor++;
        const tenant = TENANTS[ring[n & RING_MASK]!]!;
        const now = Date.now();
        return take(tenant, now) && take(`${tenant}|${ROUTES[n & 7]!}`, now);
      }
    : () => take(TENANTS[ring[cursor++ & RING_MASK]!]!, Date.now());
  return {
    name: 'bare',
    op,
    allowed: isTrue,
    sync: isSyncSide('bare', s),
    close: () => Promise.resolve(),
  };
}
