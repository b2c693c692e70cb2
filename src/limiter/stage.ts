import type { AlgorithmDecision, Decision } from '../core/decision.js';
import type { StoreError } from '../core/errors.js';
import type { Policy } from '../core/policy.js';
import type { StoreRefundOptions, StoreRequest, StoreResult } from '../stores/store.js';

/**
 * The stage seam of the check pipeline (docs/design.md, "Stages").
 *
 * A check is resolved once into items, one per matched policy. Before the store, each
 * item passes through the limiter's stages in order (local bucket, over-limit cache,
 * token batch or quota lease). A stage may answer the item itself, pass it on, or pass
 * it on with a changed cost. Items no stage answered go to the store in one batch,
 * all-or-nothing as `Store.apply` defines. When an enforced item is answered "denied"
 * by a stage, the check is denied and the store is not called. Once the check is
 * decided, every stage that saw an item is told the outcome (`settle`), so it can keep
 * or undo what `enter` took: units spent from a local reserve go back to it when another
 * policy denied the check.
 *
 * Wiring: `createLimiter({ ..., stages: [a, b] })`; `Limiter.close()` closes them. A
 * shadow policy's item a stage answers "denied" never blocks (its decision's path is
 * `shadow`). When the check's plans count independently (envoy rules counted as
 * envoyproxy/ratelimit does) each item is decided on its own: a stage's denial blocks only
 * its item. When a stage denies an enforced item
 * of an all-or-nothing check, the items no stage answered report allowed with remaining
 * 0 (the store was not asked, so nothing is known about them).
 */

/** Where a stage's answer came from; it becomes the decision's `path`. */
export type StagePath = 'local' | 'cache' | 'batch' | 'lease';

/**
 * One matched policy of a check, as the stages see it. The object is the limiter's and
 * may be reused by a later check once this one is settled: keep its fields, not it.
 */
export interface StageItem {
  readonly policy: Policy;
  /**
   * The name the check knows the policy by (its plan's: an envoy rule's public name for
   * the policy it compiles to). @default the policy's own name
   */
  readonly name?: string;
  /** The bucket's key (`bucketKey` text, without any store prefix); built on first read. */
  readonly key: string;
  /** The largest cost the policy can ever admit (`Algorithm.capacity`). */
  readonly capacity: number;
  /** Units the check asks of this policy, as passed on by the stages before this one. */
  readonly cost: number;
}

/**
 * The limiter's store gateway as a stage sees it: a stage that needs the store itself (a
 * batch reservation, a refund) calls it here, never the store directly, so its calls run
 * under the check's deadline and cancellation and reach the health observer and the
 * metrics like the check's own store call.
 */
export interface StageGateway {
  /**
   * One all-or-nothing store call of `batch` for the check `ctx`, with `requestId` for
   * the store's dedup. Waits at most `timeoutMs` and what is left of the caller's budget
   * (`ctx.deadlineAtMs`); `ctx.signal` ends the wait. Never rejects: a failure, a timeout
   * or a spent budget is a failed result per request.
   */
  apply(
    batch: readonly StoreRequest[],
    timeoutMs: number,
    ctx: StageContext,
    requestId?: string,
  ): Promise<readonly StoreResult[]>;
  /**
   * `Store.refund` through the gateway, waited on at most `timeoutMs` (the policy's
   * timeout) and until `options.signal` aborts, and told to the health observer and the
   * metrics. Never rejects: a failure or a timeout is a failed result per request.
   * `undefined` when the store cannot refund.
   */
  refund(
    batch: readonly StoreRequest[],
    options: StoreRefundOptions,
    timeoutMs: number,
  ): Promise<readonly StoreResult[]> | undefined;
}

/** What a stage knows about the check as a whole. */
export interface StageContext {
  readonly nowMs: number;
  readonly requestId?: string;
  readonly signal?: AbortSignal;
  /**
   * When the caller's budget for the whole check ends, on the `performance.now()` clock;
   * absent when the caller set none (the policies' timeouts bound each store call).
   */
  readonly deadlineAtMs?: number;
  /** The limiter's store gateway; absent only for a stage entered outside a limiter. */
  readonly gateway?: StageGateway;
}

/**
 * A stage's verdict on one item: `undefined` passes it on unchanged; `pass` passes it
 * on with another cost (a non-negative safe integer); `answer` decides it here, and no
 * later stage nor the store sees it.
 */
export type StageVerdict =
  | undefined
  | { readonly kind: 'pass'; readonly cost: number }
  | { readonly kind: 'answer'; readonly decision: AlgorithmDecision; readonly path: StagePath };

/** How the check ended for one item a stage saw. */
export interface StageOutcome {
  /**
   * Whether the check as a whole admitted the request (for plans counted independently,
   * whether this item's own decision did).
   */
  readonly admitted: boolean;
  /** The item's final decision (from a stage, the store or the policy's failure mode). */
  readonly decision: Decision;
  /** Set when the store call failed and the policy's failure mode decided. */
  readonly error?: StoreError;
}

/**
 * One stage of the pipeline. A stage is built once per limiter and outlives policy
 * reloads; `appliesTo` is asked once per policy set, so a policy no stage applies to pays
 * nothing per check.
 */
export interface Stage {
  /** Stable name, for errors and metrics (`local`, `over-limit-cache`, `batch`, `lease`). */
  readonly name: string;
  /**
   * Whether this stage takes part in checks of `policy`, which the check knows by `name`
   * (the plan's: an envoy rule's public name; absent, the policy's own).
   */
  appliesTo(policy: Policy, name?: string): boolean;
  /**
   * Before the store. A promise only when remote work is unavoidable (a batch refill, a
   * lease fetch); `Limiter.checkSync` throws a `TypeError` if it gets one.
   */
  enter(item: StageItem, ctx: StageContext): StageVerdict | Promise<StageVerdict>;
  /**
   * After the check is decided, for every item this stage entered, in stage order.
   * `verdict` is what `enter` returned for it; `undefined` too when `enter` returned no
   * verdict (a promise `checkSync` refused, or something that is not a verdict, which is
   * a `TypeError`): then the check ended with nothing admitted. Never throws.
   */
  settle?(item: StageItem, verdict: StageVerdict, outcome: StageOutcome, ctx: StageContext): void;
  /**
   * Told that a settle (`Limiter.settle`, outside any check) changed the bucket `key` of
   * `policy` at `nowMs`: `units` came back when positive (the actual was below the
   * estimate), were charged when negative. A stage that remembers something of that
   * bucket (a denial) updates it. Never throws.
   */
  reservationSettled?(policy: Policy, key: string, units: number, nowMs: number): void;
  /** Releases what the stage holds (e.g. returns unspent reserved units); idempotent. */
  close?(): Promise<void>;
}
