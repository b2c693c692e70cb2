import { Cluster, Redis, ReplyError } from 'ioredis';
import { PolicyError, StoreError } from '../../core/errors.js';
import type { Policy } from '../../core/policy.js';
import { dedupKey, hashTagOf } from '../key.js';
import type { Store, StoreApplyOptions, StoreRequest, StoreResult } from '../store.js';
import { LUA_ALGORITHM_CODE, luaParams } from './lua-args.js';
import { decodeApplyBatch } from './reply.js';
import { ScriptCoalescer } from './coalescer.js';
import { applyBatchScript } from './scripts.js';

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
   * Most checks coalesced into one script call: concurrent checks (those issued within
   * one turn of the event loop) go to Redis together, one command for all of them. The
   * bound keeps each script run short on Redis. @default 64
   */
  readonly maxBatchesPerCall?: number;
}

/**
 * Runs every algorithm in Redis as one atomic Lua step per batch (applyBatches.lua):
 * read, refill, check, consume, write, expire, return. All keys of a batch must share a
 * hash slot (they do when the policies share an identity). See docs/redis.md.
 */
export class RedisStore implements Store {
  readonly #client: Redis | Cluster;
  readonly #ownsClient: boolean;
  readonly #prefix: string;
  readonly #clientClock: boolean;
  readonly #maxSlidingLogLimit: number;
  readonly #dedupTtlMs: number;
  readonly #apply: ScriptCoalescer;
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
    this.#maxSlidingLogLimit = max;
    this.#dedupTtlMs = options.dedupTtlMs ?? 60_000;
    this.#apply = new ScriptCoalescer(applyBatchScript(this.#client), options.maxBatchesPerCall);
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

  /** Resolves once the store's connection is ready (calls before that wait for it, within their deadline). */
  async ready(): Promise<void> {
    await this.#whenReady(undefined);
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
        new StoreError('SLUICE_ERR_STORE_UNAVAILABLE', 'Redis connection is closed'),
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

  async apply(
    batch: readonly StoreRequest[],
    options: StoreApplyOptions,
  ): Promise<readonly StoreResult[]> {
    if (this.#closed)
      return failAll(batch, new StoreError('SLUICE_ERR_STORE_CLOSED', 'RedisStore is closed'));
    if (batch.length === 0) return [];
    const keys = batch.map((r) => this.redisKey(r.key));
    const rid = options.requestId;
    const args: (string | number)[] = [
      this.#clientClock ? String(options.nowMs) : '',
      rid ?? '',
      this.#dedupTtlMs,
    ];
    for (const r of batch) {
      args.push(
        LUA_ALGORITHM_CODE[r.algorithm.kind],
        r.cost,
        r.enforce ? 1 : 0,
        r.algorithm.ttlMs(r.params),
      );
      args.push(...luaParams(r.algorithm.kind, r.params as Readonly<Record<string, unknown>>));
    }
    this.#checkStuck();
    if (this.#inFlight >= this.#maxInFlight) {
      return failAll(
        batch,
        new StoreError(
          'SLUICE_ERR_STORE_UNAVAILABLE',
          `Redis: ${this.#inFlight} calls already waiting (maxInFlight)`,
        ),
      );
    }
    this.#inFlight++;
    let reply: unknown;
    try {
      await this.#whenReady(options.signal ?? AbortSignal.timeout(this.#stuckAfterMs));
      const scriptKeys =
        rid === undefined ? keys : [...keys, this.redisKey(dedupKey(batch[0]!.key, rid))];
      this.#unansweredSince ??= performance.now();
      reply = await this.#apply.call(
        this.#client instanceof Cluster ? hashTagOf(batch[0]!.key) : '',
        scriptKeys,
        args,
      );
      this.#unansweredSince = undefined;
    } catch (cause) {
      // An error reply still proves the connection works; a connection error does not.
      if (cause instanceof ReplyError) this.#unansweredSince = undefined;
      return failAll(
        batch,
        cause instanceof StoreError
          ? cause
          : new StoreError('SLUICE_ERR_STORE_UNAVAILABLE', `Redis: ${(cause as Error).message}`, {
              cause,
            }),
      );
    } finally {
      this.#inFlight--;
    }
    try {
      return decodeApplyBatch(reply, batch, keys).map((decision) => ({
        ok: true as const,
        decision,
      }));
    } catch (error) {
      return failAll(batch, error as StoreError);
    }
  }

  /** Calls waiting for Redis now (bounded by `maxInFlight`). */
  get inFlight(): number {
    return this.#inFlight;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#ownsClient) await this.#client.quit().catch(() => this.#client.disconnect());
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

/** ioredis settings under which a command is sent at most once, and only when asked. */
const SAFE = { autoResendUnfulfilledCommands: false, maxRetriesPerRequest: 0 } as const;

function safeConnection(client: Redis | Cluster): Redis | Cluster {
  if (client instanceof Cluster) {
    return client.duplicate(undefined, {
      enableOfflineQueue: false,
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
        ),
      );
    if (signal.aborted) fail();
    else signal.addEventListener('abort', fail, { once: true });
  });
}

function failAll(batch: readonly StoreRequest[], error: StoreError): StoreResult[] {
  return batch.map(() => ({ ok: false as const, error }));
}
