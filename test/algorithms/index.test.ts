import { describe, expect, it } from 'vitest';
import { ALGORITHMS, algorithmOf } from '../../src/algorithms/index.js';
import { ALGORITHM_KINDS } from '../../src/algorithms/index.js';

describe('algorithm registry', () => {
  it('holds every kind, each under its own name', () => {
    expect(Object.keys(ALGORITHMS).sort()).toEqual([...ALGORITHM_KINDS].sort());
    for (const kind of ALGORITHM_KINDS) {
      expect(ALGORITHMS[kind].kind).toBe(kind);
      expect(algorithmOf(kind)).toBe(ALGORITHMS[kind]);
    }
    expect(Object.isFrozen(ALGORITHMS)).toBe(true);
  });
});
