import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/quota/lease.js';
import {
  bucketIdProblem,
  bucketKey,
  leaseStrategy,
  strategyRate,
  tokenFill,
} from '../../src/quota/rlqs/mapping.js';

const lease = (rate: number, burst = rate): Lease => ({
  agent: 'a',
  bucket: 'name=api',
  rate,
  burst,
  windowMs: 1_000,
  ttlMs: 3_000,
  version: 1,
  fencingToken: 1,
  issuedAtMs: 0,
});

describe('RLQS mapping', () => {
  it('names a BucketId by its pairs sorted by key, escaped so that distinct maps differ', () => {
    expect(bucketKey({ bucket: { b: '2', a: '1' } })).toBe('a=1,b=2');
    // Without escaping, {a: "1,b=2"} would read the same as {a: "1", b: "2"}.
    expect(bucketKey({ bucket: { a: '1,b=2' } })).toBe('a=1\\,b\\=2');
    expect(bucketIdProblem(null)).toBe('bucket_id is required');
    expect(bucketIdProblem({ bucket: {} })).toBe('bucket_id.bucket needs at least one pair');
    expect(bucketIdProblem({ bucket: { a: '' } })).toBe(
      'bucket_id.bucket keys and values must be non-empty',
    );
  });

  it('sends a lease as a token bucket, rounded down; under 1/s with a longer fill, not DENY_ALL', () => {
    expect(leaseStrategy(lease(99.9, 99.9), 'token_bucket')).toEqual({
      tokenBucket: {
        maxTokens: 99,
        tokensPerFill: { value: 99 },
        fillInterval: { seconds: 1, nanos: 0 },
      },
    });
    // 0.9/s: 1 per 1 s is 0, … 4 per 5 s is 0.8 (< 90%), 5 per 6 s is 0.833 (≥ 0.81).
    expect(leaseStrategy(lease(0.9), 'token_bucket')).toEqual({
      tokenBucket: {
        maxTokens: 5,
        tokensPerFill: { value: 5 },
        fillInterval: { seconds: 6, nanos: 0 },
      },
    });
    // 1/3 per second: 1 per 3 s exactly (the tolerance keeps 1/3 × 3 at one token).
    expect(tokenFill(1 / 3)).toEqual({ tokens: 1, seconds: 3 });
    // Under 1 per 60 s, nothing whole fits: DENY_ALL.
    expect(leaseStrategy(lease(0.01), 'token_bucket')).toEqual({ blanketRule: 'DENY_ALL' });
    expect(leaseStrategy(lease(0.9), 'requests_per_time_unit')).toEqual({
      blanketRule: 'DENY_ALL',
    });
    expect(leaseStrategy(lease(42.5), 'requests_per_time_unit')).toEqual({
      requestsPerTimeUnit: { requestsPerTimeUnit: 42, timeUnit: 'SECOND' },
    });
  });

  it('reads a strategy back as a rate and a burst per window; ALLOW_ALL and unset are unbounded', () => {
    expect(strategyRate(leaseStrategy(lease(50), 'token_bucket'), 1_000)).toEqual({
      rate: 50,
      burst: 50,
      windowMs: 1_000,
    });
    expect(strategyRate(leaseStrategy(lease(50), 'requests_per_time_unit'), 500)).toEqual({
      rate: 50,
      burst: 25,
      windowMs: 500,
    });
    // A fill longer than the window is the window: 5 per 6 s is 5 units per 6 s window.
    expect(strategyRate(leaseStrategy(lease(0.9), 'token_bucket'), 1_000)).toEqual({
      rate: 5 / 6,
      burst: 5,
      windowMs: 6_000,
    });
    expect(
      strategyRate(
        { requestsPerTimeUnit: { requestsPerTimeUnit: 120, timeUnit: 'MINUTE' } },
        1_000,
      ),
    ).toEqual({ rate: 2, burst: 2, windowMs: 1_000 });
    expect(strategyRate({ blanketRule: 'DENY_ALL' }, 1_000)).toEqual({
      rate: 0,
      burst: 0,
      windowMs: 1_000,
    });
    expect(strategyRate({ blanketRule: 'ALLOW_ALL' }, 1_000)).toBeUndefined();
    expect(strategyRate(null, 1_000)).toBeUndefined();
  });
});
