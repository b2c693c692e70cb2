import { describe, expect, it } from 'vitest';
import { parsePolicies } from '../../src/config/policies.js';
import type { Decision } from '../../src/core/decision.js';
import { combineDecisions } from '../../src/limiter/check-result.js';
import {
  policyItem,
  rateLimitHeaders,
  retryAfterSeconds,
} from '../../src/http/rate-limit-headers.js';

describe('RateLimit-Policy items', () => {
  it('maps each algorithm to q (quota) and w (window, whole seconds)', () => {
    const set = parsePolicies([
      { name: 'tb', match: ['t'], rate: 100, burst: 20 },
      { name: 'gcra', match: ['t'], algorithm: 'gcra', rate: 5, period: '1m', burst: 2 },
      { name: 'leaky', match: ['t'], algorithm: 'leaky-bucket', rate: 10, capacity: 4 },
      { name: 'fw', match: ['t'], algorithm: 'fixed-window', limit: 1000, window: '1h' },
      { name: 'swc', match: ['t'], algorithm: 'sliding-window-counter', limit: 3, window: '30s' },
      // 10 per 1.5s: the window rounds up to 2s and the quota scales down, floored (13.33 → 13)
      { name: 'odd', match: ['t'], rate: 10, period: '1500ms', burst: 10 },
      // half a unit per second: w=1 gives q=0, honestly
      { name: 'slow', match: ['t'], rate: 0.5, burst: 1 },
      { name: 'sub', match: ['t'], algorithm: 'sliding-log', limit: 5, window: '250ms' },
    ]);
    expect(set.policies.map(policyItem)).toEqual([
      '"tb";q=100;w=1;sluice-burst=20',
      '"gcra";q=5;w=60;sluice-burst=2',
      '"leaky";q=10;w=1;sluice-burst=4',
      '"fw";q=1000;w=3600',
      '"swc";q=3;w=30',
      '"odd";q=13;w=2;sluice-burst=10',
      '"slow";q=0;w=1;sluice-burst=1',
      '"sub";q=20;w=1',
    ]);
  });
});

describe('RateLimit and legacy headers', () => {
  const set = parsePolicies([
    { name: 'a', match: ['t'], rate: 10, burst: 10 },
    { name: 'b', match: ['t'], algorithm: 'fixed-window', limit: 5, window: '1m' },
  ]);
  const byName = (n: string) => set.policies.find((p) => p.name === n);
  const d = (over: Partial<Decision>): Decision => ({
    status: 'OK',
    allowed: true,
    limit: 10,
    remaining: 3.9999,
    retryAfterMs: 0,
    resetAfterMs: 600.5,
    policy: 'a',
    path: 'store',
    ...over,
  });

  it('floors remaining, rounds times up, lists every advertised policy in order', () => {
    const result = combineDecisions([
      d({}),
      d({
        policy: 'b',
        limit: 5,
        remaining: 0,
        allowed: false,
        status: 'OVER_LIMIT',
        retryAfterMs: 12_001,
        resetAfterMs: 12_001,
      }),
    ]);
    expect(rateLimitHeaders(result, byName, { legacy: true })).toEqual({
      'ratelimit-policy': '"a";q=10;w=1;sluice-burst=10, "b";q=5;w=60',
      ratelimit: '"a";r=3;t=1, "b";r=0;t=13',
      'x-ratelimit-limit': '5', // the deciding (denying) policy
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': '13',
    });
    expect(retryAfterSeconds(result)).toBe(13);
  });

  it('advertises nothing for fail-open, fail-closed and shadow decisions', () => {
    for (const path of ['fail-open', 'fail-closed', 'shadow'] as const) {
      expect(rateLimitHeaders(combineDecisions([d({ path })]), byName)).toEqual({});
    }
    expect(
      rateLimitHeaders(combineDecisions([d({ path: 'stale', remaining: 2 })]), byName),
    ).toEqual({ 'ratelimit-policy': '"a";q=10;w=1;sluice-burst=10', ratelimit: '"a";r=2;t=1' });
  });

  it('Retry-After is never 0 for a denial', () => {
    expect(
      [0, 1, 999, 1000, 1000.0001, 59_999].map((ms) => retryAfterSeconds({ retryAfterMs: ms })),
    ).toEqual([1, 1, 1, 1, 2, 60]);
  });
});
