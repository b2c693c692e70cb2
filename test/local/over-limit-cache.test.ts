import { describe, expect, it } from 'vitest';
import { parsePolicies } from '../../src/config/policies.js';
import type { Decision } from '../../src/core/decision.js';
import { PolicyError } from '../../src/core/errors.js';
import type { Policy } from '../../src/core/policy.js';
import type { StageItem } from '../../src/limiter/stage.js';
import { entryBytes, OverLimitCache } from '../../src/local/over-limit-cache.js';

const p: Policy = parsePolicies([{ name: 'api', match: ['tenant'], rate: 10, burst: 10 }])
  .policies[0]!;
const item = (key: string, cost = 1): StageItem => ({ policy: p, key, capacity: 10, cost });
const denied = (extra: Partial<Decision> = {}): Decision => ({
  policy: 'api',
  path: 'store',
  status: 'OVER_LIMIT',
  allowed: false,
  limit: 10,
  remaining: 0,
  retryAfterMs: 100,
  resetAfterMs: 1_000,
  ...extra,
});
const hit = { limit: 10, remaining: 0, retryAfterMs: 100, resetAfterMs: 1_000 };

describe('OverLimitCache', () => {
  it('refuses a bad maxBytes with SLUICE_ERR_LOCAL_INVALID naming it; 1 is allowed', () => {
    for (const maxBytes of [0, -1, 1.5, Number.NaN]) {
      let err: unknown;
      try {
        new OverLimitCache({ maxBytes });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(PolicyError);
      expect((err as PolicyError).code).toBe('SLUICE_ERR_LOCAL_INVALID');
      expect((err as PolicyError).message).toBe(
        `over-limit cache: maxBytes must be a positive whole number; got ${String(maxBytes)}`,
      );
    }
    // 1 byte holds no entry (each takes more), but it is a valid bound.
    const tiny = new OverLimitCache({ maxBytes: 1 });
    tiny.remember('k', 1, 0, hit);
    expect([tiny.size, tiny.bytes]).toEqual([0, 0]);
  });

  it('estimates an entry as a fixed overhead plus 2 bytes per UTF-16 unit of its key', () => {
    expect(entryBytes('ab') - entryBytes('')).toBe(4);
    expect(entryBytes('')).toBeGreaterThan(0);
  });

  it('holds exactly maxBytes worth of entries, the oldest going first', () => {
    const one = entryBytes('k1');
    const cache = new OverLimitCache({ maxBytes: 2 * one });
    cache.remember('k1', 1, 0, hit);
    cache.remember('k2', 1, 0, hit);
    expect([cache.size, cache.bytes]).toEqual([2, 2 * one]);
    cache.remember('k3', 1, 0, hit); // k1 goes
    expect([cache.size, cache.bytes]).toEqual([2, 2 * one]);
    expect(cache.enter(item('k1'), { nowMs: 1 })).toBeUndefined();
    expect(cache.enter(item('k3'), { nowMs: 1 })?.kind).toBe('answer');
    expect(cache.enter(item('k2'), { nowMs: 1 })?.kind).toBe('answer');
    // Exactly one entry's bytes: one entry fits.
    const single = new OverLimitCache({ maxBytes: one });
    single.remember('k1', 1, 0, hit);
    expect([single.size, single.bytes]).toEqual([1, one]);
  });

  it('counts a remembered key once, and frees its bytes when its retry time has passed', () => {
    const cache = new OverLimitCache({ maxBytes: 10_000 });
    cache.remember('k1', 3, 0, hit);
    cache.remember('k1', 2, 0, hit); // a smaller cost replaces it
    expect([cache.size, cache.bytes]).toEqual([1, entryBytes('k1')]);
    expect(cache.enter(item('k1', 1), { nowMs: 50 })).toBeUndefined(); // below the cost: store
    expect(cache.enter(item('k1', 2), { nowMs: 50 })).toEqual({
      kind: 'answer',
      decision: {
        status: 'OVER_LIMIT',
        allowed: false,
        limit: 10,
        remaining: 0,
        retryAfterMs: 50,
        resetAfterMs: 950,
      },
      path: 'cache',
    });
    expect(cache.enter(item('k1', 2), { nowMs: 100 })).toBeUndefined();
    expect([cache.size, cache.bytes]).toEqual([0, 0]);
  });

  it("remembers only the store's own OVER_LIMIT with a finite retry time above 0", () => {
    const cache = new OverLimitCache({ maxBytes: 10_000 });
    const outcome = (d: Decision) => ({ admitted: false, decision: d });
    const ctx = { nowMs: 0 };
    cache.settle(item('answered'), { kind: 'pass', cost: 1 }, outcome(denied()), ctx);
    cache.settle(item('local'), undefined, outcome(denied({ path: 'local' })), ctx);
    cache.settle(item('allowed'), undefined, outcome(denied({ allowed: true, status: 'OK' })), ctx);
    cache.settle(item('invalid'), undefined, outcome(denied({ status: 'INVALID_POLICY' })), ctx);
    cache.settle(item('zero'), undefined, outcome(denied({ retryAfterMs: 0 })), ctx);
    cache.settle(item('inf'), undefined, outcome(denied({ retryAfterMs: Infinity })), ctx);
    expect(cache.size).toBe(0);
    cache.settle(item('one'), undefined, outcome(denied({ retryAfterMs: 1 })), ctx);
    expect(cache.size).toBe(1);
    expect(cache.enter(item('one'), { nowMs: 0 })?.kind).toBe('answer');
  });
});
