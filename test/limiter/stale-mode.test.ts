/**
 * The `stale` failure mode through the limiter, on every path that can record a budget
 * (a record decided by its value, a remembered frozen record, a batch of policies): once
 * the MemoryStore is closed, checks spend the last budget it reported, all-or-nothing.
 * (failure-modes.test.ts shows the refill over the TTL against a store that goes down.)
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import type { PolicyInput } from '../../src/config/policies.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';

const t0 = 1_700_000_000_000;
const stale = (name: string, burst: number, extra: Partial<PolicyInput> = {}): PolicyInput => ({
  name,
  match: ['t'],
  rate: 10, // 1 unit per 100 ms
  burst,
  failureMode: 'stale',
  stale: { ttl: '1s', fallback: 'closed' },
  ...extra,
});

function setup(policies: PolicyInput[]) {
  const store = new MemoryStore();
  const clock = new ManualClock(t0);
  return { store, clock, limiter: createLimiter({ store, clock, policies }) };
}

describe('stale mode through the limiter', () => {
  it.each([
    ['a record decided by its value', () => ({ t: 'a' })],
    ['a frozen record', () => Object.freeze({ t: 'a' })],
    ['an entry list', () => [{ key: 't', value: 'a' }]],
  ])('spends the last reported budget of %s once the store is closed', async (_name, d) => {
    const { store, clock, limiter } = setup([stale('p', 5)]);
    expect((await limiter.check(d(), { cost: 3 })).decision?.remaining).toBe(2);
    await store.close();
    expect(await limiter.check(d(), { cost: 2 })).toMatchObject({
      allowed: true,
      decision: { path: 'stale', remaining: 0 },
    });
    // 0 left: 1 unit refills in 100 ms
    expect(await limiter.check(d())).toMatchObject({
      allowed: false,
      status: 'OVER_LIMIT',
      retryAfterMs: 100,
      decision: { path: 'stale', remaining: 0 },
    });
    clock.advance(100);
    expect((await limiter.check(d())).decision?.path).toBe('stale');
    clock.set(t0 + 1_001); // past the TTL: the fallback
    expect((await limiter.check(d())).decision?.path).toBe('fail-closed');
  });

  it('spends no budget of a check that another policy denied', async () => {
    const { store, limiter } = setup([stale('wide', 10), stale('narrow', 2)]);
    await limiter.check({ t: 'a' }, { cost: 2 }); // wide 8, narrow 0
    await store.close();
    expect(await limiter.check({ t: 'a' })).toMatchObject({
      allowed: false,
      decision: { policy: 'narrow', path: 'stale' },
    });
    expect(
      (await limiter.check({ t: 'a' }, { policies: ['wide'], cost: 0 })).decision?.remaining,
    ).toBe(8);
    await limiter.check({ t: 'a' }, { policies: ['wide'], cost: 3 });
    expect(
      (await limiter.check({ t: 'a' }, { policies: ['wide'], cost: 0 })).decision?.remaining,
    ).toBe(5);
  });

  it('decides a shadow policy from its budget on the shadow path, never blocking', async () => {
    const { store, limiter } = setup([stale('p', 2, { shadow: true })]);
    await limiter.check({ t: 'a' }, { cost: 2 });
    await store.close();
    const r = await limiter.check({ t: 'a' });
    expect(r).toMatchObject({ allowed: true, status: 'OK' });
    expect(r.decisions[0]).toMatchObject({ allowed: false, path: 'shadow' });
  });

  it('falls back to open when told to, without a budget', async () => {
    const { store, limiter } = setup([stale('p', 2, { stale: { ttl: '1s', fallback: 'open' } })]);
    await store.close();
    expect(await limiter.check({ t: 'a' })).toMatchObject({
      allowed: true,
      decision: { path: 'fail-open', remaining: 0 },
    });
  });
});
