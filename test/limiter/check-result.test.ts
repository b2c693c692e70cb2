import { describe, expect, it } from 'vitest';
import type { Decision } from '../../src/core/decision.js';
import { combineDecisions } from '../../src/limiter/check-result.js';

const decision = (policy: string, d: Partial<Decision>): Decision => ({
  status: 'OK',
  allowed: true,
  limit: 10,
  remaining: 5,
  retryAfterMs: 0,
  resetAfterMs: 0,
  policy,
  path: 'store',
  ...d,
});
const deny = (policy: string, retryAfterMs: number, d: Partial<Decision> = {}) =>
  decision(policy, { status: 'OVER_LIMIT', allowed: false, remaining: 0, retryAfterMs, ...d });

describe('combineDecisions', () => {
  it('is decided by the denial with the longest retry-after, wherever it is', () => {
    for (const order of [
      [deny('long', 900), deny('short', 50)],
      [deny('short', 50), deny('long', 900)],
    ]) {
      expect(combineDecisions([decision('ok', {}), ...order])).toMatchObject({
        allowed: false,
        status: 'OVER_LIMIT',
        retryAfterMs: 900,
        decision: { policy: 'long' },
      });
    }
  });

  it('when allowed, names the enforced decision with the least remaining, wherever it is', () => {
    for (const order of [
      [decision('tight', { remaining: 1 }), decision('loose', { remaining: 8 })],
      [decision('loose', { remaining: 8 }), decision('tight', { remaining: 1 })],
    ]) {
      expect(combineDecisions(order)).toMatchObject({
        allowed: true,
        status: 'OK',
        retryAfterMs: 0,
        decision: { policy: 'tight' },
      });
    }
  });

  it('puts UNAVAILABLE before OVER_LIMIT, and ignores shadow decisions', () => {
    const down = decision('down', {
      status: 'UNAVAILABLE',
      allowed: false,
      remaining: 0,
      path: 'fail-closed',
    });
    const shadow = deny('shadow', 5_000, { path: 'shadow' });
    expect(combineDecisions([deny('over', 10), down, shadow])).toMatchObject({
      allowed: false,
      status: 'UNAVAILABLE',
      retryAfterMs: 0,
      decision: { policy: 'down' },
    });
    const onlyShadow = combineDecisions([shadow, decision('shadow-ok', { path: 'shadow' })]);
    expect(onlyShadow).toMatchObject({ allowed: true, status: 'OK', decision: undefined });
    expect(onlyShadow.decisions).toHaveLength(2);
  });
});
