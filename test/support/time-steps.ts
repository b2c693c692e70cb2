/** Generated time moves for the property and differential tests. */
import fc from 'fast-check';

/**
 * Time moves scaled to `scaleMs` (the period/window): mostly small steps, some none, some
 * backwards (whole and fractional ms), some fractional forwards, some long idles past the
 * TTL (up to four periods).
 */
export function dtArb(scaleMs: number): fc.Arbitrary<number> {
  return fc.oneof(
    { weight: 4, arbitrary: fc.integer({ min: 0, max: Math.max(1, Math.ceil(scaleMs / 4)) }) },
    { weight: 2, arbitrary: fc.constant(0) },
    { weight: 2, arbitrary: fc.integer({ min: -scaleMs, max: -1 }) },
    { weight: 1, arbitrary: fc.double({ min: -scaleMs, max: scaleMs, noNaN: true }) },
    { weight: 1, arbitrary: fc.integer({ min: 0, max: 4 * scaleMs }) },
  );
}
