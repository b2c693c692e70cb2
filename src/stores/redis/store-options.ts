import type { ConnectionOptions } from 'node:tls';
import type { Cluster, Redis } from 'ioredis';
import type { RedisCallObserver } from './call-observer.js';
import type { CrossSlotStrategy } from './cross-slot.js';
import { validateReplicatedAck, type ReplicatedAckOptions } from './replicated-ack.js';

/** `host:port` of a Redis Cluster node, as in `--redis-cluster` and `REDIS_URL`. */
export interface ClusterNode {
  readonly host: string;
  readonly port: number;
}

/** A primary found through Redis Sentinel (see {@link RedisStore.connectSentinel}). */
export interface SentinelTarget {
  /** The master name the Sentinels monitor (`sentinel monitor <name> …`). */
  readonly name: string;
  /** Sentinels to ask, in order (`host:port`, usually port 26379). */
  readonly sentinels: readonly ClusterNode[];
  /** ACL user and password for the Sentinels (upstream's `REDIS_SENTINEL_AUTH`). */
  readonly sentinelUsername?: string;
  readonly sentinelPassword?: string;
  /** ACL user and password for the primary (upstream's `REDIS_AUTH`). */
  readonly username?: string;
  readonly password?: string;
  /** TLS to the primary and the Sentinels (node:tls options); absent: plain TCP. */
  readonly tls?: ConnectionOptions;
}

export interface RedisStoreOptions {
  /**
   * An ioredis client (standalone or Cluster) whose settings the store copies: it opens
   * its own connection with `client.duplicate(...)`, adding the settings that keep a
   * consume from ever being applied twice or late behind the caller's back (no resend of
   * unanswered commands after a reconnect, no offline queue, no per-request retries).
   * The given client is not used for commands and never closed by the store.
   */
  readonly client: Redis | Cluster;
  /**
   * Most store calls waiting for Redis at once. Past it, calls fail at once with
   * `UNAVAILABLE` instead of queueing, so a stalled Redis cannot grow memory without
   * bound. @default 10_000
   */
  readonly maxInFlight?: number;
  /**
   * A call unanswered for this long means the connection is stuck (e.g. a silent
   * network partition): the store drops and reopens it, failing what was pending.
   * @default 2_000
   */
  readonly stuckAfterMs?: number;
  /**
   * How often the store asks a standalone server (or Sentinel's primary) for its `ROLE`,
   * in ms. The store decides only once the server has said it is a primary and stops
   * while it is not (`SLUICE_ERR_STORE_REPLICA`); the periodic question catches a primary
   * demoted under it that accepts writes as a replica (`replica-read-only no`); a
   * read-only replica refuses the first write, which makes the store ask at once.
   * @default 1_000
   */
  readonly roleCheckMs?: number;
  /** Prefix of every key: `<prefix>:{<identity>}:<policy>[:<scope>]`. No `{` or `}`. @default "sl" */
  readonly prefix?: string;
  /**
   * Whose clock decides. `server` (default): Redis `TIME`, one clock for every instance.
   * `client`: the `nowMs` the limiter passes, for deterministic tests or special needs;
   * skew between hosts then creates or removes capacity (a host 1s ahead refills 1s early).
   * @default "server"
   */
  readonly clock?: 'server' | 'client';
  /**
   * Largest sliding-log `limit` accepted: its memory is one sorted-set entry per admitted
   * request in the window, and each decision reads them all. @default 1000
   */
  readonly maxSlidingLogLimit?: number;
  /**
   * How long a request id's first reply is kept (a small string key per request id, in
   * the slot of the batch's first key), in ms. @default 60_000
   */
  readonly dedupTtlMs?: number;
  /**
   * Redis Cluster only: what to do with a check whose buckets live in several hash slots
   * (see {@link CrossSlotStrategy} and docs/cluster.md). With `reject`, the limiter refuses
   * such policy sets when it is created. @default "sequential-refund"
   */
  readonly crossSlot?: CrossSlotStrategy;
  /**
   * After each consuming call, `WAIT replicas timeoutMs` on the primary that ran it, so
   * a failover loses fewer admitted consumes (less overshoot) at the cost of latency.
   * Fewer acknowledgements than asked leave the decision as it is (unless `strict`: then
   * the policy's failure mode decides); they are counted in
   * {@link RedisStore.replicatedAckStats}. @default undefined (off)
   */
  readonly replicatedAck?: ReplicatedAckOptions;
  /**
   * Size of the per-process top-k of the busiest identities (hashed), read with
   * {@link RedisStore.hotKeys}; `0` turns tracking off. @default 32
   */
  readonly hotKeys?: number;
  /**
   * Most checks coalesced into one script call: concurrent checks (those issued within
   * one turn of the event loop) go to Redis together, one command per Redis node (per hash
   * slot on a Cluster) for all of them. The bound keeps each script run short on Redis.
   * @default 64
   */
  readonly maxBatchesPerCall?: number;
  /**
   * Told about every call to Redis: its script, shard (`host:port`), time on the wire and
   * error (`RedisMetrics` in `sluice/metrics` exports them). @default none
   */
  readonly observer?: RedisCallObserver;
}

/** The options with their defaults, checked. */
export interface StoreSettings {
  readonly prefix: string;
  readonly maxInFlight: number;
  readonly stuckAfterMs: number;
  readonly roleCheckMs: number;
  readonly clientClock: boolean;
  readonly maxSlidingLogLimit: number;
  readonly dedupTtlMs: number;
  readonly crossSlot: CrossSlotStrategy;
  readonly replicatedAck: ReplicatedAckOptions | undefined;
  readonly hotKeys: number;
}

/**
 * Applies the defaults and refuses bad values with a RangeError naming the option; run
 * before any connection is opened. (`maxBatchesPerCall` is checked by ScriptCoalescer.)
 */
export function storeSettings(options: RedisStoreOptions): StoreSettings {
  const prefix = options.prefix ?? 'sl';
  if (prefix === '' || /[{}]/.test(prefix)) {
    throw new RangeError(
      `RedisStore: prefix must be non-empty and contain no "{" or "}", got ${JSON.stringify(prefix)}`,
    );
  }
  const max = options.maxSlidingLogLimit ?? 1000;
  if (!Number.isSafeInteger(max) || max < 1) {
    throw new RangeError(
      `RedisStore: maxSlidingLogLimit must be a positive integer, got ${String(max)}`,
    );
  }
  const stuckAfterMs = options.stuckAfterMs ?? 2_000;
  const roleCheckMs = options.roleCheckMs ?? 1_000;
  if (!Number.isSafeInteger(roleCheckMs) || roleCheckMs < 1) {
    throw new RangeError(
      `RedisStore: roleCheckMs must be a positive integer, got ${String(roleCheckMs)}`,
    );
  }
  const crossSlot = options.crossSlot ?? 'sequential-refund';
  if (crossSlot !== 'sequential-refund' && crossSlot !== 'reject') {
    throw new RangeError(
      `RedisStore: crossSlot must be "sequential-refund" or "reject", got ${JSON.stringify(crossSlot)}`,
    );
  }
  const replicatedAck =
    options.replicatedAck === undefined ? undefined : validateReplicatedAck(options.replicatedAck);
  if (replicatedAck !== undefined && replicatedAck.timeoutMs >= stuckAfterMs) {
    // WAIT holds its connection: a longer wait would look like a dead link to the watchdog.
    throw new RangeError(
      `RedisStore: replicatedAck.timeoutMs (${replicatedAck.timeoutMs}) must be below stuckAfterMs (${stuckAfterMs})`,
    );
  }
  return {
    prefix,
    maxInFlight: options.maxInFlight ?? 10_000,
    stuckAfterMs,
    roleCheckMs,
    clientClock: options.clock === 'client',
    maxSlidingLogLimit: max,
    dedupTtlMs: options.dedupTtlMs ?? 60_000,
    crossSlot,
    replicatedAck,
    hotKeys: options.hotKeys ?? 32,
  };
}
