import { Redis, type Cluster } from 'ioredis';
import { PolicyError, StoreError } from '../../core/errors.js';
import type { Policy } from '../../core/policy.js';
import type { Store, StoreApplyOptions, StoreRequest, StoreResult } from '../store.js';
import { LUA_ALGORITHM_CODE, luaParams } from './lua-args.js';
import { decodeApplyBatch } from './reply.js';
import { applyBatchScript } from './scripts.js';

export interface RedisStoreOptions {
  /** An ioredis client (standalone). The store never closes a client it was given. */
  readonly client: Redis | Cluster;
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
}

/**
 * Runs every algorithm in Redis as one atomic Lua step per batch (applyBatch.lua):
 * read, refill, check, consume, write, expire, return. All keys of a batch must share a
 * hash slot (they do when the policies share an identity). See docs/redis.md.
 */
export class RedisStore implements Store {
  readonly #client: Redis | Cluster;
  readonly #ownsClient: boolean;
  readonly #prefix: string;
  readonly #clientClock: boolean;
  readonly #maxSlidingLogLimit: number;
  readonly #apply: ReturnType<typeof applyBatchScript>;
  #closed = false;

  constructor(options: RedisStoreOptions & { /** @internal */ ownsClient?: boolean }) {
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
    this.#client = options.client;
    this.#ownsClient = options.ownsClient ?? false;
    this.#prefix = prefix;
    this.#clientClock = options.clock === 'client';
    this.#maxSlidingLogLimit = max;
    this.#apply = applyBatchScript(options.client);
  }

  /** A store on a new standalone client for `url` (`redis://host:port/db`); close() quits it. */
  static connect(url: string, options: Omit<RedisStoreOptions, 'client'> = {}): RedisStore {
    return new RedisStore({ ...options, client: new Redis(url), ownsClient: true });
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
    const args: (string | number)[] = [this.#clientClock ? String(options.nowMs) : ''];
    for (const r of batch) {
      args.push(
        LUA_ALGORITHM_CODE[r.algorithm.kind],
        r.cost,
        r.enforce ? 1 : 0,
        r.algorithm.ttlMs(r.params),
      );
      args.push(...luaParams(r.algorithm.kind, r.params as Readonly<Record<string, unknown>>));
    }
    let reply: unknown;
    try {
      reply = await this.#apply(keys, args);
    } catch (cause) {
      return failAll(
        batch,
        new StoreError('SLUICE_ERR_STORE_UNAVAILABLE', `Redis: ${(cause as Error).message}`, {
          cause,
        }),
      );
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

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#ownsClient) await this.#client.quit().catch(() => undefined);
  }
}

function failAll(batch: readonly StoreRequest[], error: StoreError): StoreResult[] {
  return batch.map(() => ({ ok: false as const, error }));
}
