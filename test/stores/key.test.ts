/**
 * Known answers for the key helpers (key.property.test.ts holds the injectivity and slot
 * properties of bucket keys).
 */
import { describe, expect, it } from 'vitest';
import { parsePolicies } from '../../src/config/policies.js';
import { toDescriptor } from '../../src/core/descriptor.js';
import { bucketKey, dedupKey, hashTagOf, keyValue } from '../../src/stores/key.js';

describe('hashTagOf', () => {
  // Redis Cluster's rule: the text between the first `{` and the first `}` after it, when
  // that text is not empty; otherwise the whole key.
  it.each([
    ['{user1000}.following', 'user1000'],
    ['x{user1000}', 'user1000'],
    ['foo{bar}{zap}', 'bar'],
    ['foo{{bar}}zap', '{bar'],
    ['a}{b}', 'b'], // a `}` before the first `{` does not close it
    ['foo{}{bar}', 'foo{}{bar}'], // an empty first tag: the whole key
    ['{}', '{}'],
    ['abc', 'abc'],
    ['x{y', 'x{y'],
    ['x}y', 'x}y'],
    ['', ''],
  ])('%j hashes as %j', (key, tag) => {
    expect(hashTagOf(key)).toBe(tag);
  });
});

describe('dedupKey', () => {
  it("lives in the hash tag of the batch's first key, with the request id encoded", () => {
    expect(dedupKey('{acme}:tenant:GET%20%2Fx', 'req 1/{a}')).toBe('{acme}:rid:req%201%2F%7Ba%7D');
    expect(dedupKey('no-tag', 'r')).toBe('{no-tag}:rid:r');
  });
});

describe('bucketKey', () => {
  const [tenantRoute, global, fixedScope] = parsePolicies([
    { name: 'tenant-route', match: ['tenant', 'route'], rate: 1 },
    { name: 'global', match: [{ key: 'kind', value: 'x' }], rate: 1 },
    { name: 'scoped', match: ['route', { key: 'kind', value: 'x' }], identity: [], rate: 1 },
  ]).policies as [never, never, never];

  it('writes `{identity}:policy[:scope]` with values encoded and the empty value as =', () => {
    expect(bucketKey(tenantRoute, toDescriptor({ tenant: 'a b', route: '' }))).toBe(
      '{a%20b}:tenant-route:=',
    );
    expect(bucketKey(global, toDescriptor({ kind: 'x' }))).toBe('{@global}:global');
    expect(bucketKey(fixedScope, toDescriptor({ route: 'GET /x', kind: 'x' }))).toBe(
      '{@scoped}:scoped:GET%20%2Fx',
    );
    expect(keyValue('')).toBe('=');
    expect(keyValue('{}:=&')).toBe('%7B%7D%3A%3D%26');
  });
});
