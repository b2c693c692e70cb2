import type { ConnectionOptions } from 'node:tls';
import type { Logger } from 'pino';
import type { ScriptStatsSource } from '../metrics/redis-metrics.js';
import { MemoryStore } from '../stores/memory/memory-store.js';
import { RedisStore, type RedisStoreOptions } from '../stores/redis/redis-store.js';
import type { Store } from '../stores/store.js';
import type { RedisTarget } from './redis-settings.js';
import { waitForRedis, type RedisWait } from './redis-wait.js';

/** What every store the service opens shares: the prefix, the observer, the TLS. */
export interface OpenStoreOptions {
  readonly prefix: string;
  readonly observer: NonNullable<RedisStoreOptions['observer']>;
  /** `REDIS_TIMEOUT`: the store's `stuckAfterMs`. */
  readonly stuckAfterMs?: number;
  /** TLS to every node (node:tls options, updated in place when the files change). */
  readonly tls?: ConnectionOptions;
}

/** A store the service opened, and what the status page and the metrics say of it. */
export interface OpenedStore {
  readonly store: Store;
  /** The same store when it is a Redis (its connection, its waits, its script stats). */
  readonly redis?: RedisStore;
  readonly kind: 'memory' | 'redis' | 'redis-cluster';
}

/**
 * Opens the store a target names, the main one and the per-second one alike: one Redis
 * server, a Redis Cluster or a primary found through Sentinel, each with the same
 * prefix, observer, `stuckAfterMs` and TLS; no target is the embedded memory store.
 */
export function openStore(target: RedisTarget | undefined, options: OpenStoreOptions): OpenedStore {
  if (target === undefined) return { store: new MemoryStore(), kind: 'memory' };
  const { tls, ...common } = options;
  const withTls = tls === undefined ? {} : { tls };
  const redis =
    target.type === 'single'
      ? RedisStore.connect(target.url, { ...common, ...withTls })
      : target.type === 'sentinel'
        ? RedisStore.connectSentinel({ ...target, ...withTls }, common)
        : RedisStore.connectCluster(target.nodes, {
            ...common,
            ...withTls,
            ...(target.username === undefined ? {} : { username: target.username }),
            ...(target.password === undefined ? {} : { password: target.password }),
          });
  return { store: redis, redis, kind: target.type === 'cluster' ? 'redis-cluster' : 'redis' };
}

/** The script stats of every Redis the service opened, for `RedisMetrics.watchScripts`. */
export function scriptStatsOf(stores: readonly RedisStore[]): ScriptStatsSource {
  return {
    scriptStats: async () => (await Promise.all(stores.map((s) => s.scriptStats()))).flat(),
  };
}

/** One store waited for at start, and the health part it holds down until it connects. */
export interface StoreToWaitFor {
  readonly redis: RedisStore;
  /** The `ServiceHealth` part: `store`, `perSecondStore`. */
  readonly part: string;
}

/** The waits {@link waitAtStart} left running, or the refusal that stops the start. */
export interface StartUpWait {
  readonly waits: readonly RedisWait[];
  /** A replica at start: a mistake in the settings, not an outage. */
  readonly refusal?: Error;
}

/**
 * Waits for every Redis at most `graceMs` (the ports open whether Redis is there or
 * not); each store still away then holds its health part down until it connects.
 */
export async function waitAtStart(
  stores: readonly StoreToWaitFor[],
  options: {
    readonly log: Logger;
    readonly graceMs: number;
    readonly setHealth: (part: string, ok: boolean) => void;
  },
): Promise<StartUpWait> {
  if (stores.length === 0) return { waits: [] };
  let refusedAtStart: ((error: Error) => void) | undefined;
  const refused = new Promise<Error>((resolve) => (refusedAtStart = resolve));
  const waits = stores.map(({ redis, part }) =>
    waitForRedis(redis, {
      log: options.log,
      onRefused: (error) => refusedAtStart?.(error),
      onReady: () => options.setHealth(part, true),
    }),
  );
  let timer: NodeJS.Timeout | undefined;
  const refusal = await Promise.race([
    Promise.all(waits.map((w) => w.ready)).then(() => undefined),
    refused,
    new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), options.graceMs);
    }),
  ]);
  clearTimeout(timer);
  refusedAtStart = undefined;
  if (refusal !== undefined) {
    for (const w of waits) w.stop();
    return { waits, refusal };
  }
  stores.forEach(({ part }, i) => {
    if (waits[i]!.waiting) options.setHealth(part, false);
  });
  return { waits };
}
