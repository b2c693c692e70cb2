import { describe, expect, it } from 'vitest';
import { envoyCacheKey } from '../../../src/config/envoy/cache-key.js';
import {
  ENVOY_UNITS,
  parseEnvoyUnit,
  unitToMs,
  unitToSeconds,
} from '../../../src/config/envoy/envoy-config.js';
import { hitsAddends } from '../../../src/config/envoy/hits-addend.js';
import { descriptorKey, resolveDescriptorLimit } from '../../../src/config/envoy/limit-override.js';
import { findRule } from '../../../src/config/envoy/match.js';
import {
  UNLIMITED_REMAINING,
  descriptorCode,
  overallResult,
  type DescriptorOutcome,
} from '../../../src/config/envoy/overall.js';
import { replacedMask } from '../../../src/config/envoy/replaces.js';
import {
  durationUntilResetMs,
  durationUntilResetSeconds,
  windowStartMs,
} from '../../../src/config/envoy/window.js';
import { entries, loadFixtures } from './fixtures.js';

describe('units', () => {
  it('are upstream’s seven, with fixed-length month (30 d) and year (365 d)', () => {
    expect(ENVOY_UNITS.map((u) => [u, unitToSeconds(u)])).toEqual([
      ['second', 1],
      ['minute', 60],
      ['hour', 3_600],
      ['day', 86_400],
      ['week', 604_800],
      ['month', 2_592_000],
      ['year', 31_536_000],
    ]);
    expect(unitToMs('minute')).toBe(60_000);
  });

  it('parse in any letter case; "unknown" is not a unit', () => {
    expect(parseEnvoyUnit('SECOND')).toBe('second');
    expect(parseEnvoyUnit('Month')).toBe('month');
    expect(parseEnvoyUnit('unknown')).toBeUndefined();
    expect(parseEnvoyUnit('')).toBeUndefined();
    expect(parseEnvoyUnit('seconds')).toBeUndefined();
    // Upper-casing, as upstream does, maps a long s to S.
    expect(parseEnvoyUnit('\u017fecond')).toBe('second');
  });
});

describe('windows are epoch-aligned', () => {
  // 2024-01-01T12:00:30.250Z; 1704110430250 ms.
  const t0 = Date.UTC(2024, 0, 1, 12, 0, 30, 250);

  it.each([
    // [unit, window start, ms until reset, whole seconds until reset (upstream)]
    ['second', t0 - 250, 750, 1], // 0.75 s left; upstream truncates now to 12:00:30 → 1 s
    ['minute', t0 - 30_250, 29_750, 30], // 12:00:00 .. 12:01:00
    ['hour', t0 - 30_250, 3_569_750, 3_570],
    ['day', Date.UTC(2024, 0, 1), 43_169_750, 43_170], // midnight UTC
    // 1704110430 s = 2817 weeks + 388830.25 s: this week began Thu 2023-12-28 00:00 UTC
    // (epoch weeks start on Thursdays); 604800 - 388830.25 = 215969.75 s are left.
    ['week', Date.UTC(2023, 11, 28), 215_969_750, 215_970],
  ] as const)('%s', (unit, start, resetMs, resetS) => {
    expect(windowStartMs(unit, t0)).toBe(start);
    expect(durationUntilResetMs(unit, t0)).toBe(resetMs);
    expect(durationUntilResetSeconds(unit, t0)).toBe(resetS);
    expect(durationUntilResetSeconds(unit, t0)).toBe(Math.ceil(resetMs / 1000));
  });

  it('at a window boundary the whole unit is left', () => {
    const boundary = Date.UTC(2024, 0, 1, 12, 1, 0);
    expect(durationUntilResetMs('minute', boundary)).toBe(60_000);
    expect(durationUntilResetSeconds('minute', boundary)).toBe(60);
  });
});

describe('envoyCacheKey', () => {
  it('is prefix, domain, key_value_ per entry, then the window start in seconds', () => {
    const t = Date.UTC(2024, 0, 1, 12, 0, 30, 250);
    const e = entries('tenant=acme', 'route=/pay');
    expect(envoyCacheKey('', 'shop', e, ['acme', '/pay'], 'minute', t)).toBe(
      'shop_tenant_acme_route_/pay_1704110400',
    );
    expect(envoyCacheKey('rl:', 'shop', e, ['acme', '/pay'], 'second', t)).toBe(
      'rl:shop_tenant_acme_route_/pay_1704110430',
    );
  });

  it('uses the shared pattern for share_threshold entries', () => {
    const c = loadFixtures(['match-metrics.yaml']);
    const e = entries('file=docs/a.pdf');
    const m = findRule(c, 'api', e)!;
    expect(envoyCacheKey('', 'api', e, m.bucketValues, m.rule.unit!, 0)).toBe('api_file_docs/*_0');
  });
});

describe('request-supplied limits (descriptor.limit)', () => {
  const c = loadFixtures(['match-depth.yaml']);

  it('replace the configured rule entirely: bucket keyed by the values and keys, metric by the keys', () => {
    const e = entries('tenant=acme', 'route=');
    const r = resolveDescriptorLimit(c, 'api', e, { requestsPerUnit: 42, unit: 'hour' })!;
    expect(r.source).toBe('override');
    // Upstream reports `api.tenant_acme.route`; request values never reach a label here.
    expect(r.statsKey).toBe('api.tenant.route');
    expect(r.rule.fullKey).toBe('api.tenant.route');
    expect(r.bucketValues).toEqual(['acme', '', 'tenant', 'route']);
    expect(r.rule).toMatchObject({
      requestsPerUnit: 42,
      unit: 'hour',
      shadowMode: false,
      quotaMode: false,
      name: '',
      replaces: [],
      detailedMetric: false,
      unlimited: false,
    });
    expect(r.rule.sluice).toEqual({
      algorithm: 'fixed-window',
      params: { limit: 42, windowMs: 3_600_000 },
    });
  });

  it('keep descriptors whose keys join alike apart: their buckets differ', () => {
    const over = { requestsPerUnit: 1, unit: 'second' } as const;
    const a = resolveDescriptorLimit(c, 'api', entries('a.b=x', 'c=y'), over)!;
    const b = resolveDescriptorLimit(c, 'api', entries('a=x', 'b.c=y'), over)!;
    expect(a.statsKey).toBe(b.statsKey);
    expect(a.bucketValues).not.toEqual(b.bucketValues);
  });

  it('apply even when no configured rule matches, but never for an unknown domain', () => {
    const e = entries('nothing=here');
    expect(resolveDescriptorLimit(c, 'api', e)).toBeUndefined();
    expect(
      resolveDescriptorLimit(c, 'api', e, { requestsPerUnit: 1, unit: 'second' })?.statsKey,
    ).toBe('api.nothing');
    expect(
      resolveDescriptorLimit(c, 'nope', e, { requestsPerUnit: 1, unit: 'second' }),
    ).toBeUndefined();
  });

  it('without one, resolve to the configured match', () => {
    const r = resolveDescriptorLimit(c, 'api', entries('tenant=acme'))!;
    expect(r.source).toBe('config');
    expect(r.rule.requestsPerUnit).toBe(600);
    expect(r.match?.via).toEqual(['default']);
  });

  it('descriptorKey leaves out empty values with their underscore', () => {
    expect(descriptorKey('d', entries('a=1', 'b=', 'c=3'))).toBe('d.a_1.b.c_3');
  });
});

describe('replaces', () => {
  const rule = (name: string, replaces: string[] = [], unlimited = false) => ({
    name,
    replaces,
    unlimited,
  });

  it('drops a named rule that another matched rule replaces', () => {
    expect(replacedMask([rule('specific'), rule('', ['specific'])])).toEqual([true, false]);
  });

  it('counts replaces from rules that are themselves replaced (no chains, no order)', () => {
    expect(replacedMask([rule('a', ['b']), rule('b', ['a'])])).toEqual([true, true]);
    expect(replacedMask([rule('a'), rule('b', ['a']), rule('c', ['b'])])).toEqual([
      true,
      true,
      false,
    ]);
  });

  it('counts replaces from unlimited rules, and never drops an unlimited one', () => {
    expect(replacedMask([rule('a'), rule('u', ['a'], true)])).toEqual([true, false]);
    expect(replacedMask([rule('u', [], true), rule('', ['u'])])).toEqual([false, false]);
  });

  it('ignores descriptors without a rule and rules without a name', () => {
    expect(replacedMask([undefined, rule('', []), rule('x', [''])])).toEqual([false, false, false]);
  });
});

describe('hits_addend', () => {
  it('a descriptor’s own value wins, 0 included; else the request’s, where 0 means 1', () => {
    expect(hitsAddends(undefined, [undefined, 5, 0])).toEqual([1, 5, 0]);
    expect(hitsAddends(0, [undefined])).toEqual([1]);
    expect(hitsAddends(3, [undefined, 7])).toEqual([3, 7]);
  });
});

describe('response codes', () => {
  const ok = (remaining: number, extra: Partial<DescriptorOutcome> = {}): DescriptorOutcome => ({
    code: 'OK',
    unlimited: false,
    quotaMode: false,
    hasLimit: true,
    remaining,
    ...extra,
  });
  const over = (extra: Partial<DescriptorOutcome> = {}): DescriptorOutcome =>
    ok(0, { code: 'OVER_LIMIT', ...extra });
  const noRule: DescriptorOutcome = ok(0, { hasLimit: false });
  const unlimited: DescriptorOutcome = ok(UNLIMITED_REMAINING, {
    unlimited: true,
    hasLimit: false,
  });

  it('a shadow_mode rule answers OK even when over its limit', () => {
    expect(descriptorCode(true, false)).toBe('OVER_LIMIT');
    expect(descriptorCode(true, true)).toBe('OK');
    expect(descriptorCode(false, false)).toBe('OK');
  });

  it('OVER_LIMIT when any descriptor is over; OK otherwise', () => {
    expect(overallResult([ok(3), over(), noRule]).code).toBe('OVER_LIMIT');
    expect(overallResult([ok(3), noRule, unlimited]).code).toBe('OK');
    expect(overallResult([]).code).toBe('OK');
  });

  it('quota descriptors fail the request only when all of them are over', () => {
    const q = { quotaMode: true };
    expect(overallResult([over(q), ok(2, q)]).code).toBe('OK');
    expect(overallResult([over(q), over(q)]).code).toBe('OVER_LIMIT');
    // All quota descriptors over is enough, whatever the non-quota ones say.
    expect(overallResult([over(q), ok(1)]).code).toBe('OVER_LIMIT');
    expect(overallResult([ok(2, q), over()]).code).toBe('OVER_LIMIT');
  });

  it('global quota mode makes every descriptor a quota one, rule or not', () => {
    const g = { globalShadowMode: false, globalQuotaMode: true };
    expect(overallResult([over(), ok(1)], g).code).toBe('OK');
    expect(overallResult([over(), noRule], g).code).toBe('OK');
    expect(overallResult([over(), over()], g).code).toBe('OVER_LIMIT');
    // Unlimited descriptors take no part.
    expect(overallResult([over(), unlimited], g).code).toBe('OVER_LIMIT');
  });

  it('global shadow mode turns an OVER_LIMIT answer into OK, and says so', () => {
    const g = { globalShadowMode: true, globalQuotaMode: false };
    expect(overallResult([over()], g)).toMatchObject({ code: 'OK', globalShadowApplied: true });
    expect(overallResult([ok(1)], g)).toMatchObject({ code: 'OK', globalShadowApplied: false });
  });

  it('headers describe the last over-limit descriptor, else the least remaining', () => {
    expect(overallResult([ok(5), ok(2), ok(2), noRule]).headerIndex).toBe(1);
    expect(overallResult([over(), ok(2), over(), ok(0)]).headerIndex).toBe(2);
    expect(overallResult([over({ quotaMode: true }), ok(2)]).headerIndex).toBe(0);
    expect(overallResult([noRule, unlimited]).headerIndex).toBeUndefined();
  });
});
