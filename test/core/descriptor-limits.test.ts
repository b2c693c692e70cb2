import { describe, expect, it } from 'vitest';
import { toDescriptor } from '../../src/core/descriptor.js';
import {
  checkDescriptorCount,
  checkEntry,
  checkEntryCount,
  DEFAULT_DESCRIPTOR_LIMITS,
  descriptorLimits,
} from '../../src/core/descriptor-limits.js';
import { PolicyError } from '../../src/core/errors.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';

const limits = DEFAULT_DESCRIPTOR_LIMITS;

function failure(fn: () => unknown): PolicyError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(PolicyError);
    return error as PolicyError;
  }
  throw new Error('expected a PolicyError');
}

describe('descriptor limits', () => {
  it('default to 64 descriptors, 32 entries, keys of 256 and values of 1024 code units', () => {
    expect(DEFAULT_DESCRIPTOR_LIMITS).toEqual({
      maxDescriptors: 64,
      maxDescriptorEntries: 32,
      maxDescriptorKeyLength: 256,
      maxDescriptorValueLength: 1024,
    });
    expect(descriptorLimits({ maxDescriptors: 3 })).toEqual({ ...limits, maxDescriptors: 3 });
    expect(Object.isFrozen(descriptorLimits())).toBe(true);
  });

  it('refuse a limit that is not a positive whole number, naming it', () => {
    expect(() => descriptorLimits({ maxDescriptorEntries: 0 })).toThrow(
      'maxDescriptorEntries must be a positive whole number, got 0',
    );
    expect(() => descriptorLimits({ maxDescriptorValueLength: 1.5 })).toThrow(RangeError);
  });

  it('name the limit, the descriptor, the entry and its key', () => {
    const cases: [() => void, string][] = [
      [
        () => checkDescriptorCount(65, limits),
        'invalid descriptor: the request has 65 descriptors; the limit is 64',
      ],
      [
        () => checkEntryCount(33, 'descriptors[2]', limits),
        'invalid descriptor: descriptors[2] has 33 entries; the limit is 32',
      ],
      [
        () => checkEntry('path', 'v'.repeat(1025), 'descriptors[0].entries[1]', limits),
        'invalid descriptor: descriptors[0].entries[1] (key "path"): value is 1025 characters long; the limit is 1024',
      ],
      [
        () => checkEntry('k'.repeat(300), 'v', 'entries[0]', limits),
        // a long key is quoted short: an answer never echoes what it refuses
        `invalid descriptor: entries[0] (key "${'k'.repeat(64)}…"): key is 300 characters long; the limit is 256`,
      ],
      [
        () => checkEntry('tenant', 'a\udc00', 'entries[0]', limits),
        'invalid descriptor: entries[0] (key "tenant"): value contains a lone UTF-16 surrogate',
      ],
      [
        // escaped, so the message itself can be sent as UTF-8 (HTTP body, gRPC status)
        () => checkEntry('t\ud800', 'v', 'entries[0]', limits),
        'invalid descriptor: entries[0] (key "t\\ud800"): key contains a lone UTF-16 surrogate',
      ],
    ];
    for (const [fn, message] of cases) {
      const e = failure(fn);
      expect(e.code).toBe('SLUICE_ERR_DESCRIPTOR_INVALID');
      expect(e.message).toBe(message);
      expect(e.message.isWellFormed()).toBe(true);
    }
  });

  it('accept what is exactly at the limits', () => {
    expect(() => checkDescriptorCount(64, limits)).not.toThrow();
    expect(() => checkEntryCount(32, 'descriptors[0]', limits)).not.toThrow();
    expect(() => checkEntry('k'.repeat(256), 'v'.repeat(1024), 'entries[0]', limits)).not.toThrow();
  });

  it('are what toDescriptor and the limiter enforce, as configured', async () => {
    expect(
      failure(() => toDescriptor({ a: 'x', b: 'y' }, { ...limits, maxDescriptorEntries: 1 }))
        .message,
    ).toBe('invalid descriptor: the descriptor has 2 entries; the limit is 1');
    expect(() => toDescriptor({ tenant: 'x'.repeat(2000) }, 2000)).not.toThrow();
    const limiter = createLimiter({
      store: new MemoryStore(),
      policies: [
        {
          name: 'p',
          match: [{ key: 'tenant' }],
          algorithm: 'token-bucket',
          rate: 1,
          period: '1s',
          burst: 1,
        },
      ],
      maxDescriptorKeyLength: 4,
      maxDescriptorValueLength: 2048,
    });
    await expect(limiter.check({ tenant: 'acme' })).rejects.toThrow(
      /entries\[0\] \(key "tenant"\): key is 6 characters long; the limit is 4/,
    );
    expect(() =>
      createLimiter({ store: new MemoryStore(), policies: [], maxDescriptorEntries: -1 }),
    ).toThrow(RangeError);
  });
});
