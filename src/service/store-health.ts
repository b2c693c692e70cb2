import type { Logger } from 'pino';
import type { StoreError, StoreFailureReason } from '../core/errors.js';
import type { StoreCallEnd, StoreCallObserver } from '../limiter/limiter.js';
import type { ShardStatus } from './status/status-snapshot.js';

/** A failed store call's reason as counted: the store's, or what the caller did. */
export type CountedFailureReason = StoreFailureReason | 'deadline' | 'cancelled';

/** Options of {@link StoreHealth}. */
export interface StoreHealthOptions {
  readonly log: Logger;
  /**
   * Whether the store's connection is up now. A timeout while it is down counts as
   * `connection`: calls wait for a reconnect within their deadline, so a dead Redis
   * shows as timeouts. @default always up
   */
  readonly connected?: () => boolean;
  /** @default performance.now */
  readonly nowMs?: () => number;
  /** Wall clock for the status page's "since", in ms since the epoch. @default Date.now */
  readonly wallMs?: () => number;
}

interface Failing {
  readonly sinceMs: number;
  readonly sinceWallMs: number;
  readonly reasons: Partial<Record<CountedFailureReason, number>>;
  failures: number;
}

/**
 * Watches the limiter's store calls and logs the store's state changes, not each call
 * (the limiter's metrics count every failed call in `sluice_store_errors_total`). The
 * first failure logs `store failing: <reason>` (error level, `state: "unhealthy"`); the
 * next answered call logs `store healthy again` (info, `state: "healthy"`) with the
 * failures counted meanwhile, by reason. The store is one unit here: its calls do not say
 * which shard failed, so neither do the lines.
 * A call ended by its caller (deadline, cancellation) is counted but says nothing
 * about the store, so it changes no state.
 */
export class StoreHealth implements StoreCallObserver {
  readonly #log: Logger;
  readonly #connected: () => boolean;
  readonly #nowMs: () => number;
  readonly #wallMs: () => number;
  #failing: Failing | undefined;

  constructor(options: StoreHealthOptions) {
    this.#log = options.log;
    this.#connected = options.connected ?? (() => true);
    this.#nowMs = options.nowMs ?? (() => performance.now());
    this.#wallMs = options.wallMs ?? Date.now;
  }

  /** Whether the last store call that says anything about the store failed. */
  get failing(): boolean {
    return this.#failing !== undefined;
  }

  /** The store's state for the status page, as one shard named `name`. */
  status(name: string): ShardStatus {
    const failing = this.#failing;
    const connected = this.#connected();
    return failing === undefined
      ? { name, state: 'healthy', connected }
      : {
          name,
          state: 'unhealthy',
          connected,
          since: new Date(failing.sinceWallMs).toISOString(),
          failures: { ...failing.reasons },
        };
  }

  answered(): void {
    const failing = this.#failing;
    if (failing === undefined) return;
    this.#failing = undefined;
    this.#log.info(
      {
        state: 'healthy',
        failures: failing.failures,
        reasons: failing.reasons,
        failingMs: Math.round(this.#nowMs() - failing.sinceMs),
      },
      'store healthy again',
    );
  }

  failed(error: StoreError, endedBy: StoreCallEnd): void {
    const reason: CountedFailureReason =
      endedBy === 'cancel'
        ? 'cancelled'
        : endedBy === 'deadline'
          ? 'deadline'
          : error.reason === 'timeout' && !this.#connected()
            ? 'connection'
            : error.reason;
    if (endedBy !== 'store') return;
    let failing = this.#failing;
    if (failing === undefined) {
      this.#failing = failing = {
        sinceMs: this.#nowMs(),
        sinceWallMs: this.#wallMs(),
        reasons: {},
        failures: 0,
      };
      this.#log.error(
        { state: 'unhealthy', reason, code: error.code, error: error.message },
        `store failing: ${reason}`,
      );
    }
    failing.failures++;
    failing.reasons[reason] = (failing.reasons[reason] ?? 0) + 1;
  }
}
