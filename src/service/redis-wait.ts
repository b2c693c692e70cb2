import type { Logger } from 'pino';
import { StoreError } from '../core/errors.js';
import type { RedisStore } from '../stores/redis/redis-store.js';

/** Options of {@link waitForRedis}. */
export interface RedisWaitOptions {
  readonly log: Logger;
  /** Called once, when the connection is ready (not after `stop()`). */
  readonly onReady: () => void;
  /**
   * Called at the first answer saying the server is a replica
   * (`SLUICE_ERR_STORE_REPLICA`); the wait goes on (the server may be promoted).
   */
  readonly onRefused?: (error: StoreError) => void;
  /** How long to wait before asking again after a refusal, in ms. @default 1_000 */
  readonly refusedRetryMs?: number;
  /** Least time between two `waiting for Redis` lines, in ms; doubles after each. @default 1_000 */
  readonly firstGapMs?: number;
  /** Most time between two `waiting for Redis` lines, in ms. @default 30_000 */
  readonly maxGapMs?: number;
}

/** A wait for the store's first connection. */
export interface RedisWait {
  /** Resolves when the connection is ready. */
  readonly ready: Promise<void>;
  /** Whether the connection is not ready yet. */
  readonly waiting: boolean;
  /** Stops logging and calling `onReady` (shutdown while waiting). */
  stop(): void;
}

/**
 * Waits for a RedisStore's (or anything with its `ready`: the quota controller's) first
 * connection and says why it is not there yet: a server
 * that is a replica is logged once (error; `onRefused`) and asked again each second; the first
 * failed attempt logs `waiting for Redis: <reason>` (warn; a refused connection, a
 * rejected password), later ones with a backoff (1 s, 2 s, 4 s … 30 s between lines, as
 * upstream spaces its retries), each with the attempts so far. ioredis keeps retrying
 * meanwhile; once connected, `Redis connected` (info) follows when there was a wait.
 */
export function waitForRedis(
  store: Pick<RedisStore, 'ready'>,
  options: RedisWaitOptions,
): RedisWait {
  const { log } = options;
  const maxGapMs = options.maxGapMs ?? 30_000;
  let gapMs = options.firstGapMs ?? 1_000;
  const startedMs = performance.now();
  let attempts = 0;
  let nextLogMs = startedMs;
  let waiting = true;
  let stopped = false;
  const onError = (error: Error): void => {
    attempts++;
    const now = performance.now();
    if (stopped || now < nextLogMs) return;
    log.warn(
      { attempts, waitedMs: Math.round(now - startedMs) },
      `waiting for Redis: ${error.message}`,
    );
    nextLogMs = now + gapMs;
    gapMs = Math.min(gapMs * 2, maxGapMs);
  };
  let refused = false;
  const attempt = (): Promise<void> =>
    store.ready({ onError }).catch(async (error: unknown) => {
      if (!(error instanceof StoreError) || error.code !== 'SLUICE_ERR_STORE_REPLICA') throw error;
      if (!refused) {
        refused = true;
        log.error({ code: error.code }, `Redis refused: ${error.message}`);
        options.onRefused?.(error);
      }
      await new Promise((resolve) => setTimeout(resolve, options.refusedRetryMs ?? 1_000));
      if (stopped) return;
      await attempt();
    });
  const ready = attempt().then(() => {
    waiting = false;
    if (stopped) return;
    if (attempts > 0) {
      log.info(
        { attempts, waitedMs: Math.round(performance.now() - startedMs) },
        'Redis connected',
      );
    }
    options.onReady();
  });
  return {
    ready,
    get waiting() {
      return waiting;
    },
    stop: () => void (stopped = true),
  };
}
