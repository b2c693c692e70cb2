import { systemClock, type Clock } from '../core/clock.js';
import {
  parseOverloadConfig,
  type OverloadConfig,
  type OverloadInput,
} from '../config/overload-schema.js';
import { AimdLimit } from './aimd-limit.js';
import { BoundedQueue } from './bounded-queue.js';
import { CircuitBreaker, type BreakerState } from './circuit-breaker.js';
import {
  ConcurrencyLimiter,
  type ConcurrencyPermit,
  type PermitOutcome,
} from './concurrency-limiter.js';
import { DEFAULT_CRITICALITY, type Criticality } from '../core/criticality.js';
import { FixedLimit } from './fixed-limit.js';
import { GradientLimit } from './gradient-limit.js';
import type { LimitAlgorithm } from './limit-algorithm.js';
import { LoadShedder } from './load-shedder.js';
import { OVERLOAD_CODES, OverloadError, type OverloadReason } from './overload-error.js';
import { ADMISSION_OUTCOMES, type AdmissionOutcome, type OverloadRecorder } from './recorder.js';
import { systemTimer, type Timer } from './timer.js';

/** Options of {@link createAdmissionBoundary}: the settings (as in a policy file) and the wiring. */
export interface AdmissionBoundaryOptions extends OverloadInput {
  /** @default systemClock */
  readonly clock?: Clock;
  /** Runs queue timeouts. @default setTimeout (unref'd) */
  readonly timer?: Timer;
  /** Receives every outcome (metrics). @default none */
  readonly recorder?: OverloadRecorder;
  /** A limit algorithm of your own, instead of `limit`. @default built from `limit` */
  readonly algorithm?: LimitAlgorithm;
}

/** What one request brings to the boundary. */
export interface AdmitOptions {
  /** @default 'CRITICAL' */
  readonly criticality?: Criticality;
  /**
   * When the caller stops waiting for the answer, absolute ms on the boundary's clock. A
   * request that would have to queue past it is refused at once. @default none
   */
  readonly deadlineMs?: number;
}

/** Admitted: do the work, then release the permit once with how it ended. */
export interface AdmissionPermit {
  readonly criticality: Criticality;
  /** Time spent queued, in ms. */
  readonly waitedMs: number;
  /** Frees the slot; the outcome feeds the limit and the breaker. Later calls do nothing. */
  release(outcome: PermitOutcome): void;
}

/** The boundary's answer. */
export type Admission =
  | { readonly admitted: true; readonly permit: AdmissionPermit }
  | {
      readonly admitted: false;
      readonly reason: OverloadReason;
      readonly code: (typeof OVERLOAD_CODES)[OverloadReason];
      /** How long the caller should wait before retrying, in ms. */
      readonly retryAfterMs: number;
    };

/** A snapshot of the boundary. */
export interface AdmissionStats {
  readonly limit: number;
  readonly inflight: number;
  readonly queued: number;
  readonly breaker: BreakerState | 'none';
  /** Outcomes since creation. */
  readonly outcomes: Readonly<Record<AdmissionOutcome, number>>;
}

function algorithmOf(config: OverloadConfig): LimitAlgorithm {
  const l = config.limit;
  switch (l.algorithm) {
    case 'fixed':
      return new FixedLimit(l.limit);
    case 'aimd':
      return new AimdLimit({ ...l, timeoutMs: l.timeout });
    case 'gradient':
      return new GradientLimit({ ...l, minRttPeriodMs: l.minRttPeriod });
  }
}

const REASON_TEXT: Readonly<Record<OverloadReason, string>> = {
  shed: 'shed: no capacity for this criticality',
  'queue-full': 'the queue is full',
  'queue-timeout': 'waited the longest queue wait',
  deadline: 'the deadline cannot be met',
  'breaker-open': 'the circuit breaker is open',
};

/**
 * The admission boundary: concurrency limit (fixed, AIMD or gradient) with a ceiling per
 * criticality → bounded queue → circuit breaker → admit or refuse. Rate limiting comes
 * before it (`sluice/http` runs the rate check first).
 *
 * Guarantees:
 * - in flight never exceeds the limit at the moment of admission: slots are taken in one
 *   synchronous step, and a freed slot is handed to the next waiter in the same step
 *   that frees it, so a newcomer cannot take it in between;
 * - a waiting request leaves the queue at its `maxWait`, at once if its deadline cannot
 *   be met, or when a more critical request needs its place;
 * - a refusal costs no queueing when the breaker is open: it is checked before queueing.
 */
export class AdmissionBoundary {
  readonly config: OverloadConfig;
  readonly limiter: ConcurrencyLimiter;
  readonly breaker: CircuitBreaker | undefined;
  readonly #queue: BoundedQueue<ConcurrencyPermit> | undefined;
  readonly #clock: Clock;
  readonly #recorder: OverloadRecorder | undefined;
  readonly #outcomes = Object.fromEntries(ADMISSION_OUTCOMES.map((o) => [o, 0])) as Record<
    AdmissionOutcome,
    number
  >;

  /** Throws a `PolicyError` (`SLUICE_ERR_OVERLOAD_CONFIG_INVALID`) naming every bad option. */
  constructor(options: AdmissionBoundaryOptions = {}) {
    const { clock, timer, recorder, algorithm, ...settings } = options;
    this.config = parseOverloadConfig(settings);
    this.#clock = clock ?? systemClock;
    this.#recorder = recorder;
    this.limiter = new ConcurrencyLimiter({
      algorithm: algorithm ?? algorithmOf(this.config),
      shedder: new LoadShedder(this.config.shares),
      clock: this.#clock,
    });
    const q = this.config.queue;
    this.#queue =
      q === false
        ? undefined
        : new BoundedQueue({
            maxSize: q.size,
            maxWaitMs: q.maxWait,
            order: q.order,
            timer: timer ?? systemTimer,
          });
    const b = this.config.breaker;
    this.breaker =
      b === false
        ? undefined
        : new CircuitBreaker({
            windowMs: b.window,
            buckets: b.buckets,
            minimumCalls: b.minimumCalls,
            ...(b.errorRatio === undefined ? {} : { errorRatio: b.errorRatio }),
            ...(b.slowCallRatio === undefined ? {} : { slowCallRatio: b.slowCallRatio }),
            ...(b.slowCall === undefined ? {} : { slowCallMs: b.slowCall }),
            ...(b.errorCount === undefined ? {} : { errorCount: b.errorCount }),
            openMs: b.open,
            probes: b.probes,
            probeLeaseMs: b.probeLease,
            clock: this.#clock,
          });
    this.limiter.onRelease = this.#dispatch;
  }

  /** Hands freed slots to waiting requests, most critical first. */
  #dispatch = (): void => {
    const queue = this.#queue;
    if (queue === undefined) return;
    for (let c = queue.peek(); c !== undefined; c = queue.peek()) {
      const permit = this.limiter.tryAcquire(c);
      if (permit === undefined) return;
      queue.grantNext(permit);
    }
  };

  stats(): AdmissionStats {
    return {
      limit: this.limiter.limit,
      inflight: this.limiter.inflight,
      queued: this.#queue?.size ?? 0,
      breaker: this.breaker?.state ?? 'none',
      outcomes: { ...this.#outcomes },
    };
  }

  #record(outcome: AdmissionOutcome, c: Criticality, waitedMs: number): void {
    this.#outcomes[outcome]++;
    try {
      this.#recorder?.admission(outcome, c, waitedMs);
    } catch {
      // A recorder must never change the answer.
    }
  }

  #refuse(
    reason: OverloadReason,
    c: Criticality,
    waitedMs: number,
    retryAfterMs?: number,
  ): Admission {
    this.#record(reason, c, waitedMs);
    return {
      admitted: false,
      reason,
      code: OVERLOAD_CODES[reason],
      retryAfterMs: retryAfterMs ?? this.config.retryAfter,
    };
  }

  /** Decides one request; resolves once it is admitted or refused. Never rejects. */
  async admit(options: AdmitOptions = {}): Promise<Admission> {
    const c = options.criticality ?? DEFAULT_CRITICALITY;
    const startMs = this.#clock.nowMs();
    const breaker = this.breaker;
    if (breaker !== undefined && breaker.state === 'open' && breaker.retryAfterMs() > 0) {
      return this.#refuse('breaker-open', c, 0, breaker.retryAfterMs());
    }
    let permit = this.limiter.tryAcquire(c);
    if (permit === undefined) {
      const queue = this.#queue;
      if (queue === undefined) return this.#refuse('shed', c, 0);
      const meanMs = this.limiter.meanRttMs ?? 0;
      const estimateMs = ((queue.ahead(c) + 1) * meanMs) / this.limiter.ceiling(c);
      const r = await queue.enqueue(c, startMs, options.deadlineMs ?? Infinity, estimateMs);
      if (typeof r === 'string') return this.#refuse(r, c, this.#clock.nowMs() - startMs);
      permit = r;
    }
    const waitedMs = this.#clock.nowMs() - startMs;
    const call = breaker?.tryAcquire();
    if (breaker !== undefined && call === undefined) {
      permit.release('ignore');
      return this.#refuse('breaker-open', c, waitedMs, breaker.retryAfterMs());
    }
    this.#record('admitted', c, waitedMs);
    const held = permit;
    const recorder = this.#recorder;
    let released = false;
    return {
      admitted: true,
      permit: {
        criticality: c,
        waitedMs,
        release: (outcome) => {
          if (released) return;
          released = true;
          held.release(outcome);
          call?.record(
            outcome === 'success' ? 'success' : outcome === 'ignore' ? 'ignore' : 'failure',
          );
          try {
            recorder?.completion?.(outcome, c, this.#clock.nowMs() - held.startMs);
          } catch {
            // A recorder must never change the answer.
          }
        },
      },
    };
  }

  /**
   * Runs `fn` inside the boundary. Refusals reject with an {@link OverloadError} (code
   * per reason, `retryAfterMs`) and `fn` never runs. `fn`'s result releases the permit as
   * `success`; a throw as `classify(error)` (default: an `OverloadError` from a dependency
   * is `dropped`, anything else `failure`).
   */
  async run<T>(
    fn: () => Promise<T>,
    options: AdmitOptions & { readonly classify?: (error: unknown) => PermitOutcome } = {},
  ): Promise<T> {
    const a = await this.admit(options);
    if (!a.admitted) {
      throw new OverloadError(a.code, `overloaded: ${REASON_TEXT[a.reason]}`, a.retryAfterMs);
    }
    try {
      const out = await fn();
      a.permit.release('success');
      return out;
    } catch (error) {
      const classify =
        options.classify ?? ((e: unknown) => (e instanceof OverloadError ? 'dropped' : 'failure'));
      a.permit.release(classify(error));
      throw error;
    }
  }
}

/** Creates an {@link AdmissionBoundary}; see its options for defaults. */
export function createAdmissionBoundary(options: AdmissionBoundaryOptions = {}): AdmissionBoundary {
  return new AdmissionBoundary(options);
}
