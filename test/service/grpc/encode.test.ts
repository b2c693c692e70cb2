import { describe, expect, it } from 'vitest';
import { toNativeCheckResponse } from '../../../src/service/grpc/check-response.js';
import { encodeCheckResponse, msToDuration } from '../../../src/service/grpc/encode.js';

describe('msToDuration', () => {
  it.each([
    [0, { seconds: 0, nanos: 0 }],
    [1, { seconds: 0, nanos: 1_000_000 }],
    [1.1, { seconds: 0, nanos: 1_100_000 }], // 1.1 * 1e6 is 1100000.0000000002 in doubles
    [1500.25, { seconds: 1, nanos: 500_250_000 }],
    [999.9999999, { seconds: 1, nanos: 0 }], // rounds into the next second
    [86_400_000, { seconds: 86_400, nanos: 0 }],
  ])('%s ms → %o', (ms, duration) => {
    expect(msToDuration(ms)).toEqual(duration);
  });

  it.each([-1, NaN, Infinity])('rejects %s', (ms) => {
    expect(() => msToDuration(ms)).toThrow(TypeError);
  });
});

describe('toNativeCheckResponse', () => {
  const decision = {
    status: 'OK' as const,
    allowed: true,
    limit: 10,
    remaining: 3.25,
    retryAfterMs: 0,
    resetAfterMs: 700,
    policy: 'p',
    path: 'store' as const,
  };

  it('takes the top-level fields from the deciding decision', () => {
    const result = {
      allowed: true,
      status: 'OK' as const,
      retryAfterMs: 0,
      decision,
      decisions: [decision],
    };
    expect(toNativeCheckResponse(result)).toEqual({
      allowed: true,
      status: 'OK',
      retryAfterMs: 0,
      resetAfterMs: 700,
      remaining: 3.25,
      limit: 10,
      policy: 'p',
      decisions: [decision],
    });
  });

  it('sends zeros and no policy when no enforced policy matched', () => {
    const result = {
      allowed: true,
      status: 'OK' as const,
      retryAfterMs: 0,
      decision: undefined,
      decisions: [],
    };
    expect(encodeCheckResponse(toNativeCheckResponse(result))).toEqual({
      allowed: true,
      status: 'OK',
      retryAfterMs: 0,
      resetAfterMs: 0,
      remaining: 0,
      limit: 0,
      policy: '',
      decisions: [],
    });
  });

  it('carries delayMs', () => {
    const d = { ...decision, delayMs: 40 };
    const result = {
      allowed: true,
      status: 'OK' as const,
      retryAfterMs: 0,
      decision: d,
      decisions: [d],
    };
    expect(toNativeCheckResponse(result)).toMatchObject({ delayMs: 40 });
  });
});
