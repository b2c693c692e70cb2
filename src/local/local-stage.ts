import { tokenBucket } from '../algorithms/token-bucket.js';
import type { Algorithm } from '../algorithms/algorithm.js';
import { PolicyError } from '../core/errors.js';
import type { Policy } from '../core/policy.js';
import type {
  Stage,
  StageContext,
  StageItem,
  StageOutcome,
  StageVerdict,
} from '../limiter/stage.js';
import { MemoryStore } from '../stores/memory/memory-store.js';
import type { StoreRequest } from '../stores/store.js';

/** Options of {@link LocalStage}. */
export interface LocalStageOptions {
  /**
   * Most local buckets held at once (a MemoryStore's bound): past it, a bucket not used
   * lately is dropped and comes back full. @default 100_000
   */
  readonly maxKeys?: number;
}

const TOKEN_BUCKET = tokenBucket as Algorithm<unknown, unknown>;

/**
 * The local stage (docs/design.md, "Stages"): a coarse in-process token bucket per bucket
 * key, `policy.local`, checked before the global store. A local denial is answered
 * `OVER_LIMIT` with path `local` and never reaches the store; an admitted item passes on
 * unchanged. The buckets live in a MemoryStore of their own running the token bucket, so
 * memory is bounded the same way (`maxKeys`).
 *
 * Units are kept only when the check as a whole is admitted: when the store, another
 * policy or the failure mode denies it, `settle` gives them back, so the local bucket
 * never spends its burst on requests that were refused anyway. When the store is down and
 * the failure mode admits (`open`, `stale`), the local bucket keeps limiting: each
 * instance admits at most `burst` at once and `rate` per period for each key.
 */
export class LocalStage implements Stage {
  readonly name = 'local';
  readonly #buckets: MemoryStore;

  constructor(options: LocalStageOptions = {}) {
    const maxKeys = options.maxKeys ?? 100_000;
    if (!Number.isSafeInteger(maxKeys) || maxKeys < 1) {
      throw new PolicyError(
        'SLUICE_ERR_LOCAL_INVALID',
        `local stage: maxKeys must be a positive whole number; got ${String(maxKeys)}`,
      );
    }
    this.#buckets = new MemoryStore({ maxKeys, maxRequestIds: 1 });
  }

  appliesTo(policy: Policy): boolean {
    return policy.local !== undefined;
  }

  enter(item: StageItem, ctx: StageContext): StageVerdict {
    const local = item.policy.local;
    if (local === undefined || item.cost === 0) return undefined;
    const [result] = this.#buckets.apply([request(item)], { nowMs: ctx.nowMs });
    if (result === undefined || !result.ok || result.decision.allowed) return undefined;
    // Only a cost above the local burst is INVALID_POLICY in the token bucket; the policy
    // check refuses such a burst, so this is OVER_LIMIT in practice. Say so either way.
    return {
      kind: 'answer',
      decision: { ...result.decision, status: 'OVER_LIMIT', allowed: false },
      path: 'local',
    };
  }

  settle(item: StageItem, verdict: StageVerdict, outcome: StageOutcome, ctx: StageContext): void {
    if (verdict !== undefined || outcome.admitted || item.cost === 0) return;
    if (item.policy.local === undefined) return;
    this.#buckets.refundSync([request(item)], { nowMs: ctx.nowMs, consumedAtMs: ctx.nowMs });
  }

  /** Local buckets held now. */
  get keys(): number {
    return this.#buckets.stats().keys;
  }

  close(): Promise<void> {
    return this.#buckets.close();
  }
}

function request(item: StageItem): StoreRequest {
  return {
    key: item.key,
    algorithm: TOKEN_BUCKET,
    params: item.policy.local,
    cost: item.cost,
    enforce: true,
  };
}
