import { StoreError } from '../core/errors.js';
import type { CheckRecorder } from '../metrics/check-recorder.js';
import type {
  Store,
  StoreAnswer,
  StoreApplyOptions,
  StoreRefundOptions,
  StoreRequest,
  StoreResult,
} from '../stores/store.js';
import { inProcessCall } from './check-metrics.js';
import { Deadlines, type Deadline } from './deadlines.js';
import type { StageContext, StageGateway } from './stage.js';

/** What ended a failed store call. */
export type StoreCallEnd =
  /** The store failed, or did not answer within the policies' timeout. */
  | 'store'
  /** The caller's `timeoutMs`, shorter than the policies' timeout, ran out first. */
  | 'deadline'
  /** The caller's `signal` aborted the wait. */
  | 'cancel';

/**
 * Told how each store call ended, once per call (not per policy): for health tracking
 * and failure counters. Calls decided in process (MemoryStore) are not reported.
 */
export interface StoreCallObserver {
  /** The store answered: every request of the batch was decided. */
  answered(): void;
  /**
   * The call gave no decision; the policies' failure modes decided. With `endedBy`
   * `deadline` or `cancel` nothing is known about the store itself.
   */
  failed(error: StoreError, endedBy: StoreCallEnd): void;
}

/** The longest delay a Node timer takes (2^31-1 ms, ~24.8 days); past it, it fires at 1ms. */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * The one way to a store that is waited on (docs/design.md: the store gateway): the
 * limiter's check calls and the stages' own calls (batch reservations, refunds) alike
 * run under a deadline and the caller's cancellation, and are told to the health
 * observer and the metrics. One promise and one pooled deadline entry per call.
 */
export class StoreGateway implements StageGateway {
  readonly #store: Store;
  readonly #observer: StoreCallObserver | undefined;
  readonly #metrics: CheckRecorder | undefined;
  readonly #deadlines = new Deadlines();
  /** Whether the store answers in process; `undefined` until it has answered once. */
  #inProcess: boolean | undefined = undefined;

  constructor(
    store: Store,
    observer: StoreCallObserver | undefined,
    metrics: CheckRecorder | undefined,
  ) {
    this.#store = store;
    this.#observer = observer;
    this.#metrics = metrics;
  }

  /**
   * Whether the store decides in process (its `apply` answers with the results, as
   * MemoryStore's does, not a promise). Learnt from its answers; asked with an empty
   * batch (which changes nothing) when no call has told yet.
   */
  get synchronous(): boolean {
    if (this.#inProcess === undefined) {
      let answer: StoreAnswer | undefined;
      try {
        answer = this.#store.apply(NO_REQUESTS, { nowMs: 0 });
      } catch {
        answer = undefined;
      }
      if (answer instanceof Promise) answer.then(undefined, ignore);
      this.#inProcess = answer !== undefined && !(answer instanceof Promise);
    }
    return this.#inProcess;
  }

  /** Whether the store has answered a call with a promise (no probe). */
  get answersWithPromise(): boolean {
    return this.#inProcess === false;
  }

  /** Whether the store's calls so far were answered in process (no probe). */
  get answersInProcess(): boolean {
    return this.#inProcess === true;
  }

  /**
   * One call to a store that answers in process (see {@link StoreGateway.answersInProcess}):
   * no deadline, timer or promise. A throw becomes per-request errors; a failure is
   * counted in the metrics (an in-process call is not timed: it is the check). A store
   * that answers with a promise after all is waited on without a deadline this once.
   */
  inProcess(batch: readonly StoreRequest[], options: StoreApplyOptions): StoreAnswer {
    let answer: StoreAnswer;
    try {
      answer = this.#store.apply(batch, options);
    } catch (cause) {
      answer = failedResults(batch, cause);
    }
    if (answer instanceof Promise) {
      this.#inProcess = false;
      return answer.then(undefined, (cause: unknown) => failedResults(batch, cause));
    }
    const m = this.#metrics;
    if (m !== undefined) inProcessCall(m, answer);
    return answer;
  }

  /**
   * One store call of `batch`, waited on at most `timeoutMs` (what `deadlineEnds` says
   * that bound stands for) and until `signal` aborts. Never rejects: a late, thrown or
   * failed answer becomes per-request errors. `timeoutMs` 0 or less: the caller's budget
   * is already spent, and the store is not called. `onEnded` runs when the store's own
   * call ends (the store may read `batch` until then, even past the deadline). A store
   * that answers in process gets no deadline: its results come back as they are, told
   * as an in-process call.
   */
  call(
    batch: readonly StoreRequest[],
    nowMs: number,
    requestId: string | undefined,
    independent: boolean,
    timeoutMs: number,
    deadlineEnds: 'store' | 'deadline',
    signal: AbortSignal | undefined,
    onEnded?: () => void,
  ): StoreAnswer {
    const metrics = this.#metrics;
    const startedAt = metrics === undefined ? 0 : performance.now();
    if (signal?.aborted === true) {
      onEnded?.();
      return Promise.resolve(this.#told(failedResults(batch, cancelled()), 'cancel', startedAt));
    }
    if (!(timeoutMs > 0)) {
      onEnded?.();
      return Promise.resolve(
        this.#told(
          failedResults(
            batch,
            new StoreError(
              'SLUICE_ERR_STORE_TIMEOUT',
              "the caller's budget for the check was spent before the store was asked; nothing was applied",
            ),
          ),
          'deadline',
          startedAt,
        ),
      );
    }
    const call = new StoreCall(nowMs, requestId, independent);
    let answer: StoreAnswer;
    try {
      answer = this.#store.apply(batch, call);
    } catch (cause) {
      onEnded?.();
      return Promise.resolve(this.#told(failedResults(batch, cause), 'store', startedAt));
    }
    if (!(answer instanceof Promise)) {
      this.#inProcess ??= true;
      onEnded?.();
      if (metrics !== undefined) inProcessCall(metrics, answer);
      return answer;
    }
    this.#inProcess = false;
    return this.#wait(answer, batch, call, timeoutMs, deadlineEnds, signal, onEnded, startedAt);
  }

  /**
   * Waits for `pending` (the store's answer to `call`) at most `timeoutMs` and until
   * `signal` aborts, and tells the observer and the metrics how it ended. Never rejects.
   */
  #wait(
    pending: Promise<readonly StoreResult[]>,
    batch: readonly StoreRequest[],
    call: StoreCall,
    timeoutMs: number,
    deadlineEnds: 'store' | 'deadline',
    signal: AbortSignal | undefined,
    onEnded: (() => void) | undefined,
    startedAt: number,
  ): Promise<readonly StoreResult[]> {
    return new Promise<readonly StoreResult[]>((resolve) => {
      let deadline: Deadline | undefined;
      let done = false;
      const finish = (results: readonly StoreResult[], endedBy: StoreCallEnd = 'store'): void => {
        if (done) return;
        done = true;
        deadline?.clear();
        signal?.removeEventListener('abort', onAbort);
        resolve(this.#told(results, endedBy, startedAt));
      };
      const fail = (cause: unknown, endedBy: StoreCallEnd = 'store'): void => {
        finish(failedResults(batch, cause), endedBy);
      };
      const onAbort = (): void => {
        call.abort();
        fail(cancelled(), 'cancel');
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      if (Number.isFinite(timeoutMs)) {
        deadline = this.#deadlines.add(timeoutMs, () => {
          call.abort();
          fail(
            new StoreError(
              'SLUICE_ERR_STORE_TIMEOUT',
              deadlineEnds === 'deadline'
                ? `store did not answer within the caller's ${timeoutMs}ms; the request may or may not have been applied`
                : `store did not answer within ${timeoutMs}ms; the request may or may not have been applied`,
            ),
            deadlineEnds,
          );
        });
      }
      pending.then(
        (results) => {
          onEnded?.();
          finish(results);
        },
        (cause: unknown) => {
          onEnded?.();
          fail(cause);
        },
      );
    });
  }

  /** Tells the observer and the metrics how a waited-on call ended; gives the results back. */
  #told(
    results: readonly StoreResult[],
    endedBy: StoreCallEnd,
    startedAt: number,
  ): readonly StoreResult[] {
    const observer = this.#observer;
    const metrics = this.#metrics;
    if (observer !== undefined || metrics !== undefined) {
      const failed = results.find((r) => !r.ok);
      if (failed === undefined) observer?.answered();
      else observer?.failed(failed.error, endedBy);
      metrics?.storeCall(performance.now() - startedAt, failed?.error, endedBy);
    }
    return results;
  }

  /**
   * A stage's own store call for the check `ctx` (see {@link StageGateway.apply}): under
   * the shorter of `timeoutMs` and what is left of the caller's budget.
   */
  apply(
    batch: readonly StoreRequest[],
    timeoutMs: number,
    ctx: StageContext,
    requestId?: string,
  ): Promise<readonly StoreResult[]> {
    const { ms, endedBy } = budget(timeoutMs, ctx.deadlineAtMs);
    const answer = this.call(batch, ctx.nowMs, requestId, false, ms, endedBy, ctx.signal);
    return answer instanceof Promise ? answer : Promise.resolve(answer);
  }

  /**
   * `Store.refund` through the gateway (see {@link StageGateway.refund}): waited on at
   * most `timeoutMs` and until `options.signal` aborts, told to the observer and the
   * metrics like an apply. `undefined` when the store cannot refund.
   */
  refund(
    batch: readonly StoreRequest[],
    options: StoreRefundOptions,
    timeoutMs: number,
  ): Promise<readonly StoreResult[]> | undefined {
    const store = this.#store;
    if (store.refund === undefined) return undefined;
    const startedAt = this.#metrics === undefined ? 0 : performance.now();
    const call = new RefundCall(options.nowMs, options.requestId, options.consumedAtMs);
    let pending: Promise<readonly StoreResult[]>;
    try {
      pending = store.refund(batch, call);
    } catch (cause) {
      return Promise.resolve(this.#told(failedResults(batch, cause), 'store', startedAt));
    }
    return this.#wait(
      pending,
      batch,
      call,
      timeoutMs,
      'store',
      options.signal,
      undefined,
      startedAt,
    );
  }
}

/**
 * The wait a store call gets: the policies' `policyMs`, or what is left of the caller's
 * budget (`deadlineAtMs`, on the `performance.now()` clock) when that is shorter, in
 * whole ms (rounded up, so few distinct lengths reach the deadline queues).
 */
export function budget(
  policyMs: number,
  deadlineAtMs: number | undefined,
): { ms: number; endedBy: 'store' | 'deadline' } {
  if (deadlineAtMs === undefined) return { ms: policyMs, endedBy: 'store' };
  const left = Math.max(0, Math.ceil(deadlineAtMs - performance.now()));
  return left < policyMs ? { ms: left, endedBy: 'deadline' } : { ms: policyMs, endedBy: 'store' };
}

/**
 * The options of one store call. The abort signal is made only if the store reads it
 * (most calls never wait on anything abortable: an AbortController per check cost more
 * than the check); once the deadline has passed, a signal read later is already aborted.
 */
class StoreCall implements StoreApplyOptions {
  readonly nowMs: number;
  readonly requestId?: string;
  readonly independent?: boolean;
  #controller: AbortController | undefined;
  #aborted = false;

  constructor(nowMs: number, requestId: string | undefined, independent: boolean) {
    this.nowMs = nowMs;
    if (requestId !== undefined) this.requestId = requestId;
    if (independent) this.independent = true;
  }

  get signal(): AbortSignal {
    this.#controller ??= new AbortController();
    if (this.#aborted) this.#controller.abort();
    return this.#controller.signal;
  }

  abort(): void {
    this.#aborted = true;
    this.#controller?.abort();
  }
}

/** The options of one refund call: a store call's, with when the units were taken. */
class RefundCall extends StoreCall implements StoreRefundOptions {
  readonly consumedAtMs: number;

  constructor(nowMs: number, requestId: string | undefined, consumedAtMs: number) {
    super(nowMs, requestId, false);
    this.consumedAtMs = consumedAtMs;
  }
}

/** No requests: what {@link StoreGateway.synchronous} asks a store that has not answered yet. */
const NO_REQUESTS: readonly StoreRequest[] = Object.freeze([]);

function ignore(): void {}

/** The error of a call the caller cancelled. */
function cancelled(): StoreError {
  return new StoreError(
    'SLUICE_ERR_STORE_TIMEOUT',
    'the caller cancelled the check before the store answered; the request may or may not have been applied',
  );
}

/** Every request of `batch` failed with `cause` (as a `StoreError`). */
export function failedResults(batch: readonly unknown[], cause: unknown): StoreResult[] {
  const error = asStoreError(cause);
  return batch.map(() => ({ ok: false as const, error }));
}

export function asStoreError(cause: unknown): StoreError {
  return cause instanceof StoreError
    ? cause
    : new StoreError(
        'SLUICE_ERR_STORE_UNAVAILABLE',
        `store failed: ${(cause as Error)?.message ?? String(cause)}`,
        { cause },
      );
}
