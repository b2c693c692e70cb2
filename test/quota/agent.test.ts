import { describe, expect, it } from 'vitest';
import { QuotaAgent } from '../../src/quota/agent.js';
import type { Lease } from '../../src/quota/lease.js';

const lease = (over: Partial<Lease> = {}): Lease => ({
  agent: 'a',
  bucket: 'b',
  rate: 10,
  burst: 10,
  windowMs: 1_000,
  ttlMs: 3_000,
  version: 1,
  fencingToken: 5,
  issuedAtMs: 0,
  ...over,
});

describe('QuotaAgent', () => {
  it('admits a lease’s burst per window, in process, and counts the rest as denied', () => {
    const a = new QuotaAgent({ agent: 'a', bucket: 'b', fallback: { kind: 'deny' } }, 0);
    expect(a.apply(lease(), 0)).toBe('applied');
    expect(a.admit(0, 25)).toBe(10);
    expect(a.take(500, 1)).toBe('denied');
    expect(a.take(1_000, 1)).toBe('allowed'); // a new window
    expect(a.report(1_000)).toMatchObject({
      allowed: 11,
      denied: 16,
      elapsedMs: 1_000,
      heldVersion: 1,
    });
  });

  it('keeps the lease until it expires, then applies the fallback', () => {
    const staticShare = new QuotaAgent(
      { agent: 'a', bucket: 'b', fallback: { kind: 'static', rate: 2 } },
      0,
    );
    staticShare.apply(lease(), 0);
    expect(staticShare.admit(2_999, 100)).toBe(10);
    expect(staticShare.mode(3_000)).toBe('fallback');
    expect(staticShare.admit(3_000, 100)).toBe(2);
    const deny = new QuotaAgent({ agent: 'a', bucket: 'b', fallback: { kind: 'deny' } }, 0);
    deny.apply(lease(), 0);
    expect(deny.admit(3_000, 100)).toBe(0);
    const store = new QuotaAgent({ agent: 'a', bucket: 'b', fallback: { kind: 'store' } }, 0);
    store.apply(lease(), 0);
    expect(store.take(3_000, 1)).toBe('store');
    expect(store.report(3_000).heldVersion).toBeUndefined();
  });

  it("applies a static fallback per the agent's window, not an expired lease's longer one", () => {
    // A small share is sent as whole tokens per a longer fill (RLQS): 5 units per 11 s.
    // Once it expires, the fallback of 50/s is 50 per agent window (1 s), as
    // `sluice explain` bounds it, not 550 at once over the lease's 11 s window.
    const a = new QuotaAgent(
      { agent: 'a', bucket: 'b', fallback: { kind: 'static', rate: 50 }, windowMs: 1_000 },
      0,
    );
    a.apply(lease({ rate: 5 / 11, burst: 5, windowMs: 11_000, ttlMs: 3_000 }), 0);
    expect(a.admit(0, 100)).toBe(1); // paced: ⌈5/11 × 1 s⌉ per window of R
    expect(a.mode(3_000)).toBe('fallback');
    expect(a.window(3_000)).toMatchObject({ allowance: 50, resetAfterMs: 1_000 });
    expect(a.admit(3_000, 1_000)).toBe(50);
    expect(a.admit(3_999, 1_000)).toBe(0);
    expect(a.admit(4_000, 1_000)).toBe(50);
  });

  it('paces a lease over a fill longer than its window of R: at most ⌈rate × R⌉ per R, the fill at most', () => {
    // 1.8/s sent as 9 tokens per 5 s: never 9 in one second beside agents that spend
    // their whole share in it (4 × 99 + 9 = 405 of 400 in leader-pause, before).
    const a = new QuotaAgent(
      { agent: 'a', bucket: 'b', fallback: { kind: 'deny' }, windowMs: 1_000 },
      0,
    );
    a.apply(lease({ rate: 1.8, burst: 9, windowMs: 5_000, ttlMs: 60_000 }), 0);
    const perSecond = [0, 1, 2, 3, 4, 5].map((s) => a.admit(s * 1_000, 100));
    expect(perSecond).toEqual([2, 2, 2, 2, 1, 2]);
    expect(a.take(5_500, 1)).toBe('denied'); // this second's 2 are spent
    expect(a.window(5_500).resetAfterMs).toBe(500); // the window of R it is paced in
  });

  it('counts the units of a window across a change of rule to another window length', () => {
    const a = new QuotaAgent(
      { agent: 'a', bucket: 'b', fallback: { kind: 'static', rate: 50 }, windowMs: 1_000 },
      0,
    );
    // 50 on the fallback, then a lease of 5 per 11 s mid-second: nothing more in it (its
    // 11 s window holds the 50 already used), where the count restarted before (55).
    expect(a.admit(100, 100)).toBe(50);
    a.apply(lease({ rate: 5 / 11, burst: 5, windowMs: 11_000, ttlMs: 3_000 }), 500);
    expect(a.admit(600, 100)).toBe(0);
    // A lease over 5 s, then the fallback (window R) as it expires: the units of this
    // second count, and those of the earlier seconds of the 5 s window do not.
    const b = new QuotaAgent(
      { agent: 'a', bucket: 'b', fallback: { kind: 'static', rate: 20 }, windowMs: 1_000 },
      0,
    );
    b.apply(lease({ rate: 1.8, burst: 9, windowMs: 5_000, ttlMs: 2_500 }), 0);
    expect(b.admit(2_000, 100)).toBe(2);
    expect(b.admit(2_400, 100)).toBe(0);
    expect(b.admit(2_600, 100)).toBe(18); // 20 in this second, 2 of them on the lease
    // Back on a lease over 5 s: its window holds this second's 20.
    b.apply(lease({ rate: 1.8, burst: 9, windowMs: 5_000, ttlMs: 2_500, version: 2 }), 2_700);
    expect(b.admit(2_800, 100)).toBe(0);
  });

  it('counts every unit of a longer window that starts before the last window did', () => {
    // 2 on the fallback at 3.1 s, 1 on a lease over R at 4 s, then a lease of 2 per 6 s
    // (window [0 s, 6 s)) at 4.5 s: that window already holds 3, so nothing more in it.
    // Counting only the window it overlaps ([4 s, 5 s): 1) let it admit a 4th at 5 s.
    const a = new QuotaAgent(
      { agent: 'a', bucket: 'b', fallback: { kind: 'static', rate: 2 }, windowMs: 1_000 },
      0,
    );
    expect(a.admit(3_100, 2)).toBe(2);
    a.apply(lease({ rate: 1, burst: 1, windowMs: 1_000, ttlMs: 3_000 }), 3_900);
    expect(a.take(4_000, 1)).toBe('allowed');
    a.apply(lease({ rate: 1 / 3, burst: 2, windowMs: 6_000, ttlMs: 9_000, version: 2 }), 4_500);
    expect(a.window(4_500)).toMatchObject({ allowance: 2, used: 3 });
    expect(a.take(5_000, 1)).toBe('denied');
    expect(a.take(6_000, 1)).toBe('allowed'); // the next window of 6 s
  });

  it('refuses a lease from a deposed leader, and an older version from the same one', () => {
    const a = new QuotaAgent({ agent: 'a', bucket: 'b', fallback: { kind: 'deny' } }, 0);
    expect(a.apply(lease({ fencingToken: 6, version: 4 }), 0)).toBe('applied');
    expect(a.apply(lease({ fencingToken: 5, version: 9, rate: 1_000 }), 0)).toBe('stale-leader');
    expect(a.apply(lease({ fencingToken: 6, version: 4 }), 0)).toBe('stale-version');
    expect(a.apply(lease({ fencingToken: 7, version: 1 }), 0)).toBe('applied');
    expect(a.refused).toBe(2);
    expect(a.apply(lease({ agent: 'z' }), 0)).toBe('not-mine');
  });

  it('never admits more in a window than the larger of two leases that meet in it', () => {
    const a = new QuotaAgent({ agent: 'a', bucket: 'b', fallback: { kind: 'deny' } }, 0);
    a.apply(lease({ burst: 10 }), 0);
    expect(a.admit(100, 8)).toBe(8);
    a.apply(lease({ burst: 4, version: 2 }), 200);
    expect(a.admit(300, 8)).toBe(0);
    a.apply(lease({ burst: 12, version: 3 }), 400);
    expect(a.admit(500, 8)).toBe(4);
  });
});
