import { StoreError } from '../../../src/core/errors.js';
import { MemoryStore } from '../../../src/stores/memory/memory-store.js';
import type {
  Store,
  StoreApplyOptions,
  StoreRefundOptions,
  StoreRequest,
  StoreResult,
} from '../../../src/stores/store.js';

/**
 * A real MemoryStore whose applies, while `holding`, wait until the test calls
 * `release()` (then they take effect, or fail when `release(true)`): reservations held
 * in flight on demand, with no timer. `costs` lists every apply's cost, `refunds` every
 * refund's. With `hang`, held applies are never released by the test (the caller's
 * timeout ends them); `close()` lets them go.
 */
export class HeldStore implements Store {
  readonly inner = new MemoryStore();
  holding = false;
  readonly costs: number[] = [];
  readonly refunds: number[] = [];
  #held: (() => void)[] = [];
  #failed: (() => void)[] = [];

  apply(batch: readonly StoreRequest[], o: StoreApplyOptions): Promise<readonly StoreResult[]> {
    this.costs.push(batch[0]!.cost);
    if (!this.holding) return Promise.resolve(this.inner.apply(batch, o));
    return new Promise((resolve) => {
      this.#held.push(() => resolve(this.inner.apply(batch, o)));
      this.#failed.push(() =>
        resolve(
          batch.map(() => ({
            ok: false as const,
            error: new StoreError('SLUICE_ERR_STORE_UNAVAILABLE', 'held store: failed on purpose'),
          })),
        ),
      );
    });
  }

  /** Answers the held applies (failed ones when `fail`) and stops holding. */
  release(fail = false): void {
    const answers = fail ? this.#failed : this.#held;
    this.#held = [];
    this.#failed = [];
    this.holding = false;
    for (const answer of answers) answer();
  }

  refund(batch: readonly StoreRequest[], o: StoreRefundOptions): Promise<readonly StoreResult[]> {
    this.refunds.push(batch[0]!.cost);
    return this.inner.refund(batch, o);
  }

  async close(): Promise<void> {
    this.release(true);
    await this.inner.close();
  }
}
