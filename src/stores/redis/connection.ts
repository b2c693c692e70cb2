import { Cluster, Redis, ReplyError } from 'ioredis';
import { StoreError } from '../../core/errors.js';
import type { StoreApplyOptions } from '../store.js';
import type { RedisCallObserver, RedisScriptName } from './call-observer.js';
import { PrimaryGuard } from './primary-guard.js';
import { asRedisError } from './redis-errors.js';
import { keySlot } from './slot-groups.js';

/**
 * The store's own connection (a duplicate of the given client under settings that never
 * resend a command), with the in-flight bound, the wait for ready and the stuck watchdog.
 * On a standalone server (or one found through Sentinel) it is usable only once the
 * server has said it is a primary (see PrimaryGuard); a Cluster routes by slot to
 * primaries itself (a demoted node answers `MOVED`).
 */
export class SafeConnection {
  readonly client: Redis | Cluster;
  readonly #guard: PrimaryGuard | undefined;
  /** Found through Sentinel: a refusal is a failover in progress, not a mistake. */
  readonly #sentinel: boolean;
  readonly #maxInFlight: number;
  readonly #stuckAfterMs: number;
  #inFlight = 0;
  /** When the oldest command still without any reply was sent (performance.now). */
  #unansweredSince: number | undefined;
  /** When the connection was made but not yet ready (its ready check may be lost). */
  #connectSince: number | undefined;
  #ready: Promise<void> | undefined;
  readonly #observer: RedisCallObserver | undefined;
  /** A standalone Redis's `host:port`; undefined on a Cluster (per slot). */
  readonly #standalone: string | undefined;

  constructor(
    client: Redis | Cluster,
    maxInFlight: number,
    stuckAfterMs: number,
    roleCheckMs: number,
    observer?: RedisCallObserver,
  ) {
    refuseReplicaReads(client);
    this.client = safeConnection(client);
    this.#maxInFlight = maxInFlight;
    this.#stuckAfterMs = stuckAfterMs;
    this.#observer = observer;
    this.#standalone =
      this.client instanceof Cluster
        ? undefined
        : `${this.client.options.host ?? 'localhost'}:${this.client.options.port ?? 6379}`;
    const own = this.client;
    this.#guard = own instanceof Cluster ? undefined : new PrimaryGuard(own, roleCheckMs);
    const guard = this.#guard;
    this.#sentinel = own instanceof Redis && own.options.sentinels != null;
    if (guard !== undefined && this.#sentinel) {
      // Through Sentinel, a server that is no longer the primary means a failover the
      // connection has not seen yet: reconnect, so ioredis asks the Sentinels again.
      guard.onChange(() => {
        if (guard.refusal !== undefined) own.disconnect(true);
      });
    }
    if (own instanceof Cluster) {
      // Connect each node as soon as ioredis learns of it: with no cluster offline queue,
      // a command for a node whose connection is still being made would fail at once.
      own.on('+node', (node: Redis) => {
        if (!node.options.readOnly && node.status === 'wait') node.connect().catch(() => undefined);
      });
    }
    // Connection errors surface per call as StoreError; without a listener ioredis
    // would report each one as an unhandled 'error' event.
    own.on('error', () => undefined);
    own.on('connect', () => (this.#connectSince = performance.now()));
    own.on('ready', () => (this.#connectSince = undefined));
    own.on('close', () => {
      this.#connectSince = undefined;
      this.#unansweredSince = undefined;
    });
  }

  /** See RedisStore.ready. */
  async ready(onError: ((error: Error) => void) | undefined): Promise<void> {
    if (onError === undefined || this.#usable()) {
      await this.#whenReady(undefined);
      return;
    }
    this.client.on('error', onError);
    try {
      await this.#whenReady(undefined);
    } finally {
      this.client.off('error', onError);
    }
  }

  /** Ready, and (standalone) known to be a primary. */
  #usable(): boolean {
    return this.client.status === 'ready' && (this.#guard === undefined || this.#guard.primary);
  }

  /**
   * Resolves when the connection is usable, or rejects when `signal` aborts first, the
   * client has ended, or the server is known not to be a primary. All waiters share one
   * promise.
   */
  #whenReady(signal: AbortSignal | undefined): Promise<void> {
    const client = this.client;
    if (this.#usable()) return Promise.resolve();
    const refusal = this.#guard?.refusal;
    if (refusal !== undefined && !this.#sentinel) return Promise.reject(refusal);
    if (client.status === 'end') {
      return Promise.reject(
        new StoreError('SLUICE_ERR_STORE_UNAVAILABLE', 'Redis connection is closed', {
          reason: 'connection',
        }),
      );
    }
    this.#ready ??= new Promise<void>((resolve, reject) => {
      const guard = this.#guard;
      const settle = (error?: StoreError): void => {
        this.#ready = undefined;
        client.off('ready', onReady);
        off?.();
        if (error === undefined) resolve();
        else reject(error);
      };
      const onReady = (): void => {
        if (guard === undefined) settle();
      };
      const off = guard?.onChange(() => {
        if (guard.refusal !== undefined) {
          if (!this.#sentinel) settle(guard.refusal);
        } else if (this.#usable()) settle();
      });
      client.on('ready', onReady);
    });
    return signal === undefined
      ? this.#ready
      : Promise.race([this.#ready, aborted(signal, client)]);
  }

  /**
   * Sends one script call under the stuck watchdog: a command unanswered for
   * `stuckAfterMs` means a dead link (see #checkStuck). Its reply, or the StoreError it
   * failed with, is mapped in the same step (one promise reaction per call); the mappers
   * must not throw, so the result never rejects.
   */
  script<T>(
    send: () => Promise<unknown>,
    onReply: (reply: unknown) => T,
    onError: (error: StoreError) => T,
    name: RedisScriptName = 'applyBatches',
    /** A key of the call, naming its shard for the observer. */
    key?: string,
  ): Promise<T> {
    const sentAt = performance.now();
    this.#unansweredSince ??= sentAt;
    const observer = this.#observer;
    return send().then(
      (reply) => {
        this.#unansweredSince = undefined;
        observer?.scriptCall(name, this.shardOf(key), performance.now() - sentAt);
        return onReply(reply);
      },
      (cause: unknown) => {
        // An error reply still proves the connection works; a connection error does not.
        if (cause instanceof ReplyError) this.#unansweredSince = undefined;
        const error = asRedisError(cause);
        observer?.scriptCall(name, this.shardOf(key), performance.now() - sentAt, error);
        if (error.reason === 'readonly') this.#guard?.suspect();
        return onError(error);
      },
    );
  }

  /**
   * The node serving `key`, `host:port`: the standalone server, or on a Cluster the
   * primary of the key's slot as ioredis knows it (`unknown` without a key or slot map).
   */
  shardOf(key: string | undefined): string {
    if (this.#standalone !== undefined) return this.#standalone;
    if (key === undefined) return 'unknown';
    return (this.client as Cluster).slots[keySlot(key)]?.[0] ?? 'unknown';
  }

  /**
   * Runs `call` within the in-flight bound, once the connection is ready, and maps its
   * result with `done` (or a failure with `fail`) in the same step. Promise chains rather
   * than `await`: on the hot path (connection ready) this is one reaction per check.
   */
  call<T, U>(
    call: () => Promise<T>,
    done: (result: T) => U,
    fail: (error: StoreError) => U,
    /** Read only when the connection is not ready: its `signal` may be made on demand. */
    options: StoreApplyOptions | undefined,
    /** A key of the call, naming its shard for the observer. */
    key?: string,
  ): Promise<U> {
    this.#checkStuck();
    if (this.#inFlight >= this.#maxInFlight) {
      const error = new StoreError(
        'SLUICE_ERR_STORE_UNAVAILABLE',
        `Redis: ${this.#inFlight} calls already waiting (maxInFlight)`,
        { reason: 'overloaded' },
      );
      this.#observer?.notSent(this.shardOf(key), error);
      return Promise.resolve(fail(error));
    }
    const refusal = this.#guard?.refusal;
    if (refusal !== undefined) return Promise.resolve(fail(refusal));
    this.#inFlight++;
    const sent = this.#usable()
      ? call()
      : this.#whenReady(options?.signal ?? AbortSignal.timeout(this.#stuckAfterMs)).then(call);
    return sent.then(
      (result) => {
        this.#inFlight--;
        return done(result);
      },
      (cause: unknown) => {
        this.#inFlight--;
        // `call` sends through `script`, which never rejects: this is a call never sent.
        const error = asRedisError(cause);
        this.#observer?.notSent(this.shardOf(key), error);
        return fail(error);
      },
    );
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
    this.#guard?.close();
    let timer: NodeJS.Timeout | undefined;
    const stuck = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.#stuckAfterMs);
    });
    await Promise.race([this.client.quit().then(() => undefined), stuck]).catch(() => undefined);
    clearTimeout(timer);
    if (this.client.status !== 'end') this.client.disconnect();
  }

  /**
   * Replies come back in order, so a command unanswered for `stuckAfterMs`, or a
   * connection stuck before ready for as long, means the link is silently dead (e.g. a
   * partition that swallows packets). The socket is destroyed, not ended: a polite FIN
   * would be swallowed too. ioredis then reconnects and fails what was pending (their
   * outcome is unknown, and reported so).
   */
  #checkStuck(): void {
    // Nothing waiting (a lone check's usual case): no clock to read.
    if (this.#unansweredSince === undefined && this.#connectSince === undefined) return;
    const since = Math.min(this.#unansweredSince ?? Infinity, this.#connectSince ?? Infinity);
    if (performance.now() - since < this.#stuckAfterMs) return;
    this.#unansweredSince = undefined;
    this.#connectSince = undefined;
    if (this.client instanceof Cluster) this.client.disconnect(true);
    else this.client.stream?.destroy();
  }
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
  // No INFO ready check: PrimaryGuard's ROLE question is the ready check (one round trip,
  // not two, before the first decision), and it also covers Sentinel's role check.
  return client.duplicate({
    ...SAFE,
    enableOfflineQueue: false,
    lazyConnect: false,
    enableReadyCheck: false,
  } as never);
}

/**
 * Throws SLUICE_ERR_STORE_REPLICA when `client` is set to read from replicas (`readOnly`,
 * or a Cluster's `scaleReads` other than `master`): admission must never read a replica.
 */
function refuseReplicaReads(client: Redis | Cluster): void {
  const scaleReads = client instanceof Cluster ? client.options.scaleReads : undefined;
  const readOnly = client instanceof Cluster ? false : client.options.readOnly;
  const what =
    scaleReads !== undefined && scaleReads !== 'master'
      ? `scaleReads: ${typeof scaleReads === 'function' ? 'a function' : JSON.stringify(scaleReads)}`
      : readOnly === true
        ? 'readOnly: true'
        : undefined;
  if (what === undefined) return;
  throw new StoreError(
    'SLUICE_ERR_STORE_REPLICA',
    `RedisStore: the client is set to read from replicas (${what}); the store decides only on primaries, never on a copy that may be stale`,
    { reason: 'readonly' },
  );
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
