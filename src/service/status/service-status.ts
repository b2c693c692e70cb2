import type { EnvoyConfig } from '../../config/envoy/envoy-config.js';
import type { PolicySet } from '../../config/policies.js';
import type { DecisionEvent } from '../decision-event.js';
import { DecisionTally } from './decision-tally.js';
import { policiesInForce } from './policies-in-force.js';
import type {
  ConfigStatus,
  HotKeyStatus,
  LeaseStatus,
  StatusSnapshot,
  StoreStatus,
} from './status-snapshot.js';

/** A source of hot keys: the busiest identities, already hashed, busiest first. */
export type HotKeySource = () => readonly { readonly hash: string; readonly count: number }[];

/** Options of {@link ServiceStatus}. */
export interface ServiceStatusOptions {
  /** The store's state now. */
  readonly store: () => StoreStatus;
  /** Where hot keys come from, and what to call that source; absent: none tracked. */
  readonly hotKeys?: { readonly source: string; readonly top: HotKeySource };
  /** Most hot keys shown. @default 10 */
  readonly maxHotKeys?: number;
  /** Wall clock for the times shown, in ms since the epoch. @default Date.now */
  readonly wallMs?: () => number;
  /** Monotonic clock for the last-minute counts. @default performance.now */
  readonly nowMs?: () => number;
}

/** The lease section of a service that takes no leases. */
const NO_LEASES: LeaseStatus = Object.freeze({ inForce: false, allocations: Object.freeze([]) });

/**
 * Collects what the status page shows: the service tells it about config loads and
 * every decision (`observe`), and `snapshot()` puts that together with the store's
 * state and the hot keys, read at that moment.
 */
export class ServiceStatus {
  readonly #options: ServiceStatusOptions;
  readonly #wallMs: () => number;
  readonly #startedAt: string;
  readonly #tally: DecisionTally;
  #config: ConfigStatus;
  #leases: ((wallMs: number) => LeaseStatus) | undefined;

  constructor(options: ServiceStatusOptions) {
    this.#options = options;
    this.#wallMs = options.wallMs ?? Date.now;
    this.#startedAt = this.#now();
    this.#tally = new DecisionTally(options.nowMs === undefined ? {} : { nowMs: options.nowMs });
    this.#config = { loadedAt: this.#startedAt, files: [], policies: [] };
  }

  /** Records one decision; pass as the service's decision observer. */
  readonly observe = (event: DecisionEvent): void => this.#tally.record(event.decision);

  /** A configuration was loaded and is now in force. */
  configLoaded(
    files: readonly string[],
    envoy: EnvoyConfig,
    policies: PolicySet | undefined,
  ): void {
    this.#config = {
      loadedAt: this.#now(),
      files: [...files],
      policies: policiesInForce(envoy, policies),
    };
  }

  /** Where the lease section comes from (the service's lease agents). */
  leasesFrom(source: (wallMs: number) => LeaseStatus): void {
    this.#leases = source;
  }

  /** A reload was rejected; the configuration in force stays. */
  configRejected(message: string): void {
    this.#config = { ...this.#config, lastRejected: { at: this.#now(), message } };
  }

  snapshot(): StatusSnapshot {
    const hot = this.#options.hotKeys;
    const hotKeys: HotKeyStatus =
      hot === undefined
        ? { keys: [] }
        : {
            source: hot.source,
            keys: hot
              .top()
              .slice(0, this.#options.maxHotKeys ?? 10)
              .map((k) => ({ hash: k.hash, count: k.count })),
          };
    return {
      generatedAt: this.#now(),
      startedAt: this.#startedAt,
      config: this.#config,
      decisions: this.#tally.snapshot(),
      hotKeys,
      store: this.#options.store(),
      leases: this.#leases?.(this.#wallMs()) ?? NO_LEASES,
    };
  }

  #now(): string {
    return new Date(this.#wallMs()).toISOString();
  }
}
