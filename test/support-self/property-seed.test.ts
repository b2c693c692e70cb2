/**
 * The suite's fast-check seed (test/support/property-seed.ts, property-setup.ts): one fixed
 * seed unless told otherwise, applied to every fc.assert, also those that name none.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FIXED_PROPERTY_SEED, propertySeed } from '../support/property-seed.js';

describe('property seed', () => {
  it('is the fixed seed by default, in CI or not, and a given integer replays one', () => {
    expect(propertySeed({})).toBe(FIXED_PROPERTY_SEED);
    expect(propertySeed({ CI: 'true' })).toBe(FIXED_PROPERTY_SEED);
    expect(propertySeed({ SLUICE_PROPERTY_SEED: '42' })).toBe(42);
    expect(Number.isInteger(propertySeed({ SLUICE_PROPERTY_SEED: 'random' }))).toBe(true);
  });

  it('refuses a seed that is not an integer, naming the variable', () => {
    expect(() => propertySeed({ SLUICE_PROPERTY_SEED: '1.5' })).toThrow(/SLUICE_PROPERTY_SEED/);
  });

  it('is set for every property of the run, so one that names no seed runs on it too', () => {
    expect(fc.readConfigureGlobal().seed).toBe(propertySeed());
    const first: number[] = [];
    fc.assert(
      fc.property(fc.integer(), (n) => void first.push(n)),
      { numRuns: 5 },
    );
    const again: number[] = [];
    fc.assert(
      fc.property(fc.integer(), (n) => void again.push(n)),
      { numRuns: 5 },
    );
    expect(again).toEqual(first);
  });
});
