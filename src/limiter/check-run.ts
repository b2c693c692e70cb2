import type { CheckRecorder } from '../metrics/check-recorder.js';
import type { StoreRequest, StoreResult } from '../stores/store.js';
import { combineDecisions, type CheckResult } from './check-result.js';
import { NO_OPTIONS, validOptions } from './check-input.js';
import { askedBuckets } from './check-metrics.js';
import type { CheckOptions, DecisionListener } from './limiter-options.js';
import { enterStages } from './pipeline.js';
import { release, type PreparedItem } from './policy-plan.js';
import type { Settle } from './settle.js';
import type { StageContext } from './stage.js';
import { budgetMs, isPending, MAX_TIMER_MS, type StoreGateway } from './store-gateway.js';

/**
 * One check's way after resolve (docs/design.md, "One check"): its prepared items pass
 * the stages that apply, those no stage answered go to the store through the gateway in
 * one batch, and settle turns the answers into the check's result. The limiter makes one
 * and runs every check through it.
 */
export class CheckRun {
  readonly #gateway: StoreGateway;
  readonly #settle: Settle;
  readonly #metrics: CheckRecorder | undefined;

  constructor(gateway: StoreGateway, settle: Settle, metrics: CheckRecorder | undefined) {
    this.#gateway = gateway;
    this.#settle = settle;
    this.#metrics = metrics;
  }

  /**
   * Runs a check's prepared items through the pipeline: the stages that apply (if any),
   * then the store for the items no stage answered, then settle. A store that answers in
   * process is called directly: no deadline, timer or promise is made for it. The items'
   * plans say how the check is counted (`PolicyPlan.independent`; they agree).
   */
  run(
    nowMs: number,
    items: readonly PreparedItem[],
    options: CheckOptions,
    sync: boolean,
  ): CheckResult | Promise<CheckResult> {
    if (items.length === 0) return combineDecisions([]);
    const requestId = options === NO_OPTIONS ? undefined : validOptions(options, items);
    const m = this.#metrics;
    if (m !== undefined) askedBuckets(m, items, nowMs);
    for (let i = 0; i < items.length; i++) {
      if (items[i]!.plan.stages.length > 0) {
        return this.#staged(nowMs, items, requestId, options, sync);
      }
    }
    return this.#toStore(nowMs, items, items, requestId, options, undefined);
  }

  /**
   * {@link CheckRun.run} for items some stage applies to: the stages, then the store.
   * (A method of its own: its closures would cost every check a context object.)
   */
  #staged(
    nowMs: number,
    items: readonly PreparedItem[],
    requestId: string | undefined,
    options: CheckOptions,
    sync: boolean,
  ): CheckResult | Promise<CheckResult> {
    // The caller's budget covers the whole check: the stages' store calls and the
    // check's own (see `budget`).
    const ctx: StageContext = {
      nowMs,
      gateway: this.#gateway,
      ...(requestId === undefined ? {} : { requestId }),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      ...(options.timeoutMs === undefined
        ? {}
        : { deadlineAtMs: performance.now() + options.timeoutMs }),
    };
    let entering: Promise<void> | undefined;
    try {
      entering = enterStages(items, ctx, sync);
    } catch (error) {
      this.#settle.abandon(items, ctx);
      throw error;
    }
    if (entering === undefined) return this.#afterStages(nowMs, items, requestId, options, ctx);
    return entering.then(
      () => this.#afterStages(nowMs, items, requestId, options, ctx),
      (error: unknown) => {
        this.#settle.abandon(items, ctx);
        throw error;
      },
    );
  }

  /**
   * After the stages: a denial of an enforced item by a stage decides an all-or-nothing
   * check without the store; else the items no stage answered go to the store.
   */
  #afterStages(
    nowMs: number,
    items: readonly PreparedItem[],
    requestId: string | undefined,
    options: CheckOptions,
    ctx: StageContext,
  ): CheckResult | Promise<CheckResult> {
    const independent = items[0]!.plan.independent;
    const pending: PreparedItem[] = [];
    let denied = false;
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      const answer = item.answer;
      if (answer === undefined) pending.push(item);
      else if (item.plan.enforce && !answer.allowed) denied = true;
    }
    if ((denied && !independent) || pending.length === 0) {
      return this.#settle.finish(
        nowMs,
        items,
        EMPTY,
        EMPTY_RESULTS,
        independent,
        ctx,
        options.onDecision,
      );
    }
    return this.#toStore(nowMs, items, pending, requestId, options, ctx);
  }

  /**
   * Sends `batch` (the items no stage answered) to the store through the gateway and
   * finishes the check: at once when the store answered in process, else when its
   * promise (waited on under the policies' timeout and the caller's budget) settles.
   */
  #toStore(
    nowMs: number,
    items: readonly PreparedItem[],
    batch: readonly PreparedItem[],
    requestId: string | undefined,
    options: CheckOptions,
    ctx: StageContext | undefined,
  ): CheckResult | Promise<CheckResult> {
    const independent = items[0]!.plan.independent;
    if (ctx === undefined && options.timeoutMs === undefined && options.signal === undefined) {
      // No caller budget or signal (the usual check): nothing to work out before asking.
      const answer = this.#gateway.ask(
        batch,
        nowMs,
        requestId,
        independent,
        policyTimeoutMs,
        releaseBatch,
      );
      if (isPending(answer)) {
        return this.#whenAnswered(
          nowMs,
          items,
          batch,
          answer,
          independent,
          ctx,
          options.onDecision,
        );
      }
      return this.#settle.finish(nowMs, items, batch, answer, independent, ctx, options.onDecision);
    }
    const policyMs = policyTimeoutMs(batch);
    const deadlineAtMs =
      ctx?.deadlineAtMs ??
      (options.timeoutMs === undefined ? undefined : performance.now() + options.timeoutMs);
    const timeoutMs = budgetMs(policyMs, deadlineAtMs);
    const answer = this.#gateway.call(
      batch,
      nowMs,
      requestId,
      independent,
      timeoutMs,
      // What the deadline stands for: the policies' timeout, or the caller's shorter one.
      timeoutMs < policyMs ? 'deadline' : 'store',
      options.signal,
      releaseBatch,
    );
    if (isPending(answer)) {
      return this.#whenAnswered(nowMs, items, batch, answer, independent, ctx, options.onDecision);
    }
    return this.#settle.finish(nowMs, items, batch, answer, independent, ctx, options.onDecision);
  }

  /**
   * {@link CheckRun.#toStore} for a store that answered with a promise. (A method of its
   * own: the in-process path stays small enough for V8 to inline into the check.)
   */
  #whenAnswered(
    nowMs: number,
    items: readonly PreparedItem[],
    batch: readonly PreparedItem[],
    answer: Promise<readonly StoreResult[]>,
    independent: boolean,
    ctx: StageContext | undefined,
    listener: DecisionListener | undefined,
  ): Promise<CheckResult> {
    // The check now waits: the keys are built before the caller may change its
    // descriptor, and the store may read the batch until its own call ends (even past
    // the deadline; the gateway then calls releaseBatch).
    for (let i = 0; i < items.length; i++) items[i]!.fix();
    for (let i = 0; i < batch.length; i++) batch[i]!.hold();
    return answer.then((results) =>
      this.#settle.finish(nowMs, items, batch, results, independent, ctx, listener),
    );
  }
}

/** The shortest timeout of the policies of `batch` (prepared items). */
function policyTimeoutMs(batch: readonly StoreRequest[]): number {
  let ms = MAX_TIMER_MS;
  const items = batch as readonly PreparedItem[];
  for (let i = 0; i < items.length; i++) ms = Math.min(ms, items[i]!.policy.timeoutMs);
  return ms;
}

/** What the gateway calls when a waited-on store call ends: the batch's holds go. */
function releaseBatch(batch: readonly StoreRequest[]): void {
  release(batch as readonly PreparedItem[]);
}

/** No items (a record whose shape fits one policy but not its fixed values). */
const EMPTY: readonly PreparedItem[] = Object.freeze([]);
const EMPTY_RESULTS: readonly StoreResult[] = Object.freeze([]);
