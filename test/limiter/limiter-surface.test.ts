/**
 * The limiter's smaller promises: what a decision carries, `synchronous` and `checkSync`,
 * the default clock, a `PlanQuery`'s check, and the message for an unknown policy.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { parsePolicies } from '../../src/config/policies.js';
import { PlanQuery } from '../../src/limiter/limiter.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import type { Store } from '../../src/stores/store.js';
import { sleep } from '../support/wait.js';

const t0 = 1_700_000_000_000;

function asyncStore(): Store {
  const inner = new MemoryStore();
  return {
    apply: (batch, o) => Promise.resolve(inner.apply(batch, o)),
    close: () => inner.close(),
  };
}

describe('Limiter surface', () => {
  it("carries a leaky bucket's delayMs in delay mode, and no delayMs field otherwise", async () => {
    const limiter = createLimiter({
      store: new MemoryStore(),
      clock: new ManualClock(t0),
      policies: [
        // 100 per 1s: a unit leaves every 10 ms
        { name: 'shaped', match: ['s'], algorithm: 'leaky-bucket', rate: 100, mode: 'delay' },
        { name: 'policed', match: ['p'], algorithm: 'leaky-bucket', rate: 100 },
      ],
    });
    for (const d of [{ s: 'a' }, [{ key: 's', value: 'a' }]]) {
      await limiter.check(d, { cost: 3 });
    }
    // 6 units queued ahead: this one waits 60 ms
    expect((await limiter.check({ s: 'a' })).decision).toStrictEqual({
      status: 'OK',
      allowed: true,
      limit: 100,
      remaining: 93,
      retryAfterMs: 0,
      resetAfterMs: 70,
      delayMs: 60,
      policy: 'shaped',
      path: 'store',
    });
    const policed = (await limiter.check({ p: 'a' })).decision!;
    expect('delayMs' in policed).toBe(false);
  });

  it('says whether the store decides synchronously, and checkSync refuses one that does not', () => {
    const policies = [{ name: 'p', match: ['t'], rate: 1 }];
    expect(createLimiter({ store: new MemoryStore(), policies }).synchronous).toBe(true);
    const remote = createLimiter({ store: asyncStore(), policies });
    expect(remote.synchronous).toBe(false);
    expect(() => remote.checkSync({ t: 'a' })).toThrow(
      'Limiter.checkSync needs a store that decides synchronously (such as MemoryStore); use check()',
    );
  });

  it('reads the system clock by default, which moves forward', async () => {
    // 1 unit per ms, burst 1: after a wait of several ms the bucket is full again
    const limiter = createLimiter({
      store: new MemoryStore(),
      policies: [{ name: 'p', match: ['t'], rate: 1_000, burst: 1 }],
    });
    expect((await limiter.check({ t: 'a' })).allowed).toBe(true);
    await sleep(20); // the behaviour: the system clock moves (>= 1 ms refills the 1 unit)
    expect((await limiter.check({ t: 'a' })).allowed).toBe(true);
  });

  it('checks a PlanQuery of given (spec, values, cost) limits as one batch', async () => {
    const limiter = createLimiter({
      store: new MemoryStore(),
      clock: new ManualClock(t0),
      policies: [],
    });
    const [a, b] = parsePolicies([
      { name: 'a', match: ['t'], rate: 1, burst: 5 },
      { name: 'b', match: ['t'], rate: 1, burst: 2 },
    ]).policies;
    const d = { t: 'x' };
    const sa = { policy: a!, name: 'a', independent: false };
    const sb = { policy: b!, name: 'b', independent: false };
    const first = await limiter.checkAt(t0, new PlanQuery().add(sa, d, 2).add(sb, d, 2));
    expect(first.decisions.map((x) => [x.policy, x.remaining])).toEqual([
      ['a', 3],
      ['b', 0],
    ]);
    // b denies, so a is not charged either
    const second = await limiter.checkAt(t0, new PlanQuery().add(sa, d, 1).add(sb, d, 1));
    expect(second).toMatchObject({ allowed: false, decision: { policy: 'b' } });
    expect((await limiter.checkAt(t0, new PlanQuery().add(sa, d, 0))).decision?.remaining).toBe(3);
    await expect(limiter.checkAt(t0, new PlanQuery().add(sa, d, 1.5))).rejects.toMatchObject({
      code: 'SLUICE_ERR_COST_INVALID',
    });
  });

  it('createLimiter puts moreStages after its own stages, and stages replaces both', () => {
    const extra = { name: 'extra', appliesTo: () => false, enter: () => undefined };
    const store = new MemoryStore();
    const own = createLimiter({ store, policies: [] }).stages.map((s) => s.name);
    const more = createLimiter({ store, policies: [], moreStages: [extra] }).stages;
    expect(more.map((s) => s.name)).toEqual([...own, 'extra']);
    expect(own.length).toBeGreaterThan(0);
    expect(
      createLimiter({ store, policies: [], stages: [extra], moreStages: [extra] }).stages,
    ).toEqual([extra]);
  });

  it('names the loaded policies, or says there are none, for an unknown policy', async () => {
    const none = createLimiter({ store: new MemoryStore(), policies: [] });
    await expect(none.check({ t: 'a' }, { policies: ['p'] })).rejects.toThrow(
      'unknown policy "p"; loaded: (none)',
    );
  });
});
