import { describe, expect, it } from 'vitest';
import {
  cleanTags,
  domainNotFoundStatName,
  nameWithTags,
  ruleStatName,
  sanitizeStatName,
} from '../../../src/metrics/statsd/stat-name.js';

describe("upstream's stat names", () => {
  it.each([
    // [key, sanitized]: ':' and '|' become '_', and so do the dots of an IPv4 address only.
    ['tenant_acme', 'tenant_acme'],
    ['remote_address_10.0.0.1', 'remote_address_10_0_0_1'],
    ['path_/a:b|c', 'path_/a_b_c'],
    ['version_1.2.3', 'version_1.2.3'],
    ['a.b_192.168.1.20.c', 'a.b_192_168_1_20.c'],
  ])('sanitizes %s as %s', (key, sanitized) => {
    expect(sanitizeStatName(key)).toBe(sanitized);
  });

  it('names rule and domain stats under ratelimit.service.rate_limit', () => {
    expect(ruleStatName('edge.remote_address_10.0.0.1', 'over_limit')).toBe(
      'ratelimit.service.rate_limit.edge.remote_address_10_0_0_1.over_limit',
    );
    expect(domainNotFoundStatName('nope')).toBe(
      'ratelimit.service.rate_limit.nope.domain_not_found',
    );
  });

  it('writes tags into a plain statsd name as gostats does: sorted, cleaned, empty ones dropped', () => {
    const tags = cleanTags({ zone: 'eu.1', app: 'rl:x', empty: '' });
    expect(tags).toEqual([
      ['app', 'rl_x'],
      ['zone', 'eu_1'],
    ]);
    expect(nameWithTags('ratelimit.service.config_load_success', tags)).toBe(
      'ratelimit.service.config_load_success.__app=rl_x.__zone=eu_1',
    );
  });
});
