/** The `overload` section of a policy file: defaults, durations, every issue named with its path. */
import { describe, expect, it } from 'vitest';
import { parsePolicyText } from '../../src/config/load.js';
import { PolicyError } from '../../src/core/errors.js';
import { createAdmissionBoundary } from '../../src/overload.js';

const POLICIES = `policies:
  - name: per-tenant
    match: [tenant]
    rate: 100
`;

function messageOf(text: string): string {
  try {
    parsePolicyText(text, 'limits.yaml');
  } catch (e) {
    expect(e).toBeInstanceOf(PolicyError);
    expect((e as PolicyError).code).toBe('SLUICE_ERR_CONFIG_INVALID');
    return (e as PolicyError).message;
  }
  throw new Error('expected the file to be refused');
}

describe('policy file: overload section', () => {
  it('is optional; given, it is validated with defaults and durations in ms, and builds a boundary', () => {
    expect(parsePolicyText(POLICIES, 'limits.yaml').overload).toBeUndefined();
    const set = parsePolicyText(
      `${POLICIES}overload:
  limit: { algorithm: gradient, tolerance: 1.3 }
  shares: { SHEDDABLE: 0.4 }
  queue: { size: 50, maxWait: 20ms }
  breaker: { minimumCalls: 10, slowCallRatio: 0.5, slowCall: 2s, open: 30s }
`,
      'limits.yaml',
    );
    expect(set.overload).toEqual({
      limit: {
        algorithm: 'gradient',
        initial: 20,
        min: 2,
        max: 200,
        tolerance: 1.3,
        smoothing: 1,
        minRttPeriod: 10_000,
        backoffRatio: 0.9,
      },
      shares: { CRITICAL_PLUS: 1, CRITICAL: 0.9, SHEDDABLE_PLUS: 0.75, SHEDDABLE: 0.4 },
      queue: { size: 50, maxWait: 20, order: 'lifo' },
      breaker: {
        window: 10_000,
        buckets: 10,
        minimumCalls: 10,
        slowCallRatio: 0.5,
        slowCall: 2_000,
        open: 30_000,
        probes: 3,
        probeLease: 10_000,
      },
      retryAfter: 1_000,
    });
    expect(Object.isFrozen(set.overload?.limit)).toBe(true);
    const boundary = createAdmissionBoundary(set.overload);
    expect(boundary.stats()).toMatchObject({ limit: 20, breaker: 'closed' });
  });

  it("reports every problem with the file and the path, alongside the policies' problems", () => {
    expect(
      messageOf(`policies:
  - name: per-tenant
    match: [tenant]
    rate: -1
overload:
  limit: { algorithm: vegas }
  shares: { CRITICAL: 0.5, SHEDDABLE_PLUS: 0.8 }
  queue: { size: 10, maxWiat: 1s }
  breaker: { slowCallRatio: 0.5 }
  retryAfter: 0
`),
    ).toMatchInlineSnapshot(`
      "invalid policies (6 issues):
        limits.yaml: policies[0].rate: must be > 0
        limits.yaml: overload.limit.algorithm: must be one of "fixed", "aimd", "gradient", got "vegas"
        limits.yaml: overload.shares: SHEDDABLE_PLUS (0.8) must not exceed CRITICAL (0.5): a lower level would keep capacity from a higher one
        limits.yaml: overload.queue: unknown key "maxWiat"
        limits.yaml: overload.breaker.slowCall: slowCallRatio needs slowCall (the duration that counts as slow)
        limits.yaml: overload.retryAfter: expected a duration of at least 1ms as whole ms (number) or a string like "500ms", "1s", "1m", "1h", "1d"; got 0"
    `);
  });
});
