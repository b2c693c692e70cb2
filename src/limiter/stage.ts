import type { AlgorithmDecision, Decision } from '../core/decision.js';
import type { StoreError } from '../core/errors.js';
import type { Policy } from '../core/policy.js';

/**
 * The stage seam of the check pipeline (DESIGN.md §5, stages 5 and 6).
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
 * `shadow`). With `Limiter.decideAt(..., { independent: true })` each item is decided on
 * its own: a stage's denial blocks only its item. When a stage denies an enforced item
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
  /** The bucket's key (`bucketKey` text, without any store prefix); built on first read. */
  readonly key: string;
  /** The largest cost the policy can ever admit (`Algorithm.capacity`). */
  readonly capacity: number;
  /** Units the check asks of this policy, as passed on by the stages before this one. */
  readonly cost: number;
}

/** What a stage knows about the check as a whole. */
export interface StageContext {
  readonly nowMs: number;
  readonly requestId?: string;
  readonly signal?: AbortSignal;
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
   * Whether the check as a whole admitted the request (with `independent`, whether this
   * item's own decision did).
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
  /** Whether this stage takes part in checks of `policy`. */
  appliesTo(policy: Policy): boolean;
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
  /** Releases what the stage holds (e.g. returns unspent reserved units); idempotent. */
  close?(): Promise<void>;
}
