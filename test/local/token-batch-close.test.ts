import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { TokenBatchStage } from '../../src/local/token-batch.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import type {
  Store,
  StoreApplyOptions,
  StoreRefundOptions,
  StoreRequest,
  StoreResult,
} from '../../src/stores/store.js';
import { batchPolicy as policy, globalRemaining, KEY } from './support/batch-policy.js';
import { stageCheck } from './support/stage-check.js';

/**
 * A real MemoryStore whose apply number `gated` (0-based) takes effect at once but is
 * answered only when the test calls `release()`: a reservation held in flight on demand.
 */
class GatedStore implements Store {
  #n = 0;
  #release: (() => void) | undefined;
  readonly reached: Promise<void>;
  #reached!: () => void;
  constructor(
    readonly inner: MemoryStore,
    private readonly gated: number,
  ) {
    this.reached = new Promise((resolve) => (this.#reached = resolve));
  }
  apply(batch: readonly StoreRequest[], o: StoreApplyOptions): Promise<readonly StoreResult[]> {
    const results = this.inner.apply(batch, o);
    if (this.#n++ !== this.gated) return Promise.resolve(results);
    this.#reached();
    return new Promise((resolve) => (this.#release = () => resolve(results)));
  }
  release(): void {
    this.#release!();
  }
  refund(batch: readonly StoreRequest[], o: StoreRefundOptions): Promise<readonly StoreResult[]> {
    return this.inner.refund(batch, o);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

describe('TokenBatchStage.close', () => {
  it('waits for a reservation in flight, then gives back its unspent units', async () => {
    const store = new GatedStore(new MemoryStore(), 3); // the 4th reservation: 8 units
    const stage = new TokenBatchStage({ clock: new ManualClock(0) });
    const p = policy();
    // Slow start reserves 1, 2, 4: seven checks spend them.
    for (let i = 0; i < 7; i++) await stageCheck([stage], store, p, KEY, 1, { nowMs: 0 });
    const eighth = stageCheck([stage], store, p, KEY, 1, { nowMs: 0 });
    await store.reached;
    let closed = false;
    const closing = stage.close().then(() => (closed = true));
    // close is waiting on the reservation: the 8 are taken, none given back yet.
    await Promise.resolve();
    expect(closed).toBe(false);
    expect(stage.stats.unitsReturned).toBe(0);
    expect(globalRemaining(store.inner, p, 0)).toBe(1_000 - 15);
    store.release();
    expect((await eighth).allowed).toBe(true);
    await closing;
    // The eighth check spent 1 of the 8; close gave the other 7 back.
    expect(stage.stats.unitsReturned).toBe(7);
    expect(stage.unitsHeld).toBe(0);
    expect(globalRemaining(store.inner, p, 0)).toBe(1_000 - 8);
  });

  it('gives back nothing of a reserve past its ttl (it was dropped, not spent)', async () => {
    const inner = new MemoryStore();
    const clock = new ManualClock(0);
    const stage = new TokenBatchStage({ clock });
    const p = policy();
    for (let i = 0; i < 10; i++) await stageCheck([stage], inner, p, KEY, 1, { nowMs: 0 });
    expect(stage.unitsHeld).toBe(5);
    clock.advance(1_000); // the reservation's ttl (1 s) is over
    await stage.close();
    expect(stage.stats.unitsReturned).toBe(0);
    expect(stage.unitsHeld).toBe(0);
    expect(globalRemaining(inner, p, 0)).toBe(1_000 - 15);
  });
});
