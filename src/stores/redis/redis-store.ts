import type { ConnectionOptions } from 'node:tls';
import { algorithmOf } from '../../algorithms/index.js';
import { Cluster, Redis } from 'ioredis';
import type { AlgorithmDecision } from '../../core/decision.js';
import { PolicyError, StoreError } from '../../core/errors.js';
import type { Policy } from '../../core/policy.js';
import { hashTagOf } from '../key.js';
import type {
  Store,
  StoreApplyOptions,
  StoreRefundOptions,
  StoreSettleOptions,
  StoreSettleRequest,
  StoreSettleResult,
  StoreRequest,
  StoreResult,
} from '../store.js';
import type { ScriptCoalescer } from './coalescer.js';
import { coalescedApply } from './coalesced-apply.js';
import { SafeConnection } from './connection.js';
import {
  applySequentialRefund,
  crossSlotRefusal,
  newCrossSlotStats,
  rejectCrossSlotPolicies,
  type CrossSlotStats,
  type GroupOutcome,
} from './cross-slot.js';
import { dedupRedisKey, independentRequestId, refundMarkerKey } from './dedup.js';
import { HotKeys, type HotKey } from './hot-keys.js';
import { failed } from './redis-errors.js';
import { RefundCall } from './refund-call.js';
import { SettleCall } from './settle-call.js';
import { ReplicatedAck, type ReplicatedAckStats } from './replicated-ack.js';
import { scriptStats, type ScriptStats } from './script-stats.js';
import { groupBySlot, perGroup, slotGroupsOf, type SlotGroup } from './slot-groups.js';
import {
  storeSettings,
  type ClusterNode,
  type RedisStoreOptions,
  type SentinelTarget,
  type StoreSettings,
} from './store-options.js';
import { MAX_BATCH_ITEMS, type WireBatch } from './wire.js';

export type { ClusterNode, RedisStoreOptions, SentinelTarget } from './store-options.js';

/**
 * Runs every algorithm in Redis as one atomic Lua step per batch (applyBatches.lua):
 * read, refill, check, consume, write, expire, return. Concurrent checks are coalesced
 * into one script call, each still atomic on its own. See docs/redis.md.
 *
 * Over a standalone Redis, a batch is always one script call. Over a Redis Cluster
 * (`client` is an ioredis `Cluster`), the buckets of one identity share a hash slot and
 * are decided in one call on the slot's primary; a batch whose buckets span several slots
 * is run with the `crossSlot` strategy (docs/cluster.md). Admission only ever runs on
 * primaries; redirections (`MOVED`, `ASK`, `TRYAGAIN`) are followed, since they prove the
 * script did not run, while a call whose connection drops is never resent.
 */
export class RedisStore implements Store {
  readonly #settings: StoreSettings;
  readonly #connection: SafeConnection;
  /** Whether the client is a Cluster (routing, slots, cross-slot batches). */
  readonly #cluster: boolean;
  readonly #apply: ScriptCoalescer<WireBatch, GroupOutcome>;
  readonly #refund: RefundCall;
  readonly #settle: SettleCall;
  readonly #ack: ReplicatedAck;
  readonly #hotKeys: HotKeys | undefined;
  readonly #crossSlotStats: CrossSlotStats = newCrossSlotStats();
  #closed = false;

  constructor(options: RedisStoreOptions) {
    this.#settings = storeSettings(options);
    this.#connection = new SafeConnection(
      options.client,
      this.#settings.maxInFlight,
      this.#settings.stuckAfterMs,
      this.#settings.roleCheckMs,
      options.observer,
    );
    this.#cluster = this.#connection.client instanceof Cluster;
    this.#apply = coalescedApply(this.#connection, options.maxBatchesPerCall);
    this.#refund = new RefundCall(this.#connection);
    this.#settle = new SettleCall(this.#connection);
    this.#ack = new ReplicatedAck(this.#connection.client, this.#settings.replicatedAck);
    const k = this.#settings.hotKeys;
    this.#hotKeys = k === 0 ? undefined : new HotKeys(k);
  }

  /**
   * A store on a standalone Redis at `url` (`redis://host:port/db`, or `rediss://` for
   * TLS). `tls` (node:tls options: `ca`, `cert`, `key`, …) turns TLS on; ioredis reads it
   * at each connect, so a change made to that object in place applies from the next one.
   */
  static connect(
    url: string,
    options: Omit<RedisStoreOptions, 'client'> & { readonly tls?: ConnectionOptions } = {},
  ): RedisStore {
    const { tls, ...rest } = options;
    const seed = new Redis(url, { lazyConnect: true, ...(tls === undefined ? {} : { tls }) });
    const store = new RedisStore({ ...rest, client: seed });
    seed.disconnect();
    return store;
  }

  /**
   * A store on a Redis Cluster reached through any of `nodes` (the rest are discovered).
   * Commands go to primaries only (`scaleReads: "master"`).
   */
  static connectCluster(
    nodes: readonly ClusterNode[],
    options: Omit<RedisStoreOptions, 'client'> & {
      readonly username?: string;
      readonly password?: string;
      /** TLS to every node (node:tls options), as in {@link RedisStore.connect}. */
      readonly tls?: ConnectionOptions;
    } = {},
  ): RedisStore {
    const { username, password, tls, ...rest } = options;
    const seed = new Cluster(
      nodes.map((n) => ({ host: n.host, port: n.port })),
      {
        lazyConnect: true,
        scaleReads: 'master',
        redisOptions: {
          ...(username === undefined ? {} : { username }),
          ...(password === undefined ? {} : { password }),
          ...(tls === undefined ? {} : { tls }),
        },
      },
    );
    const store = new RedisStore({ ...rest, client: seed });
    seed.disconnect();
    return store;
  }

  /**
   * A store on the primary that Redis Sentinel names `target.name`, found through any of
   * `target.sentinels`. ioredis asks the Sentinels for the primary at each connect,
   * checks its role, and reconnects at once when the Sentinels announce a failover
   * (`failoverDetector`); the store's rules stay: a command already sent is never resent,
   * so checks during a failover take their policy's failure mode.
   */
  static connectSentinel(
    target: SentinelTarget,
    options: Omit<RedisStoreOptions, 'client'> = {},
  ): RedisStore {
    const seed = new Redis({
      lazyConnect: true,
      name: target.name,
      sentinels: target.sentinels.map((n) => ({ host: n.host, port: n.port })),
      role: 'master',
      failoverDetector: true,
      ...(target.sentinelUsername === undefined
        ? {}
        : { sentinelUsername: target.sentinelUsername }),
      ...(target.sentinelPassword === undefined
        ? {}
        : { sentinelPassword: target.sentinelPassword }),
      ...(target.username === undefined ? {} : { username: target.username }),
      ...(target.password === undefined ? {} : { password: target.password }),
      ...(target.tls === undefined
        ? {}
        : { tls: target.tls, sentinelTLS: target.tls, enableTLSForSentinelMode: true }),
    });
    const store = new RedisStore({ ...options, client: seed });
    seed.disconnect();
    return store;
  }

  /**
   * Resolves once the store's connection is ready and, on a standalone server, the server
   * has said it is a primary (calls before that wait for it, within their deadline).
   * Meanwhile `onError` hears each failed attempt to connect (a refused connection, a
   * rejected password); ioredis keeps retrying. Rejects with `SLUICE_ERR_STORE_REPLICA`
   * when the server is a replica: the store never decides there (see docs/redis.md).
   */
  ready(options: { readonly onError?: (error: Error) => void } = {}): Promise<void> {
    return this.#connection.ready(options.onError);
  }

  /** The full Redis key of a bucket key. */
  redisKey(bucketKey: string): string {
    return `${this.#settings.prefix}:${bucketKey}`;
  }

  checkPolicy(policy: Policy): void {
    const max = this.#settings.maxSlidingLogLimit;
    // A sliding log's capacity is its limit.
    const limit = algorithmOf(policy.algorithm).capacity(policy.params);
    if (policy.algorithm === 'sliding-log' && limit > max) {
      throw new PolicyError(
        'SLUICE_ERR_POLICY_UNSUPPORTED',
        `policy "${policy.name}": sliding-log limit ${limit} is above the Redis store's maxSlidingLogLimit ${max}; its memory and per-decision work grow with the limit, so use sliding-window-counter or token-bucket for high limits`,
      );
    }
  }

  /**
   * With `crossSlot: "reject"` on a Cluster: throws `SLUICE_ERR_POLICY_CROSS_SLOT` when two
   * policies can match one descriptor while their buckets live in different slots.
   */
  checkPolicies(policies: readonly Policy[]): void {
    if (this.#settings.crossSlot === 'reject' && this.#cluster) rejectCrossSlotPolicies(policies);
  }

  /** The busiest identities seen by this store (hashed), busiest first; empty when off. */
  hotKeys(): HotKey[] {
    return this.#hotKeys?.top() ?? [];
  }

  /**
   * `INFO commandstats` of the script commands on each node the store sends scripts to
   * (the standalone server, or the Cluster's primaries): the nodes' own script time, for
   * `RedisMetrics.watchScripts`. Counts every client of a node. Rejects when a node
   * does not answer (not connected: at once).
   */
  scriptStats(): Promise<ScriptStats[]> {
    return scriptStats(this.#connection.client);
  }

  /** Counters of cross-slot batches (live object; see {@link CrossSlotStats}). */
  get crossSlotStats(): Readonly<CrossSlotStats> {
    return this.#crossSlotStats;
  }

  /** Counters of replicated acknowledgements (live object). */
  get replicatedAckStats(): Readonly<ReplicatedAckStats> {
    return this.#ack.stats;
  }

  apply(
    batch: readonly StoreRequest[],
    options: StoreApplyOptions,
  ): Promise<readonly StoreResult[]> {
    if (this.#closed)
      return Promise.resolve(
        failAll(batch, new StoreError('SLUICE_ERR_STORE_CLOSED', 'RedisStore is closed')),
      );
    if (batch.length === 0) return Promise.resolve([]);
    const keys =
      batch.length === 1 ? [this.redisKey(batch[0]!.key)] : batch.map((r) => this.redisKey(r.key));
    if (this.#hotKeys !== undefined) {
      if (batch.length === 1) this.#hotKeys.record(hashTagOf(batch[0]!.key));
      else for (const tag of new Set(batch.map((r) => hashTagOf(r.key)))) this.#hotKeys.record(tag);
    }
    if (options.independent === true && batch.length > 1)
      return this.#applyEach(batch, keys, options);
    // The slot matters only on a Cluster (call routing, coalescing, WAIT): no CRC16 otherwise.
    let slot = 0;
    if (this.#cluster) {
      const groups = groupBySlot(keys);
      if (groups.length > 1) {
        const refused = crossSlotRefusal(batch, groups.length, this.#settings.crossSlot);
        if (refused !== undefined) return Promise.resolve(failAll(batch, refused));
        return applySequentialRefund(
          batch,
          groups,
          {
            consume: (g) => this.#consumeGroup(batch, keys, g, options, false),
            dryRun: (g) => this.#consumeGroup(batch, keys, g, options, true),
            refund: (g, indices, decidedAtMs) =>
              this.#refundGroup(batch, keys, g, indices, decidedAtMs, options),
          },
          this.#crossSlotStats,
        );
      }
      slot = groups[0]!.slot;
    }
    return this.#consume(batch, keys, slot, options, false, (out) =>
      out.ok ? out.decisions.map(succeeded) : failAll(batch, out.error),
    );
  }

  /**
   * An independent call: every request a batch of one, all of a slot's requests in one
   * script call (applyBatches.lua runs them in order, so a later request on a key sees an
   * earlier one), the slots' calls side by side. No cross-slot strategy is needed: nothing
   * spans two requests. With a request id, each request has its own dedup record (the id
   * and its position).
   */
  #applyEach(
    batch: readonly StoreRequest[],
    keys: readonly string[],
    options: StoreApplyOptions,
  ): Promise<readonly StoreResult[]> {
    const groups = slotGroupsOf(keys, this.#cluster);
    const rid = options.requestId;
    const { prefix, clientClock, dedupTtlMs } = this.#settings;
    const results: StoreResult[] = new Array<StoreResult>(batch.length);
    return Promise.all(
      groups.map(async (g) => {
        const wires = g.indices.map((i): WireBatch => ({
          items: [batch[i]!],
          keys:
            rid === undefined
              ? [keys[i]!]
              : [keys[i]!, dedupRedisKey(prefix, batch[i]!.key, independentRequestId(rid, i))],
          nowMs: clientClock ? options.nowMs : undefined,
          dedup: rid !== undefined,
          dedupTtlMs,
        }));
        const outcomes = await this.#ack.after(
          wires.map((w) => w.items),
          g.slot,
          await this.#connection.call(
            () => this.#apply.callAll(g.slot, wires),
            (all) => all,
            (error) => wires.map(() => failed(error)),
            options,
            wires[0]!.keys[0],
          ),
        );
        outcomes.forEach((o, j) => {
          results[g.indices[j]!] = o.ok ? { ok: true, decision: o.decisions[0]! } : o;
        });
      }),
    ).then(() => results);
  }

  /** {@link RedisStore.#consume} over the requests of one slot group of a batch. */
  #consumeGroup(
    batch: readonly StoreRequest[],
    allKeys: readonly string[],
    group: SlotGroup,
    options: StoreApplyOptions,
    dryRun: boolean,
  ): Promise<GroupOutcome> {
    return this.#consume(
      group.indices.map((i) => batch[i]!),
      group.indices.map((i) => allKeys[i]!),
      group.slot,
      options,
      dryRun,
      (out) => out,
    );
  }

  /**
   * One applyBatch call over `requests` (their full keys in `requestKeys`, all in `slot`).
   * A dry run adds a last request that can never fit (cost
   * above its capacity, enforced) on the first key: the batch is then refused as a whole,
   * so nothing is written, and every real request reports what it would get, unconsumed.
   * It has no request id. The outcome is mapped with `then` in the step that hears it.
   */
  #consume<U>(
    requests: readonly StoreRequest[],
    requestKeys: readonly string[],
    slot: number,
    options: StoreApplyOptions,
    dryRun: boolean,
    then: (outcome: GroupOutcome) => U,
  ): Promise<U> {
    if (requests.length + 1 > MAX_BATCH_ITEMS) {
      // Refused here, alone: thrown while encoding, it would fail the whole coalesced call.
      return Promise.resolve(
        then(
          failed(
            new StoreError(
              'SLUICE_ERR_STORE_UNAVAILABLE',
              `RedisStore: a batch of ${requests.length} requests is above the ${MAX_BATCH_ITEMS - 1} one script call carries`,
            ),
          ),
        ),
      );
    }
    let items = requests;
    let keys = requestKeys;
    if (dryRun) {
      const first = items[0]!;
      items = [
        ...items,
        {
          key: first.key,
          algorithm: first.algorithm,
          params: first.params,
          cost: first.algorithm.capacity(first.params) + 1,
          enforce: true,
        },
      ];
      keys = [...keys, keys[0]!];
    }
    const rid = dryRun ? undefined : options.requestId;
    const { prefix, clientClock, dedupTtlMs } = this.#settings;
    const wire: WireBatch = {
      items,
      keys: rid === undefined ? keys : [...keys, dedupRedisKey(prefix, items[0]!.key, rid)],
      nowMs: clientClock ? options.nowMs : undefined,
      dedup: rid !== undefined,
      dedupTtlMs,
      dryRun,
    };
    // Coalesced with other checks of the same slot (one group on a standalone Redis):
    // one script's keys must share a slot on a Cluster.
    const call = (): Promise<GroupOutcome> => this.#apply.call(slot, wire);
    if (dryRun || !this.#ack.on) {
      return this.#connection.call(call, then, (error) => then(failed(error)), options, keys[0]);
    }
    return this.#connection
      .call(call, (out) => out, failed, options, keys[0])
      .then((out) => this.#ack.after([items], slot, [out]).then((acked) => then(acked[0]!)));
  }

  /** One refundBatch call giving back `indices` (of one slot) consumed at `decidedAtMs`. */
  #refundGroup(
    batch: readonly StoreRequest[],
    allKeys: readonly string[],
    group: SlotGroup,
    indices: readonly number[],
    decidedAtMs: number,
    options: StoreApplyOptions,
  ): Promise<GroupOutcome> {
    const { prefix, clientClock, dedupTtlMs } = this.#settings;
    const rid = options.requestId;
    const firstKey = batch[group.indices[0]!]!.key;
    return this.#refund.refund(
      indices.map((i) => batch[i]!),
      indices.map((i) => allKeys[i]!),
      rid === undefined ? undefined : refundMarkerKey(prefix, firstKey, rid),
      decidedAtMs,
      clientClock ? String(options.nowMs) : '',
      dedupTtlMs,
    );
  }

  /**
   * refundBatch.lua over `batch` (Store.refund): one call per slot. With a request id, a
   * marker key makes the refund happen once per id, however often it is repeated. Under
   * the server clock, `consumedAtMs` is compared with Redis's time.
   */
  refund(
    batch: readonly StoreRequest[],
    options: StoreRefundOptions,
  ): Promise<readonly StoreResult[]> {
    if (this.#closed) return Promise.resolve(failAll(batch, closedError()));
    const keys = batch.map((r) => this.redisKey(r.key));
    const { nowMs, requestId } = options;
    const call = requestId === undefined ? { nowMs } : { nowMs, requestId };
    return perGroup(slotGroupsOf(keys, this.#cluster), batch.length, async (g) => {
      const out = await this.#refundGroup(batch, keys, g, g.indices, options.consumedAtMs, call);
      return g.indices.map((_, j) => (out.ok ? succeeded(out.decisions[j]!) : out));
    });
  }

  /** settleBatch.lua over `batch` (Store.settle): one call per slot (settle-call.ts). */
  settle(
    batch: readonly StoreSettleRequest[],
    options: StoreSettleOptions,
  ): Promise<readonly StoreSettleResult[]> {
    if (this.#closed) return Promise.resolve(failAll(batch, closedError()) as StoreSettleResult[]);
    const { prefix, clientClock } = this.#settings;
    const keys = batch.map((r) => this.redisKey(r.key));
    return this.#settle.settle(batch, keys, options, {
      prefix,
      clientClock,
      cluster: this.#cluster,
    });
  }

  /** Whether the connection is up and ready for commands now. */
  get connected(): boolean {
    return this.#connection.client.status === 'ready';
  }

  /** Calls waiting for Redis now (bounded by `maxInFlight`). */
  get inFlight(): number {
    return this.#connection.inFlight;
  }

  /**
   * Closes the connection: a polite `QUIT`, or after `stuckAfterMs` without its reply (a
   * frozen or partitioned Redis) a disconnect, so closing never hangs.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#connection.close();
  }
}

function succeeded(decision: AlgorithmDecision): StoreResult {
  return { ok: true, decision };
}

function closedError(): StoreError {
  return new StoreError('SLUICE_ERR_STORE_CLOSED', 'RedisStore is closed');
}

function failAll(batch: readonly StoreRequest[], error: StoreError): StoreResult[] {
  return batch.map(() => ({ ok: false as const, error }));
}
