/**
 * Where MemoryStore holds a bucket key (src/stores/memory/bucket-place.ts): the bucket key
 * of a policy with one identity key and no scope goes to that policy's value index under
 * the raw value, so the limiter's value path and the text path meet in one
 * bucket; and distinct keys never share a place.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parsePolicies } from '../../../src/config/policies.js';
import { toDescriptor } from '../../../src/core/descriptor.js';
import { bucketKey } from '../../../src/stores/key.js';
import { placeOf, valueIndexId } from '../../../src/stores/memory/bucket-place.js';
import { propertySeed } from '../../support/property-seed.js';

const text = fc
  .oneof(
    fc.string({ unit: 'grapheme', maxLength: 20 }),
    fc.string({
      unit: fc.constantFrom('{', '}', ':', '=', '&', '%', '@', 'a', '7', 'B'),
      maxLength: 12,
    }),
    fc.constantFrom('', '%', '%7B', '%7b', '%ZZ', '%E0%A4%A', '{x}', 'a b', '\u0000', 'é'),
  )
  .filter((s) => s.isWellFormed());
const policyName = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,20}$/);

/** Bucket-key-like strings: the value-index layout with arbitrary (often wrong) parts. */
const keyLike = fc.oneof(
  fc.tuple(text, text).map(([b, c]) => `{${b}}:${c}`),
  fc.tuple(text, policyName).map(([v, n]) => `{${v === '' ? '=' : encodeURIComponent(v)}}:${n}`),
  text,
);

/** A place as one comparable value: a value index and value, or the text itself. */
function placeText(key: string): string {
  const place = placeOf(key);
  return JSON.stringify(place === undefined ? ['text', key] : ['index', place.id, place.value]);
}

describe('bucket places', () => {
  it("put a one-identity policy's bucket key in its value index under the raw value", () => {
    fc.assert(
      fc.property(
        text.filter((s) => s.length > 0),
        text,
        policyName,
        (k, v, name) => {
          const [policy] = parsePolicies([{ name, match: [k], rate: 1 }]).policies;
          const key = bucketKey(policy!, toDescriptor([{ key: k, value: v }]));
          expect(placeOf(key)).toStrictEqual({ id: valueIndexId(name), value: v });
        },
      ),
      { numRuns: 2_000, seed: propertySeed() },
    );
  });

  it('keep the text of keys with a scope, several identity keys or none', () => {
    const policies = parsePolicies([
      { name: 'scoped', match: ['tenant', 'route'], rate: 1 },
      { name: 'pair', match: ['tenant', 'user'], identity: ['tenant', 'user'], rate: 1 },
      { name: 'global', match: [{ key: 'kind', value: 'x' }], rate: 1 },
    ]).policies;
    fc.assert(
      fc.property(text, text, (a, b) => {
        const d = toDescriptor([
          { key: 'tenant', value: a },
          { key: 'route', value: b },
          { key: 'user', value: b },
          { key: 'kind', value: 'x' },
        ]);
        for (const policy of policies) expect(placeOf(bucketKey(policy, d))).toBeUndefined();
      }),
      { seed: propertySeed() },
    );
  });

  it('never put two distinct keys in one place', () => {
    fc.assert(
      fc.property(keyLike, keyLike, (a, b) => {
        if (a !== b) expect(placeText(a)).not.toBe(placeText(b));
      }),
      { numRuns: 5_000, seed: propertySeed() },
    );
  });

  it('take a key apart only when it is the exact encoding of its value', () => {
    expect(placeOf('{a%20b}:p')).toStrictEqual({ id: 'p', value: 'a b' });
    expect(placeOf('{=}:p')).toStrictEqual({ id: 'p', value: '' }); // the empty value
    expect(placeOf('{%3D}:p')).toStrictEqual({ id: 'p', value: '=' });
    expect(placeOf('{}:p')).toBeUndefined(); // never a bucket key's tag
    expect(placeOf('{a b}:p')).toBeUndefined(); // not encoded
    expect(placeOf('{%7b}:p')).toBeUndefined(); // lower-case escape: not encodeURIComponent's
    expect(placeOf('{%ZZ}:p')).toBeUndefined(); // malformed escape
    expect(placeOf('{a}:p:x')).toBeUndefined(); // a scope
    expect(placeOf('{a&b}:p')).toBeUndefined(); // two identity values
    expect(placeOf('{@p}:p')).toBeUndefined(); // global
    expect(placeOf('tenant=a')).toBeUndefined();
  });
});
