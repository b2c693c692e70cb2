import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { PolicyError, StoreError } from '../../src/core/errors.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import type {
  Store,
  StoreApplyOptions,
  StoreRequest,
  StoreResult,
} from '../../src/stores/store.js';
import { beforeTimer } from '../support/before-timer.js';

/** A real MemoryStore behind a switch: `down` fails every call, `hang` never answers. */
class SwitchableStore implements Store {
  readonly inner = new MemoryStore();
  mode: 'up' | 'down' | 'hang' = 'up';
  calls = 0;
  apply(batch: readonly StoreRequest[], o: StoreApplyOptions): Promise<readonly StoreResult[]> {
    this.calls++;
    if (this.mode === 'hang') return new Promise(() => undefined);
    if (this.mode === 'down') {
      const error = new StoreError('SLUICE_ERR_STORE_UNAVAILABLE', 'connection refused');
      return Promise.resolve(batch.map(() => ({ ok: false as const, error })));
    }
    return Promise.resolve(this.inner.apply(batch, o));
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

describe('deadlines', () => {
  it('a store that never answers is cut off at the policy timeout and the failure mode decides', async () => {
    const store = new SwitchableStore();
    store.mode = 'hang';
    const limiter = createLimiter({
      store,
      policies: [
        { name: 'closed', match: ['t'], rate: 10, failureMode: 'closed', timeout: '30ms' },
        { name: 'open', match: ['u'], rate: 10, failureMode: 'open', timeout: '30ms' },
      ],
    });
    const t0 = performance.now();
    const { r, ok } = await beforeTimer(limiter.check({ t: 'a' }), 60);
    const waited = performance.now() - t0;
    expect(r).toMatchObject({
      allowed: false,
      status: 'UNAVAILABLE',
      decision: { path: 'fail-closed' },
    });
    expect(waited).toBeGreaterThanOrEqual(29);
    expect(ok).toBe(true); // cut off by its 30 ms deadline, not later
    expect(await limiter.check({ u: 'a' })).toMatchObject({
      allowed: true,
      decision: { path: 'fail-open' },
    });
  });

  it('waits no longer than the caller budget when it is shorter', async () => {
    const store = new SwitchableStore();
    store.mode = 'hang';
    const limiter = createLimiter({
      store,
      policies: [{ name: 'p', match: ['t'], rate: 10, timeout: '5s' }],
    });
    const { r, ok } = await beforeTimer(limiter.check({ t: 'a' }, { timeoutMs: 20 }), 40);
    expect(r).toMatchObject({ allowed: true, decision: { path: 'fail-open' } }); // the default mode
    expect(ok).toBe(true); // cut off by the 20 ms budget, not the 5 s policy timeout
  });

  it('the default timeout is 10ms', () => {
    const limiter = createLimiter({
      store: new MemoryStore(),
      policies: [{ name: 'p', match: ['t'], rate: 1 }],
    });
    expect(limiter.policies[0]!.timeoutMs).toBe(10);
  });
});

describe('stale mode', () => {
  const policies = [
    {
      name: 'tenant',
      match: ['t'],
      rate: 10, // 10 per second: 1 unit per 100ms
      burst: 20,
      failureMode: 'stale' as const,
      stale: { ttl: '1s', fallback: 'closed' as const },
    },
  ];

  it('spends at most the last known remaining plus the refill over the TTL, then falls back', async () => {
    const store = new SwitchableStore();
    const clock = new ManualClock(1_000_000);
    const limiter = createLimiter({ store, policies, clock });
    expect((await limiter.check({ t: 'a' }, { cost: 15 })).decisions[0]!.remaining).toBe(5); // last known: 5
    store.mode = 'down';
    let admitted = 0;
    for (let ms = 0; ms <= 1_000; ms += 10) {
      clock.set(1_000_000 + ms);
      const r = await limiter.check({ t: 'a' });
      if (r.allowed) {
        admitted++;
        expect(r.decision?.path).toBe('stale');
      }
    }
    // permitted: 5 remaining + 1,000ms * 10/s = 10 refilled = 15
    expect(admitted).toBe(15);
    clock.set(1_000_000 + 1_001); // past the TTL: the fallback (closed) applies
    expect(await limiter.check({ t: 'a' })).toMatchObject({
      allowed: false,
      status: 'UNAVAILABLE',
      decision: { path: 'fail-closed' },
    });
  });

  it('without any earlier answer for the bucket, the fallback applies at once', async () => {
    const store = new SwitchableStore();
    store.mode = 'down';
    const limiter = createLimiter({
      store,
      policies: [{ ...policies[0]!, stale: { ttl: '1s', fallback: 'open' as const } }],
    });
    expect(await limiter.check({ t: 'new' })).toMatchObject({
      allowed: true,
      decision: { path: 'fail-open' },
    });
  });

  it('rejects stale settings on another failure mode', () => {
    expect(() =>
      createLimiter({
        store: new MemoryStore(),
        policies: [{ name: 'p', match: ['t'], rate: 1, stale: { ttl: '1s' } }],
      }),
    ).toThrow(/\[0\]\.stale: only applies with failureMode: stale/);
  });
});

describe('idempotent consume (memory store)', () => {
  it('a retry with the same request id returns the first decision and charges once', async () => {
    const store = new MemoryStore();
    const clock = new ManualClock(0);
    const limiter = createLimiter({
      store,
      clock,
      policies: [{ name: 'p', match: ['t'], rate: 1, period: '1h', burst: 10 }],
    });
    const first = await limiter.check({ t: 'a' }, { cost: 4, requestId: 'req-1' });
    const retry = await limiter.check({ t: 'a' }, { cost: 4, requestId: 'req-1' });
    expect(retry).toEqual(first);
    expect((await limiter.check({ t: 'a' }, { cost: 0 })).decisions[0]!.remaining).toBe(6);
    await limiter.check({ t: 'a' }, { cost: 4, requestId: 'req-2' });
    expect((await limiter.check({ t: 'a' }, { cost: 0 })).decisions[0]!.remaining).toBe(2);
  });

  it('forgets a request id after the dedup TTL', async () => {
    const clock = new ManualClock(0);
    const limiter = createLimiter({
      store: new MemoryStore({ dedupTtlMs: 1_000 }),
      clock,
      policies: [{ name: 'p', match: ['t'], rate: 1, period: '1h', burst: 10 }],
    });
    await limiter.check({ t: 'a' }, { cost: 1, requestId: 'r' });
    clock.set(1_000);
    await limiter.check({ t: 'a' }, { cost: 1, requestId: 'r' });
    expect((await limiter.check({ t: 'a' }, { cost: 0 })).decisions[0]!.remaining).toBeCloseTo(
      8,
      3,
    );
  });

  it('rejects a bad request id with a typed error', async () => {
    const limiter = createLimiter({
      store: new MemoryStore(),
      policies: [{ name: 'p', match: ['t'], rate: 1 }],
    });
    const e = await limiter
      .check({ t: 'a' }, { requestId: 'x'.repeat(129) })
      .catch((err: unknown) => err);
    expect(e).toBeInstanceOf(PolicyError);
    expect(e).toMatchObject({ code: 'SLUICE_ERR_REQUEST_ID_INVALID' });
  });
});

describe("the caller's cancellation and the store observer", () => {
  /** Records what the limiter told its observer. */
  const observed = () => {
    const seen: string[] = [];
    return {
      seen,
      observer: {
        answered: () => seen.push('answered'),
        failed: (e: StoreError, endedBy: string) => seen.push(`${endedBy} ${e.code}`),
      },
    };
  };

  it('an abort stops the wait at once: the failure mode decides, the observer hears "cancel"', async () => {
    const store = new SwitchableStore();
    store.mode = 'hang';
    const { seen, observer } = observed();
    const limiter = createLimiter({
      store,
      storeObserver: observer,
      policies: [{ name: 'p', match: ['t'], rate: 10, failureMode: 'closed', timeout: '60s' }],
    });
    const abort = new AbortController();
    const pending = limiter.check({ t: 'a' }, { signal: abort.signal });
    abort.abort();
    expect(await pending).toMatchObject({
      status: 'UNAVAILABLE',
      decision: { path: 'fail-closed' },
    });
    expect(seen).toEqual(['cancel SLUICE_ERR_STORE_TIMEOUT']);
  });

  it('an already aborted signal never reaches the store', async () => {
    const store = new SwitchableStore();
    const { seen, observer } = observed();
    const limiter = createLimiter({
      store,
      storeObserver: observer,
      policies: [{ name: 'p', match: ['t'], rate: 10, failureMode: 'open' }],
    });
    const r = await limiter.check({ t: 'a' }, { signal: AbortSignal.abort() });
    expect(r).toMatchObject({ allowed: true, decision: { path: 'fail-open' } });
    expect(store.calls).toBe(0);
    expect(seen).toEqual(['cancel SLUICE_ERR_STORE_TIMEOUT']);
  });

  it('tells a store failure, the policy timeout and a shorter caller budget apart', async () => {
    const store = new SwitchableStore();
    const { seen, observer } = observed();
    const limiter = createLimiter({
      store,
      storeObserver: observer,
      policies: [{ name: 'p', match: ['t'], rate: 10, timeout: '20ms' }],
    });
    await limiter.check({ t: 'a' });
    store.mode = 'down';
    await limiter.check({ t: 'a' });
    store.mode = 'hang';
    await limiter.check({ t: 'a' });
    await limiter.check({ t: 'a' }, { timeoutMs: 5 });
    await limiter.check({ t: 'a' }, { timeoutMs: 50 }); // the policy's 20 ms comes first
    expect(seen).toEqual([
      'answered',
      'store SLUICE_ERR_STORE_UNAVAILABLE',
      'store SLUICE_ERR_STORE_TIMEOUT',
      'deadline SLUICE_ERR_STORE_TIMEOUT',
      'store SLUICE_ERR_STORE_TIMEOUT',
    ]);
  });
});
