import { describe, expect, it } from 'vitest';
import type { PolicyInput } from '../../src/config/policies.js';
import { ManualClock } from '../../src/core/clock.js';
import { PolicyError, StoreError } from '../../src/core/errors.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import type { Store } from '../../src/stores/store.js';
import { settleBounds } from '../../src/local/settle-bounds.js';

// Reserve and settle through the library on the memory store (docs/costs.md). The clock is
// a ManualClock that never moves unless a test moves it, so nothing refills on its own:
// every figure below is exact.

const T0 = 1_700_000_000_000;

/** 100 tokens that refill one per hour: a test's few ms refill nothing. */
const tokens: PolicyInput = {
  name: 'model-tokens',
  match: ['tenant'],
  rate: 1,
  period: '1h',
  burst: 100,
};

function setup(policies: PolicyInput[] = [tokens], store: Store = new MemoryStore()) {
  const clock = new ManualClock(T0);
  return { clock, store, limiter: createLimiter({ store, policies, clock }) };
}

const acme = { tenant: 'acme' };

describe('Limiter.reserve and settle', () => {
  it('reserves the estimate like a check, then charges the actual: less gives back, more takes the excess', async () => {
    const { limiter } = setup();
    const r = await limiter.reserve(acme, { cost: 40 });
    expect(r.allowed).toBe(true);
    expect(r.status).toBe('OK');
    // 100 - 40 reserved.
    expect(r.decision?.remaining).toBe(60);
    const s = await r.settle(25);
    // 15 of the 40 come back: 100 - 25.
    expect(s).toMatchObject({ applied: true, cappedUnits: 0 });
    expect(s.decisions.map((d) => [d.policy, d.remaining, d.path])).toEqual([
      ['model-tokens', 75, 'store'],
    ]);
    const more = await limiter.reserve(acme, { cost: 10 });
    // 75 - 10 = 65, then 20 more than reserved: 45.
    expect((await more.settle(30)).decisions[0]!.remaining).toBe(45);
    expect((await limiter.check(acme, { cost: 0 })).decision?.remaining).toBe(45);
  });

  it('cancel gives the whole estimate back', async () => {
    const { limiter } = setup();
    const r = await limiter.reserve(acme, { cost: 70 });
    await r.cancel();
    expect((await limiter.check(acme, { cost: 0 })).decision?.remaining).toBe(100);
  });

  it('an excess may go below empty down to maxDebt (default the burst); later checks wait until it is repaid', async () => {
    const { limiter, clock } = setup([{ ...tokens, settle: { maxDebt: 30 } }]);
    const r = await limiter.reserve(acme, { cost: 90 });
    // 100 - 90 = 10 left; actual 150 wants 60 more: 50 below empty, 30 allowed, 20 capped.
    const s = await r.settle(150);
    expect(s.cappedUnits).toBe(20);
    expect(s.decisions[0]!.remaining).toBe(0);
    const denied = await limiter.check(acme, { cost: 1 });
    expect(denied.allowed).toBe(false);
    // 30 tokens of debt and 1 for the request, at one token per hour.
    expect(denied.retryAfterMs).toBe(31 * 3_600_000);
    clock.advance(31 * 3_600_000 - 1);
    expect((await limiter.check(acme, { cost: 1 })).allowed).toBe(false);
    clock.advance(1);
    expect((await limiter.check(acme, { cost: 1 })).allowed).toBe(true);
  });

  it('with the default maxDebt, the debt goes down to minus the burst', async () => {
    const { limiter } = setup();
    const r = await limiter.reserve(acme, { cost: 100 });
    // 0 left; 250 more than reserved: 100 below empty, 150 capped.
    expect((await r.settle(350)).cappedUnits).toBe(150);
    expect((await limiter.check(acme, { cost: 1 })).retryAfterMs).toBe(101 * 3_600_000);
  });

  it('settles once per reservation id: a retry, or a settle from another limiter on the same store, applies nothing more', async () => {
    const store = new MemoryStore();
    const { limiter } = setup([tokens], store);
    const other = setup([tokens], store).limiter;
    const r = await limiter.reserve(acme, { cost: 50 });
    expect((await other.settle(r.id, 10)).applied).toBe(true);
    const again = await limiter.settle(r.id, 10);
    expect(again.applied).toBe(false);
    expect(again.decisions[0]!.remaining).toBe(90);
    // A retry with another actual is still a retry: the first settle stands.
    expect((await r.settle(0)).applied).toBe(false);
    expect((await limiter.check(acme, { cost: 0 })).decision?.remaining).toBe(90);
  });

  it('a settle whose reply was lost rejects with the StoreError; settling again applies it once', async () => {
    const inner = new MemoryStore();
    let loseNext = true;
    const lossy: Store = {
      apply: (b, o) => inner.apply(b, o),
      close: () => inner.close(),
      settle: async (b, o) => {
        const results = await inner.settle(b, o);
        if (!loseNext) return results;
        loseNext = false;
        throw new StoreError('SLUICE_ERR_STORE_TIMEOUT', 'the reply was lost');
      },
    };
    const { limiter } = setup([tokens], lossy);
    const r = await limiter.reserve(acme, { cost: 60 });
    await expect(r.settle(100)).rejects.toMatchObject({ code: 'SLUICE_ERR_STORE_TIMEOUT' });
    // It was applied: 100 - 60, then 40 more.
    const retried = await r.settle(100);
    expect(retried.applied).toBe(false);
    expect(retried.decisions[0]!.remaining).toBe(0);
    // 0 left exactly, no debt: a one-unit check waits one hour.
    expect((await limiter.check(acme, { cost: 1 })).retryAfterMs).toBe(3_600_000);
  });

  it('a reservation never settled counts at its estimate; after its ttl it can no longer be settled', async () => {
    const { limiter, clock } = setup();
    const r = await limiter.reserve(acme, { cost: 30, ttlMs: 5_000 });
    // 1 ms past its ttl (at its ttl it still settles: the next test).
    clock.advance(5_001);
    const err = await r.settle(0).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PolicyError);
    expect((err as PolicyError).code).toBe('SLUICE_ERR_RESERVATION_EXPIRED');
    // Still charged at its estimate (5,001 ms refill 1.39e-3 tokens at one per hour).
    expect((await limiter.check(acme, { cost: 0 })).decision?.remaining).toBeCloseTo(
      70 + 5_001 / 3_600_000,
      9,
    );
  });

  it('settles at exactly its ttl', async () => {
    const { limiter, clock } = setup();
    const r = await limiter.reserve(acme, { cost: 30, ttlMs: 5_000 });
    clock.advance(5_000);
    expect((await r.settle(0)).applied).toBe(true);
  });

  it('a denied reservation charged nothing, and settling it does nothing', async () => {
    const { limiter } = setup();
    await limiter.check(acme, { cost: 95 });
    const r = await limiter.reserve(acme, { cost: 10 });
    expect(r.allowed).toBe(false);
    expect(r.status).toBe('OVER_LIMIT');
    expect(await r.settle(50)).toEqual({ applied: false, cappedUnits: 0, decisions: [] });
    expect((await limiter.check(acme, { cost: 0 })).decision?.remaining).toBe(5);
  });

  it('settles every policy the reservation charged, each in its own bucket', async () => {
    const perMinute: PolicyInput = {
      name: 'model-window',
      match: ['tenant'],
      algorithm: 'fixed-window',
      limit: 500,
      window: '1m',
    };
    const { limiter } = setup([tokens, perMinute]);
    const r = await limiter.reserve(acme, { cost: 20 });
    const s = await r.settle(5);
    expect(s.decisions.map((d) => [d.policy, d.remaining])).toEqual([
      ['model-tokens', 95],
      ['model-window', 495],
    ]);
  });

  it('refuses bad input with typed errors', async () => {
    const { limiter } = setup();
    const code = (p: Promise<unknown>) =>
      p.then(
        () => 'resolved',
        (e: PolicyError) => e.code,
      );
    expect(await code(limiter.reserve(acme, { cost: -1 }))).toBe('SLUICE_ERR_COST_INVALID');
    expect(await code(limiter.reserve(acme, { cost: 101 }))).toBe(
      'SLUICE_ERR_COST_EXCEEDS_CAPACITY',
    );
    expect(await code(limiter.reserve(acme, { cost: 1, ttlMs: 0 }))).toBe(
      'SLUICE_ERR_RESERVATION_INVALID',
    );
    expect(await code(limiter.settle('nonsense', 1))).toBe('SLUICE_ERR_RESERVATION_INVALID');
    expect(await code(limiter.settle('rsv1.e30', 1))).toBe('SLUICE_ERR_RESERVATION_INVALID');
    const r = await limiter.reserve(acme, { cost: 1 });
    expect(await code(r.settle(1.5))).toBe('SLUICE_ERR_COST_INVALID');
    // The policy is gone after a reload.
    limiter.setPolicies([{ ...tokens, name: 'renamed' }]);
    expect(await code(r.settle(1))).toBe('SLUICE_ERR_RESERVATION_INVALID');
    const bare: Store = { apply: (b, o) => new MemoryStore().apply(b, o), close: async () => {} };
    expect(await code(setup([tokens], bare).limiter.reserve(acme, { cost: 1 }))).toBe(
      'SLUICE_ERR_RESERVE_UNSUPPORTED',
    );
  });

  it('a reserve retried with its requestId charges once and settles once', async () => {
    const { limiter } = setup();
    const a = await limiter.reserve(acme, { cost: 40, requestId: 'call-1' });
    const b = await limiter.reserve(acme, { cost: 40, requestId: 'call-1' });
    expect(b.decision?.remaining).toBe(60);
    expect((await a.settle(10)).applied).toBe(true);
    expect((await b.settle(10)).applied).toBe(false);
    expect((await limiter.check(acme, { cost: 0 })).decision?.remaining).toBe(90);
  });

  it('a settle that gives back makes the over-limit cache forget its denial of the bucket', async () => {
    const store = new MemoryStore();
    const clock = new ManualClock(T0);
    const limiter = createLimiter({
      store,
      policies: [tokens],
      clock,
      overLimitCacheBytes: 10_000,
    });
    const r = await limiter.reserve(acme, { cost: 100 });
    const denied = await limiter.check(acme, { cost: 50 });
    expect(denied.decision?.path).toBe('store');
    // Remembered: the next denial comes from the cache, without the store.
    expect((await limiter.check(acme, { cost: 50 })).decision?.path).toBe('cache');
    await r.settle(10);
    const after = await limiter.check(acme, { cost: 50 });
    expect(after).toMatchObject({ allowed: true });
    expect(after.decision?.path).toBe('store');
  });

  it('a shadow policy the reservation charged is settled too', async () => {
    const shadow: PolicyInput = { ...tokens, name: 'shadow-tokens', shadow: true, burst: 50 };
    const { limiter } = setup([tokens, shadow]);
    const r = await limiter.reserve(acme, { cost: 40 });
    const s = await r.settle(5);
    expect(s.decisions.map((d) => [d.policy, d.remaining])).toEqual([
      ['model-tokens', 95],
      ['shadow-tokens', 45],
    ]);
  });

  it("a settle changes only its own buckets: another tenant's is untouched", async () => {
    const { limiter } = setup();
    await limiter.check({ tenant: 'globex' }, { cost: 30 });
    const r = await limiter.reserve(acme, { cost: 50 });
    await r.settle(200);
    expect((await limiter.check({ tenant: 'globex' }, { cost: 0 })).decision?.remaining).toBe(70);
  });

  it('measures what sluice explain prints: unsettled reservations hold at most the capacity, under-estimates pass at most maxDebt beyond it', async () => {
    const { limiter } = setup([{ ...tokens, settle: { maxDebt: 30 } }]);
    const bounds = settleBounds(limiter.policies[0]!)!;
    expect(bounds).toEqual({ heldByReservations: 100, debtBound: 30 });
    // Reservations never settled, until the bucket denies: 14 of 7 (98), then 2 of 1, then none.
    const held: { r: Awaited<ReturnType<typeof limiter.reserve>>; cost: number }[] = [];
    for (const cost of [...Array<number>(15).fill(7), 1, 1, 1]) {
      const r = await limiter.reserve(acme, { cost });
      if (r.allowed) held.push({ r, cost });
    }
    expect(held.reduce((sum, h) => sum + h.cost, 0)).toBe(bounds.heldByReservations);
    // Each used 10 more than it reserved: 160 over, 30 let through, 130 capped.
    let capped = 0;
    for (const { r, cost } of held) capped += (await r.settle(cost + 10)).cappedUnits;
    expect(capped).toBe(16 * 10 - bounds.debtBound);
    // 30 below empty, at one token per hour, and 1 for the request.
    const denied = await limiter.check(acme, { cost: 1 });
    expect(denied.retryAfterMs).toBe((bounds.debtBound + 1) * 3_600_000);
  });
});
