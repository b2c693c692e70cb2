import { describe, expect, it } from 'vitest';
import type { Decision } from '../../../src/core/decision.js';
import { DecisionTally } from '../../../src/service/status/decision-tally.js';

const decision = (
  policy: string,
  allowed: boolean,
  path: Decision['path'] = 'store',
): Decision => ({
  policy,
  allowed,
  path,
  status: allowed ? 'OK' : 'OVER_LIMIT',
  limit: 10,
  remaining: 0,
  retryAfterMs: 0,
  resetAfterMs: 0,
});

describe('DecisionTally', () => {
  it('counts decisions, enforced denials and shadow would-denies, since start and over the last 60 s', () => {
    let nowMs = 0;
    const tally = new DecisionTally({ nowMs: () => nowMs });
    // t = 0 s: 2 allowed, 1 denied, 1 fail-closed denial; a shadow policy would deny 1 of 2.
    tally.record(decision('a', true));
    tally.record(decision('a', true));
    tally.record(decision('a', false));
    tally.record({ ...decision('a', false, 'fail-closed'), status: 'UNAVAILABLE' });
    tally.record(decision('s', true, 'shadow'));
    tally.record(decision('s', false, 'shadow'));
    // t = 59.999 s: second 59, the last one of the minute that began at second 0.
    nowMs = 59_999;
    tally.record(decision('a', false));
    expect(tally.snapshot()).toEqual([
      {
        policy: 'a',
        total: { decisions: 5, denied: 3, wouldDeny: 0 },
        lastMinute: { decisions: 5, denied: 3, wouldDeny: 0 },
      },
      {
        policy: 's',
        total: { decisions: 2, denied: 0, wouldDeny: 1 },
        lastMinute: { decisions: 2, denied: 0, wouldDeny: 1 },
      },
    ]);
    // t = 60 s: second 0 has left the window (its slot is 60 s old); second 59's stays.
    nowMs = 60_000;
    expect(tally.snapshot()[0]!.lastMinute).toEqual({ decisions: 1, denied: 1, wouldDeny: 0 });
    expect(tally.snapshot()[1]!.lastMinute).toEqual({ decisions: 0, denied: 0, wouldDeny: 0 });
    // t = 120 s: a decision reuses second 0's slot (120 % 60) and starts it afresh.
    nowMs = 120_000;
    tally.record(decision('s', true, 'shadow'));
    expect(
      tally.snapshot().map((r) => [r.policy, r.total.decisions, r.lastMinute.decisions]),
    ).toEqual([
      ['a', 5, 0],
      ['s', 3, 1],
    ]);
  });

  it('holds at most maxPolicies rows and counts the rest as overflow', () => {
    const tally = new DecisionTally({ maxPolicies: 2, nowMs: () => 0 });
    for (const p of ['a', 'b', 'c', 'c']) tally.record(decision(p, true));
    expect(tally.snapshot().map((r) => r.policy)).toEqual(['a', 'b']);
    expect(tally.overflow).toBe(2);
  });
});
