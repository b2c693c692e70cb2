/**
 * What the limiter hands a store that answers asynchronously (a remote store), and what
 * it makes of the ways such a call can fail. The store here is a real MemoryStore behind
 * `apply` only, with a switch that records calls, hangs, or throws.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import type {
  Store,
  StoreApplyOptions,
  StoreRequest,
  StoreResult,
} from '../../src/stores/store.js';

const t0 = 1_700_000_000_000;

class RecordingStore implements Store {
  readonly inner = new MemoryStore();
  mode: 'up' | 'hang' | 'throw' = 'up';
  readonly calls: { batch: readonly StoreRequest[]; options: StoreApplyOptions }[] = [];

  apply(
    batch: readonly StoreRequest[],
    options: StoreApplyOptions,
  ): Promise<readonly StoreResult[]> {
    this.calls.push({ batch, options });
    if (this.mode === 'throw') throw new Error('socket closed');
    if (this.mode === 'hang') return new Promise(() => undefined);
    return Promise.resolve(this.inner.apply(batch, options));
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

function setup(store: Store) {
  return createLimiter({
    store,
    clock: new ManualClock(t0),
    policies: [
      { name: 'p', match: ['t'], rate: 1, burst: 5, failureMode: 'closed', timeout: '40ms' },
    ],
  });
}

describe('store calls', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('pass the check instant and the request id, and make no call when no policy matches', async () => {
    const store = new RecordingStore();
    const limiter = setup(store);
    await limiter.check({ t: 'a' });
    await limiter.check({ t: 'a' }, { requestId: 'r-1' });
    await limiter.check({ other: 'a' });
    expect(store.calls.map((c) => [c.batch.length, c.options.nowMs, c.options.requestId])).toEqual([
      [1, t0, undefined],
      [1, t0, 'r-1'],
    ]);
  });

  it('give a signal that is not aborted while the call may still answer, and is once the deadline passed', async () => {
    const store = new RecordingStore();
    store.mode = 'hang';
    const limiter = setup(store);
    const result = limiter.check({ t: 'a' });
    const options = store.calls[0]!.options;
    expect(options.signal!.aborted).toBe(false);
    vi.advanceTimersByTime(40);
    expect(await result).toMatchObject({ allowed: false, status: 'UNAVAILABLE' });
    expect(options.signal!.aborted).toBe(true);
    // a signal first read after the deadline is aborted too
    const late = limiter.check({ t: 'b' });
    const second = store.calls[1]!.options;
    vi.advanceTimersByTime(40);
    await late;
    expect(second.signal!.aborted).toBe(true);
  });

  it('turn a store that throws instead of rejecting into the failure mode', async () => {
    const store = new RecordingStore();
    store.mode = 'throw';
    expect(await setup(store).check({ t: 'a' })).toMatchObject({
      allowed: false,
      status: 'UNAVAILABLE',
      decision: { path: 'fail-closed' },
    });
  });
});
