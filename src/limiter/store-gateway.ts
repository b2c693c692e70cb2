import { StoreError } from '../core/errors.js';
import type { CheckRecorder } from '../metrics/check-recorder.js';
import type {
  Store,
  StoreAnswer,
  StoreApplyOptions,
  StoreRefundOptions,
  StoreRequest,
  StoreResult,
  StoreSettleOptions,
  StoreSettleRequest,
  StoreSettleResult,
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
  /**
   * The options the next call hands the store. Reused while the store answers in
   * process; a call answered with a promise keeps its own (the store may read its signal
   * until it settles), and a fresh one takes its place.
   */
  #spare = new StoreCall();

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
   * Whether the store answers in process now: asked with an empty batch (which changes
   * nothing), every time this is read. Nothing is remembered: each call of a check is
   * taken as its answer comes.
   */
  get synchronous(): boolean {
    let answer: StoreAnswer;
    try {
      answer = this.#store.apply(NO_REQUESTS, PROBE);
    } catch {
      return false;
    }
    if (!isPending(answer)) return true;
    answer.then(undefined, ignore);
    return false;
  }

  /**
   * One store call of `batch`. The store's answer is taken as it comes, per call: results
   * (a store that decides in process) come back as they are, with no deadline, timer or
   * promise; a promise is waited on at most `timeoutMs` (what `deadlineEnds` says that
   * bound stands for) and until `signal` aborts, and never rejects (a late, thrown or
   * failed answer becomes per-request errors). Failed results come back at once when the
   * store is not asked: `signal` already aborted, or `timeoutMs` 0 or less (the caller's
   * budget is spent). `ended` runs only after an answer that was a promise, when the
   * store's own call ends (the store may read `batch` until then, even past the deadline).
   */
  call(
    batch: readonly StoreRequest[],
    nowMs: number,
    requestId: string | undefined,
    independent: boolean,
    timeoutMs: number,
    deadlineEnds: 'store' | 'deadline',
    signal: AbortSignal | undefined,
    ended?: (batch: readonly StoreRequest[]) => void,
  ): StoreAnswer {
    if (signal !== undefined || !(timeoutMs > 0)) {
      const refused = this.#notAsked(batch, timeoutMs, signal);
      if (refused !== undefined) return refused;
    }
    return this.#ask(batch, nowMs, requestId, independent, timeoutMs, deadlineEnds, signal, ended);
  }

  /**
   * {@link StoreGateway.call} for a call with no caller deadline or signal (the usual
   * check): the store is asked at once, and the policies' timeout (`timeoutOf(batch)`) is
   * worked out only if its answer is a promise to wait on.
   */
  ask(
    batch: readonly StoreRequest[],
    nowMs: number,
    requestId: string | undefined,
    independent: boolean,
    timeoutOf: (batch: readonly StoreRequest[]) => number,
    ended: (batch: readonly StoreRequest[]) => void,
  ): StoreAnswer {
    return this.#ask(batch, nowMs, requestId, independent, timeoutOf, 'store', undefined, ended);
  }

  /** Asks the store; `timeout` is the wait's length, or how to work it out from `batch`. */
  #ask(
    batch: readonly StoreRequest[],
    nowMs: number,
    requestId: string | undefined,
    independent: boolean,
    timeout: number | ((batch: readonly StoreRequest[]) => number),
    deadlineEnds: 'store' | 'deadline',
    signal: AbortSignal | undefined,
    ended: ((batch: readonly StoreRequest[]) => void) | undefined,
  ): StoreAnswer {
    const startedAt = this.#metrics === undefined ? 0 : performance.now();
    const call = this.#spare;
    let answer: StoreAnswer;
    try {
      answer = this.#store.apply(batch, call.reset(nowMs, requestId, independent));
    } catch (cause) {
      return this.#told(failedResults(batch, cause), 'store', startedAt);
    }
    if (!Array.isArray(answer)) {
      return this.#waitFresh(
        answer,
        batch,
        call,
        typeof timeout === 'number' ? timeout : timeout(batch),
        deadlineEnds,
        signal,
        ended,
        startedAt,
      );
    }
    // Decided in process: not timed (it is the check), a failure counted.
    if (this.#metrics !== undefined) inProcessCall(this.#metrics, answer);
    return answer;
  }

  /**
   * {@link StoreGateway.#wait} for an apply answered with a promise: that call keeps its
   * options (the store may read its signal until it settles), a fresh one takes its place.
   * (Apart, so the in-process path of `call` stays small enough to be inlined.)
   */
  #waitFresh(
    pending: StoreAnswer,
    batch: readonly StoreRequest[],
    call: StoreCall,
    timeoutMs: number,
    deadlineEnds: 'store' | 'deadline',
    signal: AbortSignal | undefined,
    ended: ((batch: readonly StoreRequest[]) => void) | undefined,
    startedAt: number,
  ): Promise<readonly StoreResult[]> {
    this.#spare = new StoreCall();
    return this.#wait(
      pending as PromiseLike<readonly StoreResult[]>,
      batch,
      call,
      timeoutMs,
      deadlineEnds,
      signal,
      ended,
      startedAt,
    );
  }

  /**
   * The failed results of a call the store is not asked for (`signal` already aborted,
   * or no time left: `timeoutMs` 0 or less), told as such; `undefined` when it is asked.
   */
  #notAsked(
    batch: readonly StoreRequest[],
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ): readonly StoreResult[] | undefined {
    if (signal?.aborted === true) {
      return this.#told(failedResults(batch, cancelled()), 'cancel', 0);
    }
    if (timeoutMs > 0) return undefined;
    return this.#told(
      failedResults(
        batch,
        new StoreError(
          'SLUICE_ERR_STORE_TIMEOUT',
          "the caller's budget for the check was spent before the store was asked; nothing was applied",
        ),
      ),
      'deadline',
      0,
    );
  }

  /**
   * Waits for `pending` (the store's answer to `call`) at most `timeoutMs` and until
   * `signal` aborts, and tells the observer and the metrics how it ended. Never rejects.
   */
  #wait(
    pending: PromiseLike<readonly StoreResult[]>,
    batch: readonly StoreRequest[],
    call: StoreCall,
    timeoutMs: number,
    deadlineEnds: 'store' | 'deadline',
    signal: AbortSignal | undefined,
    ended: ((batch: readonly StoreRequest[]) => void) | undefined,
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
          ended?.(batch);
          finish(results);
        },
        (cause: unknown) => {
          ended?.(batch);
          fail(cause);
        },
      );
    });
  }

  /** Tells the observer and the metrics how a call that failed or waited ended; gives the results back. */
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
      metrics?.storeCall(
        startedAt === 0 ? 0 : performance.now() - startedAt,
        failed?.error,
        endedBy,
      );
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
    const ms = budgetMs(timeoutMs, ctx.deadlineAtMs);
    const endedBy = ms < timeoutMs ? 'deadline' : 'store';
    const answer = this.call(batch, ctx.nowMs, requestId, false, ms, endedBy, ctx.signal);
    return isPending(answer) ? answer : Promise.resolve(answer);
  }

  /**
   * A store call of `batch` that is not a check (`settleThrough`): `send` is given the
   * call's abort signal and its promise is waited on like any other, under `timeoutMs`
   * and `signal`, and told to the observer and the metrics. Never rejects.
   */
  waitFor(
    batch: readonly StoreRequest[],
    send: (signal: AbortSignal) => Promise<readonly StoreResult[] | readonly StoreSettleResult[]>,
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ): Promise<readonly StoreResult[]> {
    const startedAt = this.#metrics === undefined ? 0 : performance.now();
    const call = new StoreCall();
    call.reset(0, undefined, false);
    let pending: Promise<readonly StoreResult[]>;
    try {
      pending = send(call.signal) as Promise<readonly StoreResult[]>;
    } catch (cause) {
      return Promise.resolve(this.#told(failedResults(batch, cause), 'store', startedAt));
    }
    return this.#wait(pending, batch, call, timeoutMs, 'store', signal, undefined, startedAt);
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
      pending = store.refund(batch, call as StoreRefundOptions);
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
 * `Store.settle` through the gateway: waited on at most `timeoutMs`, told to the observer
 * and the metrics like an apply. A late or failed answer is a failed result per bucket
 * (its outcome unknown: the settle may have been applied, and a retry under the same id
 * applies it at most once). `undefined` when the store cannot settle.
 */
export function settleThrough(
  gateway: StoreGateway,
  store: Store,
  batch: readonly StoreSettleRequest[],
  options: StoreSettleOptions,
  timeoutMs: number,
): Promise<readonly StoreSettleResult[]> | undefined {
  if (store.settle === undefined) return undefined;
  return gateway.waitFor(
    batch,
    (signal) => store.settle!(batch, { ...options, signal }),
    timeoutMs,
    options.signal,
  ) as Promise<readonly StoreSettleResult[]>;
}

/**
 * Whether a store's answer is to be waited on: anything but a results array (a promise
 * of this realm or another, or a thenable).
 */
export function isPending(answer: StoreAnswer): answer is Promise<readonly StoreResult[]> {
  return !Array.isArray(answer);
}

/**
 * The wait a store call gets: the policies' `policyMs`, or what is left of the caller's
 * budget (`deadlineAtMs`, on the `performance.now()` clock) when that is shorter, in
 * whole ms (rounded up, so few distinct lengths reach the deadline queues). Shorter than
 * `policyMs` means the caller's deadline bounds the wait.
 */
export function budgetMs(policyMs: number, deadlineAtMs: number | undefined): number {
  if (deadlineAtMs === undefined) return policyMs;
  const left = Math.max(0, Math.ceil(deadlineAtMs - performance.now()));
  return left < policyMs ? left : policyMs;
}

/**
 * The options of one store call. The abort signal is made only if the store reads it
 * (most calls never wait on anything abortable: an AbortController per check cost more
 * than the check); once the deadline has passed, a signal read later is already aborted.
 * Every field is always present (one shape for V8); `requestId` and `independent` are
 * `undefined` when not set.
 */
class StoreCall {
  // Starts as a non-number so that V8 keeps the field tagged: a double field would box a
  // new number on every read of a reused object.
  nowMs = null as unknown as number;
  requestId: string | undefined = undefined;
  independent: boolean | undefined = undefined;
  #controller: AbortController | undefined = undefined;
  #aborted = false;

  /** Sets the call up (a reused one included); `this`, typed as the store sees it. */
  reset(nowMs: number, requestId: string | undefined, independent: boolean): StoreApplyOptions {
    this.nowMs = nowMs;
    this.requestId = requestId;
    this.independent = independent ? true : undefined;
    // Only a call answered with a promise is ever aborted, and it is not reused; a store
    // that read the signal of one answered in process leaves a controller to drop.
    if (this.#controller !== undefined) this.#controller = undefined;
    return this as StoreApplyOptions;
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
class RefundCall extends StoreCall {
  readonly consumedAtMs: number;

  constructor(nowMs: number, requestId: string | undefined, consumedAtMs: number) {
    super();
    this.reset(nowMs, requestId, false);
    this.consumedAtMs = consumedAtMs;
  }
}

/** No requests, and their options: what {@link StoreGateway.synchronous} asks the store. */
const NO_REQUESTS: readonly StoreRequest[] = Object.freeze([]);
const PROBE: StoreApplyOptions = Object.freeze({ nowMs: 0 });

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
