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

/**
 * A store whose `apply` answers some calls in process and others with a promise (a cache
 * in front of a remote store, say): each call is taken as its answer comes.
 */
class MixedStore implements Store {
  readonly inner = new MemoryStore();
  mode: 'in-process' | 'promise' | 'hang' = 'in-process';
  calls = 0;

  apply(batch: readonly StoreRequest[], options: StoreApplyOptions) {
    this.calls += 1;
    if (this.mode === 'hang') return new Promise<readonly StoreResult[]>(() => undefined);
    const results = this.inner.apply(batch, options);
    return this.mode === 'promise' ? Promise.resolve(results) : results;
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

describe('a store that answers in process for some calls and with a promise for others', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('waits on a promise under the policy timeout after answers in process, and tells the observer', async () => {
    const store = new MixedStore();
    const seen: string[] = [];
    const limiter = createLimiter({
      store,
      clock: new ManualClock(t0),
      storeObserver: {
        answered: () => seen.push('answered'),
        failed: (e, endedBy) => seen.push(`${endedBy} ${e.code}`),
      },
      policies: [
        { name: 'p', match: ['t'], rate: 1, burst: 5, failureMode: 'closed', timeout: '40ms' },
      ],
    });
    expect(limiter.checkSync({ t: 'a' }).decision).toMatchObject({ remaining: 4, path: 'store' });
    expect((await limiter.check({ t: 'a' })).decision).toMatchObject({ remaining: 3 });
    store.mode = 'hang';
    let outcome: unknown = 'still waiting';
    void limiter.check({ t: 'a' }).then((r) => (outcome = r));
    await vi.advanceTimersByTimeAsync(40);
    expect(outcome).toMatchObject({ status: 'UNAVAILABLE', decision: { path: 'fail-closed' } });
    // In-process answers are not told; the waited-on call that timed out is.
    expect(seen).toEqual(['store SLUICE_ERR_STORE_TIMEOUT']);
  });

  it('answers checkSync in process after calls answered with a promise', async () => {
    const store = new MixedStore();
    store.mode = 'promise';
    const limiter = setup(store);
    expect((await limiter.check({ t: 'a' })).decision).toMatchObject({ remaining: 4 });
    expect(() => limiter.checkSync({ t: 'a' })).toThrow(
      'Limiter.checkSync needs a store that decides synchronously (such as MemoryStore); use check()',
    );
    store.mode = 'in-process';
    expect(limiter.synchronous).toBe(true);
    // The refused checkSync was sent, and counted: 5 - 2 - 1 = 2 left.
    expect(limiter.checkSync({ t: 'a' }).decision).toMatchObject({ remaining: 2, path: 'store' });
    expect(store.calls).toBe(4); // the probe of `synchronous` included
  });
});
