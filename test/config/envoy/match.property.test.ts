import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadEnvoyConfigFiles } from '../../../src/config/envoy/load.js';
import { findRule } from '../../../src/config/envoy/match.js';
import { matchWildcard, splitWildcard } from '../../../src/config/envoy/wildcard.js';

const RUNS = { numRuns: 1_000 };

/** A config from plain data; JSON is YAML, and quoted scalars stay strings. */
function configOf(descriptors: unknown[]): ReturnType<typeof loadEnvoyConfigFiles> {
  return loadEnvoyConfigFiles([
    { name: 'gen.yaml', text: JSON.stringify({ domain: 'd', descriptors }) },
  ]);
}

const limit = (n: number) => ({ unit: 'second', requests_per_unit: n });

describe('matchWildcard', () => {
  it('agrees with a regular expression where each * is .*', () => {
    const pattern = fc.stringMatching(/^[ab*]{0,6}$/);
    const text = fc.stringMatching(/^[ab]{0,8}$/);
    fc.assert(
      fc.property(pattern, text, (p, t) => {
        const re = new RegExp(`^${p.split('*').join('.*')}$`, 's');
        expect(matchWildcard(splitWildcard(p), t)).toBe(re.test(t));
      }),
      { numRuns: 5_000 },
    );
  });
});

describe('findRule precedence on generated levels', () => {
  it('exact beats wildcard beats key-only default, in any file order', () => {
    const value = fc.stringMatching(/^[ab_]{1,6}$/);
    fc.assert(
      fc.property(
        value,
        fc.nat(6),
        fc.record({ exact: fc.boolean(), wildcard: fc.boolean(), byKey: fc.boolean() }),
        fc.uniqueArray(value, { maxLength: 3 }),
        fc.nat(),
        (v, cut, has, decoys, seed) => {
          const prefix = v.slice(0, Math.min(cut, v.length));
          const nodes: unknown[] = [];
          if (has.exact) nodes.push({ key: 'k', value: v, rate_limit: limit(3) });
          if (has.wildcard) nodes.push({ key: 'k', value: `${prefix}*`, rate_limit: limit(2) });
          if (has.byKey) nodes.push({ key: 'k', rate_limit: limit(1) });
          for (const w of decoys.filter((d) => d !== v)) {
            nodes.push({ key: 'k', value: w, rate_limit: limit(99) });
          }
          // Any order: precedence does not depend on position in the file.
          const order = nodes.map((n, i) => ({ n, r: (seed * (i + 7)) % 13 }));
          order.sort((a, b) => a.r - b.r);
          const m = findRule(configOf(order.map((o) => o.n)), 'd', [{ key: 'k', value: v }]);
          const expected = has.exact ? 3 : has.wildcard ? 2 : has.byKey ? 1 : undefined;
          expect(m?.rule.requestsPerUnit).toBe(expected);
          if (m !== undefined) expect(m.bucketValues).toEqual([v]);
        },
      ),
      RUNS,
    );
  });
});

describe('findRule depth on generated chains', () => {
  it('a descriptor of m entries gets the rule of level m, and nothing deeper or shallower', () => {
    fc.assert(
      fc.property(
        fc.array(fc.boolean(), { minLength: 1, maxLength: 5 }),
        fc.integer({ min: 1, max: 6 }),
        (rules, m) => {
          // k0 > k1 > ... nested key-only nodes; level i has rate i+1 when rules[i].
          let children: unknown[] = [];
          for (let i = rules.length - 1; i >= 0; i--) {
            const node: Record<string, unknown> = { key: `k${i}` };
            if (rules[i]) node.rate_limit = limit(i + 1);
            if (children.length > 0) node.descriptors = children;
            children = [node];
          }
          const request = Array.from({ length: m }, (_, i) => ({ key: `k${i}`, value: `v${i}` }));
          const found = findRule(configOf(children), 'd', request);
          const expected = m <= rules.length && rules[m - 1] === true ? m : undefined;
          expect(found?.rule.requestsPerUnit).toBe(expected);
        },
      ),
      RUNS,
    );
  });
});
