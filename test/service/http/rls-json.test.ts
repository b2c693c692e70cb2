import { describe, expect, it } from 'vitest';
import { durationJson, encodeRlsJson } from '../../../src/service/http/rls-json.js';

describe('durationJson', () => {
  // protojson writes 0, 3, 6 or 9 fractional digits, whichever keeps every nanosecond.
  it.each([
    [0, 0, '0s'],
    [59, 0, '59s'],
    [1, 500_000_000, '1.500s'],
    [1, 500_250_000, '1.500250s'],
    [0, 1_000, '0.000001s'],
    [0, 1, '0.000000001s'],
    [3, 120_000_001, '3.120000001s'],
  ])('{seconds: %d, nanos: %d} → %s', (seconds, nanos, expected) => {
    expect(durationJson({ seconds, nanos })).toBe(expected);
  });
});

describe('encodeRlsJson', () => {
  it('writes a reset in nanoseconds, and a zero one as "0s"', () => {
    const out = encodeRlsJson(
      {
        overallCode: 'OK',
        statuses: [
          { code: 'OK', limitRemaining: 1, durationUntilResetMs: 0.000001 },
          { code: 'OK', limitRemaining: 1, durationUntilResetMs: 0 },
        ],
      },
      2,
    );
    expect(out).toEqual({
      overallCode: 'OK',
      statuses: [
        { code: 'OK', limitRemaining: 1, durationUntilReset: '0.000000001s' },
        { code: 'OK', limitRemaining: 1, durationUntilReset: '0s' },
      ],
    });
  });

  it('refuses what protojson could not write', () => {
    const status = { code: 'OK' as const, limitRemaining: 0 };
    expect(() =>
      encodeRlsJson(
        { overallCode: 'OK', statuses: [status], dynamicMetadata: { x: [Number.NaN] } },
        1,
      ),
    ).toThrow(/dynamicMetadata\.x\[0\] = NaN/);
    expect(() => encodeRlsJson({ overallCode: 'OK', statuses: [status] }, 2)).toThrow(TypeError);
  });
});
