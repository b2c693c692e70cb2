import { describe, expect, it } from 'vitest';
import { findRule } from '../../../src/config/envoy/match.js';
import { entries, loadFixtures } from './fixtures.js';

/** The matched rule's requests_per_unit, or undefined when nothing matches. */
function limitOf(file: string, domain: string, ...pairs: string[]): number | undefined {
  return findRule(loadFixtures([file]), domain, entries(...pairs))?.rule.requestsPerUnit;
}

describe('findRule: one level', () => {
  const f = 'match-precedence.yaml';

  it('an exact key_value beats a wildcard and the key-only default', () => {
    expect(limitOf(f, 'api', 'plan=pro-max')).toBe(100);
    const m = findRule(loadFixtures([f]), 'api', entries('plan=pro-max'));
    expect(m?.via).toEqual(['exact']);
  });

  it('a wildcard beats the key-only default', () => {
    expect(limitOf(f, 'api', 'plan=pro')).toBe(10);
    expect(limitOf(f, 'api', 'plan=pro-mini')).toBe(10);
  });

  it('the key-only default takes any other value, the empty one included', () => {
    expect(limitOf(f, 'api', 'plan=free')).toBe(1);
    expect(limitOf(f, 'api', 'plan=')).toBe(1);
  });

  it('no node for the key: no rule; unknown domain and empty descriptor: no rule', () => {
    expect(limitOf(f, 'api', 'tier=pro')).toBeUndefined();
    expect(limitOf(f, 'other', 'plan=pro')).toBeUndefined();
    expect(findRule(loadFixtures([f]), 'api', [])).toBeUndefined();
  });

  it('keys and values are case-sensitive', () => {
    expect(limitOf(f, 'api', 'plan=PRO-MAX')).toBe(1);
    expect(limitOf(f, 'api', 'Plan=pro')).toBeUndefined();
  });
});

describe('findRule: wildcards', () => {
  const f = 'match-wildcards.yaml';

  it.each([
    ['path=/v1/', 60],
    ['path=/v1/users/42', 60],
    ['path=/v2/7/orders', 30],
    ['path=/v2//orders', 30],
    ['path=/v2/7/orders/1', undefined],
    ['path=/v3/a/items/b/price', 20],
    ['path=/v3/a/b/items/c/d/price', 20],
    ['path=/v3/a/price', undefined],
    ['path=abba', 2],
    ['path=ab-x-ba', 2],
    ['path=aba', undefined],
    ['any=', 5],
    ['any=anything', 5],
  ])('%s → %s', (pair, expected) => {
    expect(limitOf(f, 'api', pair)).toBe(expected);
  });

  it('among wildcards, the first in file order wins, not the most specific', () => {
    expect(limitOf('match-wildcard-order.yaml', 'api', 'user=user-admin')).toBe(10);
  });

  it('with merged domains, wildcard order is file order', () => {
    const c = loadFixtures(['merge-wild-1.yaml', 'merge-wild-2.yaml'], true);
    expect(findRule(c, 'edge', entries('host=api.example.com'))?.rule.requestsPerUnit).toBe(100);
    const reversed = loadFixtures(['merge-wild-2.yaml', 'merge-wild-1.yaml'], true);
    expect(findRule(reversed, 'edge', entries('host=api.example.com'))?.rule.requestsPerUnit).toBe(
      10,
    );
  });
});

describe('findRule: depth', () => {
  const f = 'match-depth.yaml';

  it('a rule applies only to a descriptor exactly as deep as its node', () => {
    expect(limitOf(f, 'api', 'tenant=acme')).toBe(600);
    expect(limitOf(f, 'api', 'tenant=acme', 'route=/pay')).toBe(5);
    expect(limitOf(f, 'api', 'tenant=acme', 'route=/pay', 'method=POST')).toBeUndefined();
  });

  it('a placeholder node without rate_limit gives no rule', () => {
    expect(limitOf(f, 'api', 'region=eu')).toBeUndefined();
    expect(limitOf(f, 'api', 'region=eu', 'tenant=acme')).toBe(50);
    expect(limitOf(f, 'api', 'region=us', 'tenant=acme')).toBeUndefined();
  });

  it('entries match in order: the same entries in another order do not match', () => {
    expect(limitOf(f, 'api', 'route=/pay', 'tenant=acme')).toBeUndefined();
  });

  it('never backtracks: an exact match whose subtree fails is not retried as default', () => {
    const n = 'match-no-backtrack.yaml';
    expect(limitOf(n, 'api', 'tenant=acme', 'route=/pay')).toBe(5);
    expect(limitOf(n, 'api', 'tenant=globex', 'method=GET')).toBe(50);
    expect(limitOf(n, 'api', 'tenant=acme', 'method=GET')).toBeUndefined();
  });
});

describe('findRule: composite keys are strings (upstream quirk, kept)', () => {
  const f = 'match-composite-quirk.yaml';

  it('key "a" with value "b" finds the key-only node "a_b"', () => {
    const m = findRule(loadFixtures([f]), 'api', entries('team=red'));
    expect(m?.rule.requestsPerUnit).toBe(7);
    expect(m?.via).toEqual(['exact']);
    expect(m?.statsKey).toBe('api.team_red');
  });

  it('a pattern is matched against key_value, so another key can match it', () => {
    const m = findRule(loadFixtures([f]), 'api', entries('x_y1=z'));
    expect(m?.rule.requestsPerUnit).toBe(9);
    expect(m?.statsKey).toBe('api.x_y1_x_y*');
  });
});

describe('findRule: metric key and bucket values', () => {
  const c = loadFixtures(['match-metrics.yaml']);
  const match = (...pairs: string[]) => findRule(c, 'api', entries(...pairs));

  it('uses the configured key by default, with the pattern for a wildcard', () => {
    expect(match('route=/a', 'method=GET', 'user=u1')?.statsKey).toBe(
      'api.route_/a.method_GET.user',
    );
    expect(match('img=img/cat.png')?.statsKey).toBe('api.img_img/cat.png');
  });

  it('detailed_metric puts every request value in the key', () => {
    expect(match('client=mobile')?.statsKey).toBe('api.client_mobile');
  });

  it('value_to_metric adds the request value at its level only', () => {
    expect(match('route=/b', 'method=GET', 'user=u2')?.statsKey).toBe(
      'api.route_/b.method_GET.user',
    );
  });

  it('share_threshold shares one bucket and one metric per pattern', () => {
    const a = match('file=docs/a.pdf');
    const b = match('file=docs/b.pdf');
    expect(a?.statsKey).toBe('api.file_docs/*');
    expect(a?.bucketValues).toEqual(['docs/*']);
    expect(b?.bucketValues).toEqual(['docs/*']);
  });

  it('share_threshold wins over detailed_metric for its entry', () => {
    const m = match('bucket=b-1', 'object=o9');
    expect(m?.statsKey).toBe('api.bucket_b-*.object_o9');
    expect(m?.bucketValues).toEqual(['b-*', 'o9']);
  });

  it('every other entry puts the request value in the bucket, whatever matched it', () => {
    const m = match('route=/a', 'method=GET', 'user=u1');
    expect(m?.bucketValues).toEqual(['/a', 'GET', 'u1']);
    expect(m?.via).toEqual(['default', 'exact', 'default']);
    expect(match('img=img/cat.png')?.bucketValues).toEqual(['img/cat.png']);
  });
});

describe('findRule: rule flags', () => {
  const c = loadFixtures(['match-flags.yaml']);

  it('returns shadow, quota, names, replaces and unlimited as configured', () => {
    expect(findRule(c, 'api', entries('beta=x'))?.rule.shadowMode).toBe(true);
    expect(findRule(c, 'api', entries('credits=x'))?.rule).toMatchObject({
      quotaMode: true,
      name: 'credits',
      replaces: ['per-user'],
      unit: 'month',
    });
    expect(findRule(c, 'api', entries('health=x'))?.rule).toMatchObject({ unlimited: true });
  });
});
