import type { Algorithm } from '../algorithms/algorithm.js';
import type { AlgorithmDecision } from '../core/decision.js';
import type { StoreError } from '../core/errors.js';
import type { Policy } from '../core/policy.js';

/**
 * One bucket transition a store is asked to run. Read its fields by name: the limiter
 * passes its own objects, and a field may be a getter.
 */
export interface StoreRequest {
  /** The bucket's key from `bucketKey` (stores add their own prefix). */
  readonly key: string;
  readonly algorithm: Algorithm<unknown, unknown>;
  /** Params produced by `algorithm.paramsSchema`. */
  readonly params: unknown;
  /**
   * Units to consume: a non-negative safe integer. One above the algorithm's capacity can
   * never fit: the transition answers so (see `Algorithm`), and nothing is consumed.
   */
  readonly cost: number;
  /** False for shadow policies: their denial never blocks the rest of the batch. */
  readonly enforce: boolean;
  /**
   * The bucket as a value of a key space this store handed out ({@link Store.keySpace}):
   * `key` is then `{<keyValue(value)>}:<name>`, and the store may find the bucket by
   * `value` alone without reading `key`. Set only by a caller that got `space` from this
   * same store; other stores never see it.
   */
  readonly space?: KeySpace | undefined;
  /** The raw descriptor value of the bucket in `space` (see {@link StoreRequest.space}). */
  readonly value?: string | undefined;
}

/**
 * A store's opaque handle on the buckets of one key layout (see {@link Store.keySpace}).
 * Only the store that handed it out reads it.
 */
export interface KeySpace {
  /** A brand: no value is ever read from it. */
  readonly __keySpace: never;
}

/** The outcome of one request of a batch, in request order. */
export type StoreResult =
  | { readonly ok: true; readonly decision: AlgorithmDecision }
  | { readonly ok: false; readonly error: StoreError };

export interface StoreApplyOptions {
  /** The caller's clock reading; stores that use a server clock may ignore it. */
  readonly nowMs: number;
  /** Aborts waiting for the store; the outcome of an aborted call is unknown. */
  readonly signal?: AbortSignal;
  /**
   * Idempotency key: a batch repeated with the same id (and the same first key's hash
   * tag) within the store's dedup TTL returns the first results without applying again.
   */
  readonly requestId?: string;
  /**
   * Decide each request as a batch of its own, in request order, in the same store call:
   * a denial blocks nothing else, and a later request on a key sees what an earlier one
   * consumed (envoyproxy/ratelimit's counting). Each request is atomic on its bucket; the
   * call as a whole is not. @default false (the whole batch is all-or-nothing)
   */
  readonly independent?: boolean;
}

/** Options of {@link Store.refund}. */
export interface StoreRefundOptions {
  /** The caller's clock reading; stores that use a server clock may ignore it. */
  readonly nowMs: number;
  /**
   * When the units were taken (the admitting call's `nowMs`): a window algorithm gives
   * back only while the state is still the window that held them.
   */
  readonly consumedAtMs: number;
  /**
   * Makes the refund happen once per id and first key, however often it is repeated
   * (within the store's dedup TTL): the id of the call that took the units.
   */
  readonly requestId?: string;
  readonly signal?: AbortSignal;
}

/** One bucket of a reservation to settle: the request that reserved it, and the outcome. */
export interface StoreSettleRequest extends StoreRequest {
  /** Units the reservation took (its estimate); `cost` of the request that reserved. */
  readonly cost: number;
  /** Units the call used: a non-negative safe integer. */
  readonly actual: number;
  /** Units the settle may leave the bucket below empty (the policy's `settle.maxDebt`). */
  readonly maxDebt: number;
}

/** Options of {@link Store.settle}. */
export interface StoreSettleOptions {
  /** The caller's clock reading; stores that use a server clock may ignore it. */
  readonly nowMs: number;
  /** When the reservation took its units (a window gives back only while it lasts). */
  readonly reservedAtMs: number;
  /**
   * Makes the settle happen once per id and first key, however often it is repeated: the
   * reservation's own id. Kept at least `keepMs`.
   */
  readonly requestId: string;
  /** How long, from now, a settle under `requestId` must still be recognised, in ms. */
  readonly keepMs: number;
  /** Aborts waiting for the store; the outcome of an aborted call is unknown. */
  readonly signal?: AbortSignal;
}

/** The outcome of one bucket of a settle, in request order. */
export type StoreSettleResult =
  | {
      readonly ok: true;
      /** The bucket as left (a cost-0 read). */
      readonly decision: AlgorithmDecision;
      /** Units of the excess not charged: the debt cap was reached (0 on a repeat). */
      readonly cappedUnits: number;
      /** True when a settle under the same id had already been applied: nothing was done. */
      readonly repeated: boolean;
    }
  | { readonly ok: false; readonly error: StoreError };

/**
 * What {@link Store.apply} answers: the results themselves (a store that decides in
 * process) or a promise of them (a remote store). Results are in request order.
 */
export type StoreAnswer = readonly StoreResult[] | Promise<readonly StoreResult[]>;

/**
 * Runs batches of bucket transitions atomically. A batch is all-or-nothing: when any
 * enforced request is denied, nothing in the batch is consumed; otherwise every enforced
 * request and every shadow request that fits is consumed. Requests that fit but were not
 * consumed report their current (unconsumed) remaining capacity. A request whose params
 * charge denials (`Algorithm.chargesDenied`) is charged whenever it is decided. With
 * `independent`, every request is a batch of its own. `decideBatch` (batch.ts) is the rule.
 * docs/memory-store.md ("Writing a store") describes the interface as a user implements it.
 */
export interface Store {
  /**
   * Decides `batch`. A store that decides in process returns the results; one that waits
   * on something returns a promise, which the limiter waits on under the policies'
   * timeout and the caller's deadline and cancellation. Each answer is taken as it comes:
   * nothing is remembered from one call to the next. A failure is reported per request
   * (a throw or a rejection fails every request of the batch). An empty batch has no
   * results and changes nothing. Returned results end the call: the store keeps neither
   * `batch` nor `options` past it (the limiter may reuse both); with a promise it may read
   * them until the promise settles. The limiter reads the results before it calls the
   * store again.
   */
  apply(batch: readonly StoreRequest[], options: StoreApplyOptions): StoreAnswer;
  /**
   * Optional addressing without key text: a handle on the buckets whose keys are
   * `{<keyValue(v)>}:<name>` for every value `v` (the key layout `bucketKey` gives a
   * policy named `name` with one identity key and no scope). A request may then carry
   * `space` and the raw `value` (see {@link StoreRequest.space}), and the store finds the
   * bucket without the caller building, or the store hashing, its key text; the key text
   * and (space, value) reach the same bucket. The same space for the same name for the
   * store's life; `undefined` when the store has none for that name. A store that needs
   * key text anyway (Redis) leaves this out.
   */
  keySpace?(name: string): KeySpace | undefined;
  close(): Promise<void>;
  /**
   * Gives back units that admitted requests took (`refundState`, algorithms/refund.ts:
   * never more than was taken, capacity never above its maximum). Only for units whose
   * taking is certain: after an ambiguous outcome nothing may be given back. Results in
   * request order, each the bucket as left (unconsumed). Stores without it cannot refund.
   */
  refund?(
    batch: readonly StoreRequest[],
    options: StoreRefundOptions,
  ): Promise<readonly StoreResult[]>;
  /**
   * Settles a reservation (`Algorithm.settle` per bucket: the give-back when `actual` is
   * below the estimate, the excess charged down to `maxDebt` when above), atomically per
   * bucket, once per `requestId` and first key however often it is repeated (a repeat
   * changes nothing and answers `repeated`). Results in request order. Stores without
   * it cannot settle (`Limiter.reserve` then refuses).
   */
  settle?(
    batch: readonly StoreSettleRequest[],
    options: StoreSettleOptions,
  ): Promise<readonly StoreSettleResult[]>;
  /**
   * Throws a `PolicyError` when this store cannot run the policy as configured. The
   * limiter calls it for every policy it is given, before using them.
   */
  checkPolicy?(policy: Policy): void;
  /**
   * Throws a `PolicyError` when this store cannot run the policies together (e.g. a
   * Redis Cluster store whose cross-slot strategy is `reject`). The limiter calls it with
   * every policy set it is given, after {@link Store.checkPolicy}.
   */
  checkPolicies?(policies: readonly Policy[]): void;
}
