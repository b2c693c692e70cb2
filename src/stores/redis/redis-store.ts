import { Cluster, Redis, ReplyError } from 'ioredis';
import { PolicyError, StoreError, type StoreFailureReason } from '../../core/errors.js';
import type { Policy } from '../../core/policy.js';
import { dedupKey, hashTagOf } from '../key.js';
import type { Store, StoreApplyOptions, StoreRequest, StoreResult } from '../store.js';
import {
  applySequentialRefund,
  crossSlotPair,
  newCrossSlotStats,
  type CrossSlotStats,
  type CrossSlotStrategy,
  type GroupOutcome,
} from './cross-slot.js';
import { HotKeys, type HotKey } from './hot-keys.js';
import { LUA_ALGORITHM_CODE, luaParams } from './lua-args.js';
import {
  newReplicatedAckStats,
  validateReplicatedAck,
  waitForReplicas,
  type DegradedPrimaries,
  type ReplicatedAckOptions,
  type ReplicatedAckStats,
} from './replicated-ack.js';
import { decodeApplyBatch, decodeDecisions } from './reply.js';
import { ScriptCoalescer } from './coalescer.js';
import { encodeBatches, MAX_BATCH_ITEMS, splitReplies, type WireBatch } from './wire.js';
import { applyBatchScript, refundBatchScript, type ScriptCall } from './scripts.js';
import { groupBySlot, type SlotGroup } from './slot-groups.js';

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
   * Fewer acknowledgements than asked leave the decision as it is; they are counted in
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
}

/** `host:port` of a Redis Cluster node, as in `--redis-cluster` and `REDIS_URL`. */
export interface ClusterNode {
  readonly host: string;
  readonly port: number;
}

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
  readonly #client: Redis | Cluster;
  readonly #ownsClient: boolean;
  readonly #prefix: string;
  readonly #clientClock: boolean;
  /** Whether the client is a Cluster (routing, slots, cross-slot batches). */
  readonly #cluster: boolean;
  readonly #maxSlidingLogLimit: number;
  readonly #dedupTtlMs: number;
  readonly #apply: ScriptCoalescer<WireBatch, GroupOutcome>;
  readonly #refund: ScriptCall;
  readonly #crossSlot: CrossSlotStrategy;
  readonly #replicatedAck: ReplicatedAckOptions | undefined;
  readonly #hotKeys: HotKeys | undefined;
  readonly #crossSlotStats: CrossSlotStats = newCrossSlotStats();
  readonly #ackStats: ReplicatedAckStats = newReplicatedAckStats();
  readonly #degraded: DegradedPrimaries = new WeakMap();
  readonly #maxInFlight: number;
  readonly #stuckAfterMs: number;
  #inFlight = 0;
  /** When the oldest command still without any reply was sent (performance.now). */
  #unansweredSince: number | undefined;
  /** When the connection was made but not yet ready (its ready check may be lost). */
  #connectSince: number | undefined;
  #ready: Promise<void> | undefined;
  #closed = false;

  constructor(options: RedisStoreOptions) {
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
    this.#client = safeConnection(options.client);
    this.#ownsClient = true;
    this.#maxInFlight = options.maxInFlight ?? 10_000;
    this.#stuckAfterMs = options.stuckAfterMs ?? 2_000;
    this.#prefix = prefix;
    this.#clientClock = options.clock === 'client';
    this.#cluster = this.#client instanceof Cluster;
    this.#maxSlidingLogLimit = max;
    this.#dedupTtlMs = options.dedupTtlMs ?? 60_000;
    const applyBatches = applyBatchScript(this.#client);
    this.#apply = new ScriptCoalescer<WireBatch, GroupOutcome>(
      (batches) => this.#applyCall(applyBatches, batches),
      options.maxBatchesPerCall,
    );
    this.#refund = refundBatchScript(this.#client);
    const crossSlot = options.crossSlot ?? 'sequential-refund';
    if (crossSlot !== 'sequential-refund' && crossSlot !== 'reject') {
      throw new RangeError(
        `RedisStore: crossSlot must be "sequential-refund" or "reject", got ${JSON.stringify(crossSlot)}`,
      );
    }
    this.#crossSlot = crossSlot;
    this.#replicatedAck =
      options.replicatedAck === undefined
        ? undefined
        : validateReplicatedAck(options.replicatedAck);
    if (this.#replicatedAck !== undefined && this.#replicatedAck.timeoutMs >= this.#stuckAfterMs) {
      // WAIT holds its connection: a longer wait would look like a dead link to the watchdog.
      throw new RangeError(
        `RedisStore: replicatedAck.timeoutMs (${this.#replicatedAck.timeoutMs}) must be below stuckAfterMs (${this.#stuckAfterMs})`,
      );
    }
    const k = options.hotKeys ?? 32;
    this.#hotKeys = k === 0 ? undefined : new HotKeys(k);
    if (this.#client instanceof Cluster) {
      // Connect each node as soon as ioredis learns of it: with no cluster offline queue,
      // a command for a node whose connection is still being made would fail at once.
      this.#client.on('+node', (node: Redis) => {
        if (!node.options.readOnly && node.status === 'wait') node.connect().catch(() => undefined);
      });
    }
    // Connection errors surface per call as StoreError; without a listener ioredis
    // would report each one as an unhandled 'error' event.
    this.#client.on('error', () => undefined);
    this.#client.on('connect', () => (this.#connectSince = performance.now()));
    this.#client.on('ready', () => (this.#connectSince = undefined));
    this.#client.on('close', () => {
      this.#connectSince = undefined;
      this.#unansweredSince = undefined;
    });
  }

  /** A store on a standalone Redis at `url` (`redis://host:port/db`). */
  static connect(url: string, options: Omit<RedisStoreOptions, 'client'> = {}): RedisStore {
    const seed = new Redis(url, { lazyConnect: true });
    const store = new RedisStore({ ...options, client: seed });
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
    } = {},
  ): RedisStore {
    const { username, password, ...rest } = options;
    const seed = new Cluster(
      nodes.map((n) => ({ host: n.host, port: n.port })),
      {
        lazyConnect: true,
        scaleReads: 'master',
        redisOptions: {
          ...(username === undefined ? {} : { username }),
          ...(password === undefined ? {} : { password }),
        },
      },
    );
    const store = new RedisStore({ ...rest, client: seed });
    seed.disconnect();
    return store;
  }

  /**
   * Resolves once the store's connection is ready (calls before that wait for it, within
   * their deadline). Meanwhile `onError` hears each failed attempt to connect (a refused
   * connection, a rejected password); ioredis keeps retrying.
   */
  async ready(options: { readonly onError?: (error: Error) => void } = {}): Promise<void> {
    const onError = options.onError;
    if (onError === undefined || this.#client.status === 'ready') {
      await this.#whenReady(undefined);
      return;
    }
    this.#client.on('error', onError);
    try {
      await this.#whenReady(undefined);
    } finally {
      this.#client.off('error', onError);
    }
  }

  /**
   * Resolves when the connection is ready, or rejects when `signal` aborts first or the
   * client has ended. All waiters share one 'ready' listener.
   */
  #whenReady(signal: AbortSignal | undefined): Promise<void> {
    const client = this.#client;
    if (client.status === 'ready') return Promise.resolve();
    if (client.status === 'end') {
      return Promise.reject(
        new StoreError('SLUICE_ERR_STORE_UNAVAILABLE', 'Redis connection is closed', {
          reason: 'connection',
        }),
      );
    }
    this.#ready ??= new Promise<void>((resolve) => {
      client.once('ready', () => {
        this.#ready = undefined;
        resolve();
      });
    });
    return signal === undefined
      ? this.#ready
      : Promise.race([this.#ready, aborted(signal, client)]);
  }

  /** The full Redis key of a bucket key. */
  redisKey(bucketKey: string): string {
    return `${this.#prefix}:${bucketKey}`;
  }

  checkPolicy(policy: Policy): void {
    if (
      policy.algorithm === 'sliding-log' &&
      (policy.params['limit'] as number) > this.#maxSlidingLogLimit
    ) {
      throw new PolicyError(
        'SLUICE_ERR_POLICY_UNSUPPORTED',
        `policy "${policy.name}": sliding-log limit ${String(policy.params['limit'])} is above the Redis store's maxSlidingLogLimit ${this.#maxSlidingLogLimit}; its memory and per-decision work grow with the limit, so use sliding-window-counter or token-bucket for high limits`,
      );
    }
  }

  /**
   * With `crossSlot: "reject"` on a Cluster: throws `SLUICE_ERR_POLICY_CROSS_SLOT` when two
   * policies can match one descriptor while their buckets live in different slots.
   */
  checkPolicies(policies: readonly Policy[]): void {
    if (this.#crossSlot !== 'reject' || !(this.#client instanceof Cluster)) return;
    const pair = crossSlotPair(policies);
    if (pair === undefined) return;
    throw new PolicyError(
      'SLUICE_ERR_POLICY_CROSS_SLOT',
      `policies "${pair[0].name}" and "${pair[1].name}" can match one descriptor but keep their buckets in different Redis Cluster slots (different identity keys), and the store's crossSlot strategy is "reject"; give them the same identity keys or use crossSlot "sequential-refund"`,
    );
  }

  /** The busiest identities seen by this store (hashed), busiest first; empty when off. */
  hotKeys(): HotKey[] {
    return this.#hotKeys?.top() ?? [];
  }

  /** Counters of cross-slot batches (live object; see {@link CrossSlotStats}). */
  get crossSlotStats(): Readonly<CrossSlotStats> {
    return this.#crossSlotStats;
  }

  /** Counters of replicated acknowledgements (live object). */
  get replicatedAckStats(): Readonly<ReplicatedAckStats> {
    return this.#ackStats;
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
    const keys = batch.map((r) => this.redisKey(r.key));
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
        // The cross-slot strategy's dry runs and refunds assume a denied request was never
        // charged: a request that charges denials belongs in an independent call.
        if (batch.some((r) => r.algorithm.chargesDenied?.(r.params) === true)) {
          return Promise.resolve(
            failAll(
              batch,
              new StoreError(
                'SLUICE_ERR_STORE_CROSS_SLOT',
                `the batch's buckets live in ${groups.length} Redis Cluster slots and it holds a request that charges denials, which an all-or-nothing batch across slots cannot run; decide such requests independently`,
              ),
            ),
          );
        }
        if (this.#crossSlot === 'reject') {
          return Promise.resolve(
            failAll(
              batch,
              new StoreError(
                'SLUICE_ERR_STORE_CROSS_SLOT',
                `the batch's buckets live in ${groups.length} Redis Cluster slots and the store's crossSlot strategy is "reject"`,
              ),
            ),
          );
        }
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
    return this.#consume(batch, keys, slot, options, false).then((out) =>
      out.ok
        ? out.decisions.map((decision) => ({ ok: true as const, decision }))
        : failAll(batch, out.error),
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
    const groups: readonly SlotGroup[] = this.#cluster
      ? groupBySlot(keys)
      : [{ slot: 0, indices: batch.map((_, i) => i) }];
    const rid = options.requestId;
    const results: StoreResult[] = new Array<StoreResult>(batch.length);
    return Promise.all(
      groups.map(async (g) => {
        const wires = g.indices.map((i): WireBatch => ({
          items: [batch[i]!],
          keys:
            rid === undefined
              ? [keys[i]!]
              : [keys[i]!, this.redisKey(dedupKey(batch[i]!.key, `${rid}#${i}`))],
          nowMs: this.#clientClock ? options.nowMs : undefined,
          dedup: rid !== undefined,
          dedupTtlMs: this.#dedupTtlMs,
        }));
        const outcomes = await this.#call(
          () => this.#apply.callAll(g.slot, wires),
          (error) => wires.map(() => failed(error)),
          options,
        );
        if (
          this.#replicatedAck !== undefined &&
          outcomes.some((o, j) => charged(wires[j]!.items, o))
        ) {
          await waitForReplicas(
            this.#client,
            g.slot,
            this.#replicatedAck,
            this.#ackStats,
            this.#degraded,
          );
        }
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
    );
  }

  /**
   * One applyBatch call over `requests` (their full keys in `requestKeys`, all in `slot`).
   * A dry run adds a last request that can never fit (cost
   * above its capacity, enforced) on the first key: the batch is then refused as a whole,
   * so nothing is written, and every real request reports what it would get, unconsumed.
   * It has no request id.
   */
  #consume(
    requests: readonly StoreRequest[],
    requestKeys: readonly string[],
    slot: number,
    options: StoreApplyOptions,
    dryRun: boolean,
  ): Promise<GroupOutcome> {
    if (requests.length + 1 > MAX_BATCH_ITEMS) {
      // Refused here, alone: thrown while encoding, it would fail the whole coalesced call.
      return Promise.resolve(
        failed(
          new StoreError(
            'SLUICE_ERR_STORE_UNAVAILABLE',
            `RedisStore: a batch of ${requests.length} requests is above the ${MAX_BATCH_ITEMS - 1} one script call carries`,
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
        { ...first, cost: first.algorithm.capacity(first.params) + 1, enforce: true },
      ];
      keys = [...keys, keys[0]!];
    }
    const rid = dryRun ? undefined : options.requestId;
    const wire: WireBatch = {
      items,
      keys: rid === undefined ? keys : [...keys, this.redisKey(dedupKey(items[0]!.key, rid))],
      nowMs: this.#clientClock ? options.nowMs : undefined,
      dedup: rid !== undefined,
      dedupTtlMs: this.#dedupTtlMs,
      dryRun,
    };
    // Coalesced with other checks of the same slot (one group on a standalone Redis):
    // one script's keys must share a slot on a Cluster.
    const decided = this.#call(() => this.#apply.call(slot, wire), failed, options);
    if (dryRun || this.#replicatedAck === undefined) return decided;
    return decided.then((out) => this.#acknowledged(items, slot, out));
  }

  /** With `replicatedAck`: waits for replicas when the batch consumed something. */
  async #acknowledged(
    items: readonly StoreRequest[],
    slot: number,
    out: GroupOutcome,
  ): Promise<GroupOutcome> {
    if (this.#replicatedAck !== undefined && charged(items, out)) {
      await waitForReplicas(
        this.#client,
        slot,
        this.#replicatedAck,
        this.#ackStats,
        this.#degraded,
      );
    }
    return out;
  }

  /** One refundBatch call giving back `indices` (of one slot) consumed at `decidedAtMs`. */
  async #refundGroup(
    batch: readonly StoreRequest[],
    allKeys: readonly string[],
    group: SlotGroup,
    indices: readonly number[],
    decidedAtMs: number,
    options: StoreApplyOptions,
  ): Promise<GroupOutcome> {
    const items = indices.map((i) => batch[i]!);
    const keys = indices.map((i) => allKeys[i]!);
    const rid = options.requestId;
    const args: (string | number)[] = [
      this.#clientClock ? String(options.nowMs) : '',
      this.#dedupTtlMs,
    ];
    for (const r of items) {
      args.push(
        LUA_ALGORITHM_CODE[r.algorithm.kind],
        r.cost,
        r.algorithm.ttlMs(r.params),
        decidedAtMs,
      );
      args.push(...luaParams(r.algorithm.kind, r.params as Readonly<Record<string, unknown>>));
    }
    // The marker makes a refund under one request id happen once, however often a
    // retry replays the batch (its consume is deduplicated; its refund must be too).
    const firstKey = batch[group.indices[0]!]!.key;
    const scriptKeys =
      rid === undefined ? keys : [...keys, `${this.redisKey(dedupKey(firstKey, rid))}:refund`];
    // Refunds run even after the caller's deadline: the consumption must not stay.
    const reply = await this.#call(
      () => this.#script(() => this.#refund(scriptKeys, args)),
      failed,
      undefined,
    );
    if (!reply.ok) return reply;
    try {
      return { ok: true, decisions: decodeDecisions(reply.reply, items, keys), decidedAtMs };
    } catch (error) {
      return { ok: false, error: error as StoreError };
    }
  }

  /**
   * One applyBatches call carrying `batches` (coalesced checks of one slot), decoded into
   * one outcome per batch. Never rejects: a failed call fails each of its batches.
   */
  #applyCall(script: ScriptCall, batches: readonly WireBatch[]): Promise<GroupOutcome[]> {
    const { keys, packed } = encodeBatches(batches);
    return this.#script(() => script(keys, [packed])).then((out) => {
      if (!out.ok) return batches.map(() => out);
      let replies: unknown[];
      try {
        replies = splitReplies(out.reply, batches.length);
      } catch (cause) {
        const error = new StoreError(
          'SLUICE_ERR_STORE_UNAVAILABLE',
          `Redis: ${(cause as Error).message}`,
          { cause },
        );
        return batches.map(() => ({ ok: false as const, error }));
      }
      return batches.map((b, i): GroupOutcome => {
        try {
          const decided = decodeApplyBatch(replies[i], b.items, b.keys);
          const decisions = b.dryRun ? decided.decisions.slice(0, -1) : decided.decisions;
          return { ok: true, decisions, decidedAtMs: decided.decidedAtMs };
        } catch (error) {
          return { ok: false, error: error as StoreError };
        }
      });
    });
  }

  /**
   * Sends one script call under the stuck watchdog: a command unanswered for
   * `stuckAfterMs` means a dead link (see #checkStuck). Never rejects.
   */
  #script(send: () => Promise<unknown>): Promise<CallOutcome> {
    this.#unansweredSince ??= performance.now();
    return send().then(
      (reply): CallOutcome => {
        this.#unansweredSince = undefined;
        return { ok: true, reply };
      },
      (cause: unknown): CallOutcome => {
        // An error reply still proves the connection works; a connection error does not.
        if (cause instanceof ReplyError) this.#unansweredSince = undefined;
        return { ok: false, error: asRedisError(cause) };
      },
    );
  }

  /**
   * Runs `call` within the in-flight bound, once the connection is ready. Promise chains
   * rather than `await`: on the hot path (connection ready) this is one hop per check.
   */
  #call<T>(
    call: () => Promise<T>,
    fail: (error: StoreError) => T,
    /** Read only when the connection is not ready: its `signal` may be made on demand. */
    options: StoreApplyOptions | undefined,
  ): Promise<T> {
    this.#checkStuck();
    if (this.#inFlight >= this.#maxInFlight) {
      return Promise.resolve(
        fail(
          new StoreError(
            'SLUICE_ERR_STORE_UNAVAILABLE',
            `Redis: ${this.#inFlight} calls already waiting (maxInFlight)`,
            { reason: 'overloaded' },
          ),
        ),
      );
    }
    this.#inFlight++;
    const sent =
      this.#client.status === 'ready'
        ? call()
        : this.#whenReady(options?.signal ?? AbortSignal.timeout(this.#stuckAfterMs)).then(call);
    return sent.then(
      (result) => {
        this.#inFlight--;
        return result;
      },
      (cause: unknown) => {
        this.#inFlight--;
        return fail(asRedisError(cause));
      },
    );
  }

  /** Whether the connection is up and ready for commands now. */
  get connected(): boolean {
    return this.#client.status === 'ready';
  }

  /** Calls waiting for Redis now (bounded by `maxInFlight`). */
  get inFlight(): number {
    return this.#inFlight;
  }

  /**
   * Closes the connection: a polite `QUIT`, or after `stuckAfterMs` without its reply (a
   * frozen or partitioned Redis) a disconnect, so closing never hangs.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (!this.#ownsClient) return;
    let timer: NodeJS.Timeout | undefined;
    const stuck = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.#stuckAfterMs);
    });
    await Promise.race([this.#client.quit().then(() => undefined), stuck]).catch(() => undefined);
    clearTimeout(timer);
    if (this.#client.status !== 'end') this.#client.disconnect();
  }

  /**
   * Replies come back in order, so a command unanswered for `stuckAfterMs`, or a
   * connection stuck before ready for as long, means the link is silently dead (e.g. a
   * partition that swallows packets). The socket is destroyed, not ended: a polite FIN
   * would be swallowed too. ioredis then reconnects and fails what was pending (their
   * outcome is unknown, and reported so).
   */
  #checkStuck(): void {
    const since = Math.min(this.#unansweredSince ?? Infinity, this.#connectSince ?? Infinity);
    if (performance.now() - since < this.#stuckAfterMs) return;
    this.#unansweredSince = undefined;
    this.#connectSince = undefined;
    if (this.#client instanceof Cluster) this.#client.disconnect(true);
    else this.#client.stream?.destroy();
  }
}

type CallOutcome = { ok: true; reply: unknown } | { ok: false; error: StoreError };

/** An outcome of failure, for any outcome type with the `{ ok: false, error }` shape. */
const failed = (error: StoreError): { ok: false; error: StoreError } => ({ ok: false, error });

function asRedisError(cause: unknown): StoreError {
  return cause instanceof StoreError
    ? cause
    : new StoreError('SLUICE_ERR_STORE_UNAVAILABLE', `Redis: ${(cause as Error).message}`, {
        cause,
        reason: reasonOf(cause),
      });
}

/** Error replies by their first word; anything that is not a reply is the connection's. */
const REPLY_REASONS: Readonly<Record<string, StoreFailureReason>> = {
  OOM: 'oom',
  WRONGTYPE: 'wrongtype',
  NOAUTH: 'auth',
  WRONGPASS: 'auth',
  NOPERM: 'auth',
  READONLY: 'readonly',
  LOADING: 'busy',
  BUSY: 'busy',
  CLUSTERDOWN: 'cluster',
  MASTERDOWN: 'cluster',
  TRYAGAIN: 'cluster',
};

function reasonOf(cause: unknown): StoreFailureReason {
  if (!(cause instanceof ReplyError)) return 'connection';
  const first = /^[A-Z]+/.exec((cause as Error).message)?.[0] ?? '';
  return REPLY_REASONS[first] ?? 'script';
}

/** ioredis settings under which a command is sent at most once, and only when asked. */
const SAFE = { autoResendUnfulfilledCommands: false, maxRetriesPerRequest: 0 } as const;

/**
 * The Cluster equivalent. ioredis's node connections never reconnect and fail what they
 * had sent with "Connection is closed." when they drop, and the Cluster resends commands
 * failed that way after `retryDelayOnFailover`: that would replay a consume that may have
 * been applied, so it is 0 (off). Redirections (`MOVED`, `ASK`), `TRYAGAIN` and
 * `CLUSTERDOWN` are replies saying the command did not run, so ioredis follows or retries
 * them (at most `maxRedirections` times). `scaleReads: "master"`: admission never runs on
 * a replica (applyBatch writes, so ioredis would send it to the primary anyway).
 */
const SAFE_CLUSTER = {
  lazyConnect: false,
  enableOfflineQueue: false,
  retryDelayOnFailover: 0,
  scaleReads: 'master',
  maxRedirections: 16,
} as const;

function safeConnection(client: Redis | Cluster): Redis | Cluster {
  if (client instanceof Cluster) {
    return client.duplicate(undefined, {
      ...SAFE_CLUSTER,
      redisOptions: { ...client.options.redisOptions, ...SAFE },
    } as never);
  }
  return client.duplicate({ ...SAFE, enableOfflineQueue: false, lazyConnect: false } as never);
}

/** Rejects when `signal` aborts; never settles otherwise. */
function aborted(signal: AbortSignal, client: Redis | Cluster): Promise<never> {
  return new Promise((_, reject) => {
    const fail = (): void =>
      reject(
        new StoreError(
          'SLUICE_ERR_STORE_UNAVAILABLE',
          `Redis is not connected (status ${client.status})`,
          { reason: 'connection' },
        ),
      );
    if (signal.aborted) fail();
    else signal.addEventListener('abort', fail, { once: true });
  });
}

/** Whether a batch's outcome consumed anything (see decideBatch). */
function charged(items: readonly StoreRequest[], out: GroupOutcome): boolean {
  if (!out.ok) return false;
  const chargesDenied = (r: StoreRequest): boolean =>
    r.algorithm.chargesDenied?.(r.params) === true;
  const admitted = items.every((r, j) => !r.enforce || out.decisions[j]!.allowed);
  return items.some(
    (r, j) => r.cost > 0 && (chargesDenied(r) || (admitted && out.decisions[j]!.allowed)),
  );
}

function failAll(batch: readonly StoreRequest[], error: StoreError): StoreResult[] {
  return batch.map(() => ({ ok: false as const, error }));
}
