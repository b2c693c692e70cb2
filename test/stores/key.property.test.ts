import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parsePolicies } from '../../src/config/policies.js';
import { toDescriptor } from '../../src/core/descriptor.js';
import { bucketKey, hashTagOf } from '../../src/stores/key.js';
import { propertySeed } from '../support/property-seed.js';

const [perTenant, perTenantRoute, global] = parsePolicies([
  { name: 'tenant', match: ['tenant'], rate: 1 },
  { name: 'tenant-route', match: ['tenant', 'route'], rate: 1 },
  { name: 'global', match: [{ key: 'kind', value: 'x' }], rate: 1 },
]).policies as [never, never, never];

const hostile = fc
  .oneof(
    fc.string({ unit: 'grapheme', maxLength: 30 }),
    fc.constantFrom(
      '{x}',
      '}:{',
      '{',
      '}',
      ':',
      '\n',
      '\r\n',
      '=',
      '&',
      '@tenant',
      '%7B',
      '',
      ' ',
      'a:b',
      '{}',
      '\u0000',
    ),
    fc.string({ unit: fc.constantFrom('{', '}', ':', '=', '&', '%', '@', 'a'), maxLength: 12 }),
  )
  .filter((s) => s.isWellFormed());

describe('bucket keys', () => {
  it("distinct descriptors give distinct keys, and a key's hash tag is always its own identity", () => {
    fc.assert(
      fc.property(hostile, hostile, hostile, hostile, (t1, r1, t2, r2) => {
        const k1 = bucketKey(perTenantRoute, toDescriptor({ tenant: t1, route: r1 }));
        const k2 = bucketKey(perTenantRoute, toDescriptor({ tenant: t2, route: r2 }));
        expect(k1 === k2).toBe(t1 === t2 && r1 === r2);
        const tenantKey = bucketKey(perTenant, toDescriptor({ tenant: t1 }));
        // same identity → same slot; different identity → different tag
        expect(hashTagOf(k1)).toBe(hashTagOf(tenantKey));
        expect(hashTagOf(k1) === hashTagOf(k2)).toBe(t1 === t2);
        expect(hashTagOf(k1)).toBe(t1 === '' ? '=' : encodeURIComponent(t1));
      }),
      { numRuns: 2_000, seed: propertySeed() },
    );
  });

  it('keys of different policies never collide', () => {
    fc.assert(
      fc.property(hostile, hostile, (t, r) => {
        const a = bucketKey(perTenant, toDescriptor({ tenant: t, route: r }));
        const b = bucketKey(perTenantRoute, toDescriptor({ tenant: t, route: r }));
        expect(a).not.toBe(b);
      }),
      { numRuns: 1_000, seed: propertySeed() },
    );
  });

  it('handles 10 KB values without collision or slot escape', () => {
    const big = '{'.repeat(5_000) + '}:{'.repeat(1_700);
    const d = toDescriptor({ tenant: big, route: big }, 20_000);
    const k = bucketKey(perTenantRoute, d);
    expect(hashTagOf(k)).toBe(encodeURIComponent(big));
    expect(k).not.toBe(
      bucketKey(perTenantRoute, toDescriptor({ tenant: big, route: `${big}x` }, 20_000)),
    );
  });

  it('gives a global policy one key with its own tag', () => {
    expect(bucketKey(global, toDescriptor({ kind: 'x', tenant: 'a' }))).toBe('{@global}:global');
    expect(bucketKey(perTenant, toDescriptor({ tenant: 'acme corp' }))).toBe(
      '{acme%20corp}:tenant',
    );
    expect(bucketKey(perTenantRoute, toDescriptor({ tenant: 'a', route: 'POST /t/{id}' }))).toBe(
      '{a}:tenant-route:POST%20%2Ft%2F%7Bid%7D',
    );
    // an empty value is `=` (never an encoding's output), so the hash tag is never `{}`
    expect(bucketKey(perTenantRoute, toDescriptor({ tenant: '', route: '' }))).toBe(
      '{=}:tenant-route:=',
    );
  });
});
