import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import { accountingPolicy, runExactAccounting } from '../support/exact-accounting.js';

// Issue 29's exact accounting on the memory store: 64 clients over 4 limiters sharing one
// store. test/stores/redis/exact-accounting.redis.test.ts runs the same on Redis.

describe('reserve and settle: exact accounting (memory store)', () => {
  for (const seed of [1, 2, 3]) {
    it(`consumes exactly the admitted actuals, within burst + maxDebt (seed ${seed})`, async () => {
      const store = new MemoryStore();
      const clock = new ManualClock(1_700_000_000_000);
      const policies = [accountingPolicy(5_000, 50)];
      const limiters = Array.from({ length: 4 }, () => createLimiter({ store, policies, clock }));
      const r = await runExactAccounting(limiters, {
        clients: 64,
        rounds: 8,
        burst: 5_000,
        maxDebt: 50,
        seed,
        overshoot: 4,
        inOrder: true,
      });
      // The run reached both sides: plain settles, and the cap at the end.
      // About (burst + maxDebt) / the mean actual (twice the mean estimate of 25.5): ~100.
      expect(r.admitted, JSON.stringify(r)).toBeGreaterThan(50);
      expect(r.capped).toBeGreaterThan(0);
    });
  }

  it('below the cap, the units consumed are the sum of the actuals to the unit', async () => {
    const store = new MemoryStore();
    const clock = new ManualClock(1_700_000_000_000);
    const policies = [accountingPolicy(100_000, 2_000)];
    const limiters = Array.from({ length: 4 }, () => createLimiter({ store, policies, clock }));
    const r = await runExactAccounting(limiters, {
      clients: 64,
      rounds: 8,
      burst: 100_000,
      maxDebt: 2_000,
      seed: 4,
      inOrder: true,
    });
    expect(r.denied).toBe(0);
    expect(r.capped).toBe(0);
    expect(r.level).toBe(100_000 - r.actuals);
  });
});
