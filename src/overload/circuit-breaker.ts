import { systemClock, type Clock } from '../core/clock.js';
import { PolicyError } from '../core/errors.js';
import { WindowCounter } from './window-counter.js';

/** `closed`: calls pass; `open`: calls are refused; `half-open`: a few probes pass. */
export type BreakerState = 'closed' | 'open' | 'half-open';

/** How a call through the breaker ended; `ignore` says nothing about the dependency. */
export type BreakerOutcome = 'success' | 'failure' | 'ignore';

/** Options of {@link CircuitBreaker}; every field has a default. */
export interface CircuitBreakerOptions {
  /** The sliding window the ratios and counts are taken over, in ms. @default 10_000 */
  readonly windowMs?: number;
  /** Slices of the window. @default 10 */
  readonly buckets?: number;
  /** No rule trips before this many calls in the window. @default 20 */
  readonly minimumCalls?: number;
  /**
   * Opens when failures / calls ≥ this, in (0, 1]. @default 0.5 when no rule is set, else off
   */
  readonly errorRatio?: number;
  /** Opens when slow calls / calls ≥ this, in (0, 1]; needs `slowCallMs`. @default off */
  readonly slowCallRatio?: number;
  /** A call that takes this long or longer is slow, in ms. @default off */
  readonly slowCallMs?: number;
  /** Opens when failures in the window ≥ this. @default off */
  readonly errorCount?: number;
  /** How long it stays open before probing, in ms. @default 5_000 */
  readonly openMs?: number;
  /** Probes admitted while half-open; that many successes close it. @default 3 */
  readonly probes?: number;
  /**
   * A probe that reports nothing for this long gives its slot to another probe, in ms, so
   * an abandoned probe cannot hold the breaker half-open. @default 10_000
   */
  readonly probeLeaseMs?: number;
  /** @default systemClock */
  readonly clock?: Clock;
}

/** The right to make one call; report how it ended once (later reports are ignored). */
export interface BreakerPermit {
  /** This call is a half-open probe. */
  readonly probe: boolean;
  /** Reports the call's end; its duration is measured on the breaker's clock. */
  record(outcome: BreakerOutcome): void;
}

const FIELDS = ['calls', 'failures', 'slow'] as const;

/**
 * A circuit breaker over a sliding time window. Closed, it opens when, with at least
 * `minimumCalls` calls in the window, any configured rule holds: error ratio, slow-call
 * ratio, or error count. Open, it refuses calls for `openMs`, then turns half-open and
 * admits up to `probes` probes at once; `probes` successes close it, one failure or slow
 * probe opens it again.
 *
 * Every probe holds a lease of `probeLeaseMs`. A probe that never reports (its caller
 * crashed, or a later stage refused it: Sentinel #1638 stays half-open forever) loses
 * its lease, and another probe takes the slot. A report from a call admitted before the
 * last change of state is ignored, so a slow call from before the breaker opened cannot
 * count as a probe.
 */
export class CircuitBreaker {
  readonly #clock: Clock;
  readonly #window: WindowCounter<(typeof FIELDS)[number]>;
  readonly #minimumCalls: number;
  readonly #errorRatio: number | undefined;
  readonly #slowCallRatio: number | undefined;
  readonly #slowCallMs: number;
  readonly #errorCount: number | undefined;
  readonly #openMs: number;
  readonly #probes: number;
  readonly #leaseMs: number;
  #state: BreakerState = 'closed';
  #generation = 0;
  #openedAtMs = 0;
  #successes = 0;
  #nextLease = 0;
  readonly #leases = new Map<number, number>();

  /**
   * Throws a `PolicyError` (`SLUICE_ERR_OVERLOAD_CONFIG_INVALID`) for `slowCallRatio`
   * without `slowCallMs`; the boundary's config schema checks every range.
   */
  constructor(options: CircuitBreakerOptions = {}) {
    this.#clock = options.clock ?? systemClock;
    this.#window = new WindowCounter(FIELDS, options.windowMs ?? 10_000, options.buckets ?? 10);
    this.#minimumCalls = options.minimumCalls ?? 20;
    const anyRule =
      options.errorRatio !== undefined ||
      options.slowCallRatio !== undefined ||
      options.errorCount !== undefined;
    this.#errorRatio = anyRule ? options.errorRatio : 0.5;
    this.#slowCallRatio = options.slowCallRatio;
    if (this.#slowCallRatio !== undefined && options.slowCallMs === undefined) {
      throw new PolicyError(
        'SLUICE_ERR_OVERLOAD_CONFIG_INVALID',
        'circuit breaker: slowCallRatio needs slowCallMs',
      );
    }
    this.#slowCallMs = options.slowCallMs ?? Infinity;
    this.#errorCount = options.errorCount;
    this.#openMs = options.openMs ?? 5_000;
    this.#probes = options.probes ?? 3;
    this.#leaseMs = options.probeLeaseMs ?? 10_000;
  }

  /** The state as of the last call (an open breaker turns half-open on the next `tryAcquire`). */
  get state(): BreakerState {
    return this.#state;
  }

  /** Probe leases held now. */
  get probesInFlight(): number {
    return this.#leases.size;
  }

  /** A permit, or `undefined` when the breaker refuses the call. */
  tryAcquire(): BreakerPermit | undefined {
    const nowMs = this.#clock.nowMs();
    if (this.#state === 'open') {
      if (nowMs < this.#openedAtMs + this.#openMs) return undefined;
      this.#transition('half-open');
    }
    if (this.#state === 'closed') return this.#closedPermit(nowMs);
    for (const [id, expiresMs] of this.#leases) if (expiresMs <= nowMs) this.#leases.delete(id);
    if (this.#leases.size + this.#successes >= this.#probes) return undefined;
    return this.#probePermit(nowMs);
  }

  /** How long until a refused call could pass, in ms (0 when it could now). */
  retryAfterMs(): number {
    const nowMs = this.#clock.nowMs();
    if (this.#state === 'open') return Math.max(0, this.#openedAtMs + this.#openMs - nowMs);
    if (this.#state === 'closed' || this.#leases.size + this.#successes < this.#probes) return 0;
    let first = Infinity;
    for (const expiresMs of this.#leases.values()) first = Math.min(first, expiresMs);
    return Math.max(0, first - nowMs);
  }

  #transition(to: BreakerState): void {
    this.#state = to;
    this.#generation++;
    this.#leases.clear();
    this.#successes = 0;
    if (to === 'open') this.#openedAtMs = this.#clock.nowMs();
    if (to === 'closed') this.#window.reset();
  }

  #closedPermit(startMs: number): BreakerPermit {
    const generation = this.#generation;
    let done = false;
    return {
      probe: false,
      record: (outcome) => {
        if (done) return;
        done = true;
        if (outcome === 'ignore' || generation !== this.#generation) return;
        const nowMs = this.#clock.nowMs();
        this.#window.add(nowMs, 'calls');
        if (outcome === 'failure') this.#window.add(nowMs, 'failures');
        if (nowMs - startMs >= this.#slowCallMs) this.#window.add(nowMs, 'slow');
        if (this.#trips(nowMs)) this.#transition('open');
      },
    };
  }

  #trips(nowMs: number): boolean {
    const t = this.#window.totals(nowMs);
    if (t.calls < this.#minimumCalls) return false;
    return (
      (this.#errorRatio !== undefined && t.failures >= this.#errorRatio * t.calls) ||
      (this.#slowCallRatio !== undefined && t.slow >= this.#slowCallRatio * t.calls) ||
      (this.#errorCount !== undefined && t.failures >= this.#errorCount)
    );
  }

  #probePermit(startMs: number): BreakerPermit {
    const generation = this.#generation;
    const id = this.#nextLease++;
    this.#leases.set(id, startMs + this.#leaseMs);
    let done = false;
    return {
      probe: true,
      record: (outcome) => {
        if (done) return;
        done = true;
        const nowMs = this.#clock.nowMs();
        const expiresMs = this.#leases.get(id);
        if (generation !== this.#generation || expiresMs === undefined) return;
        this.#leases.delete(id);
        // An expired lease's slot may already serve another probe: its report is stale.
        if (outcome === 'ignore' || expiresMs <= nowMs) return;
        const slow = nowMs - startMs >= this.#slowCallMs;
        if (outcome === 'failure' || slow) {
          this.#transition('open');
        } else if (++this.#successes >= this.#probes) {
          this.#transition('closed');
        }
      },
    };
  }
}
