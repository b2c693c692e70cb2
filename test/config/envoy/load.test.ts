import { describe, expect, it } from 'vitest';
import { publicRuleName } from '../../../src/config/envoy/envoy-config.js';
import {
  formatEnvoyConfigError,
  loadEnvoyConfigFiles,
  parseEnvoyConfigYaml,
} from '../../../src/config/envoy/load.js';
import { PolicyError } from '../../../src/core/errors.js';
import { loadFixtures, source } from './fixtures.js';

function errorOf(run: () => unknown): PolicyError {
  try {
    run();
  } catch (e) {
    expect(e).toBeInstanceOf(PolicyError);
    return e as PolicyError;
  }
  throw new Error('expected a PolicyError');
}

const issuesOf = (e: PolicyError): [string | undefined, string, string][] =>
  e.issues.map((i) => [i.file, i.path, i.message]);

describe('upstream validation messages: one fixture per mistake', () => {
  // [fixture, message]: each is upstream's exact text for the same mistake, and the
  // issue has no path so that it prints as upstream prints it: "<file>: <message>".
  const cases: [string, string][] = [
    ['empty-domain.yaml', 'config file cannot have empty domain'],
    ['empty-key.yaml', 'descriptor has empty key'],
    [
      'duplicate-composite-key.yaml',
      "duplicate descriptor composite key 'payments.tenant_acme.route'",
    ],
    ['bad-unit.yaml', "invalid rate limit unit 'fortnight'"],
    ['missing-unit.yaml', "invalid rate limit unit ''"],
    ['unknown-unit.yaml', "invalid rate limit unit 'unknown'"],
    ['unlimited-with-unit.yaml', 'should not specify rate limit unit when unlimited'],
    ['replaces-empty.yaml', 'should not have an empty replaces entry'],
    ['replaces-self.yaml', 'replaces should not contain name of same descriptor'],
    [
      'share-threshold-no-wildcard.yaml',
      "share_threshold can only be used with wildcard values (containing '*'), but found key 'tenant_acme'",
    ],
    ['unknown-key.yaml', "config error, unknown key 'rate_limits'"],
    ['unknown-nested-key.yaml', "config error, unknown key 'request_per_unit'"],
    ['non-string-key.yaml', 'config error, key is not of type string: 42'],
    [
      'list-of-scalars.yaml',
      'config error, yaml file contains list of type other than map: tenant',
    ],
    ['float-value.yaml', 'error checking config'],
    [
      'top-level-list.yaml',
      'error loading config file: yaml: unmarshal errors:\n' +
        '  line 1: cannot unmarshal !!seq into map[interface {}]interface {}',
    ],
    [
      'wrong-types.yaml',
      'error loading config file: yaml: unmarshal errors:\n' +
        '  line 4: cannot unmarshal !!str `true` into bool\n' +
        '  line 7: cannot unmarshal !!int `-5` into uint32\n' +
        '  line 9: cannot unmarshal !!str `checkout` into []config.YamlDescriptor',
    ],
  ];

  it.each(cases)('%s', (file, message) => {
    const e = errorOf(() => loadFixtures([file]));
    expect(e.code).toBe('SLUICE_ERR_CONFIG_INVALID');
    expect(issuesOf(e)).toEqual([[file, '', message]]);
    expect(e.message).toBe(`${file}: ${message}`);
    expect(formatEnvoyConfigError(e)).toBe(`error loading rate limit configs: ${file}: ${message}`);
  });

  it('YAML syntax errors are SLUICE_ERR_CONFIG_PARSE, worded by our parser after upstream’s prefix', () => {
    const e = errorOf(() => loadFixtures(['not-yaml.txt']));
    expect(e.code).toBe('SLUICE_ERR_CONFIG_PARSE');
    expect(issuesOf(e)).toEqual([
      ['not-yaml.txt', '', 'error loading config file: yaml: line 4: Missing closing "quote'],
    ]);
  });

  it('a domain in two files is a duplicate, named in the second file', () => {
    const e = errorOf(() => loadFixtures(['shop-a.yaml', 'shop-b.yaml']));
    expect(issuesOf(e)).toEqual([['shop-b.yaml', '', "duplicate domain 'shop' in config file"]]);
  });

  it('with mergeDomainConfig, files add top-level descriptors to one domain', () => {
    const c = loadFixtures(['shop-a.yaml', 'shop-b.yaml'], true);
    expect(Object.keys(c.domains)).toEqual(['shop']);
    expect(Object.keys(c.domains.shop!.descriptors.nodes).sort()).toEqual([
      'route_checkout',
      'tenant',
    ]);
    expect(c.domains.shop!.files).toEqual(['shop-a.yaml', 'shop-b.yaml']);
  });

  it('a top-level sluice.decision sets the domain’s decision mode; merged files must agree', () => {
    expect(loadFixtures(['merge-decision-1.yaml']).domains.shop!.decision).toBe('all-or-nothing');
    expect(loadFixtures(['shop-a.yaml']).domains.shop!.decision).toBeUndefined();
    // a file without the block leaves the domain's setting as it is
    const merged = loadFixtures(['merge-decision-3.yaml', 'merge-decision-1.yaml'], true);
    expect(merged.domains.shop!.decision).toBe('all-or-nothing');
    const e = errorOf(() =>
      loadFixtures(
        ['merge-decision-1.yaml', 'merge-decision-3.yaml', 'merge-decision-2.yaml'],
        true,
      ),
    );
    expect(issuesOf(e)).toEqual([
      [
        'merge-decision-2.yaml',
        'sluice.decision',
        '"per-descriptor" conflicts with "all-or-nothing" set for the same domain in merge-decision-1.yaml',
      ],
    ]);
  });

  it('merging is not deep: the same composite key in two files is a duplicate', () => {
    const e = errorOf(() => loadFixtures(['shop-a.yaml', 'shop-c.yaml'], true));
    expect(issuesOf(e)).toEqual([
      ['shop-c.yaml', '', "duplicate descriptor composite key 'shop.tenant'"],
    ]);
  });

  it('reports every file’s issues at once, in file order', () => {
    const e = errorOf(() =>
      loadEnvoyConfigFiles([
        source('bad-unit.yaml'),
        source('shop-a.yaml'),
        source('empty-domain.yaml'),
      ]),
    );
    expect(issuesOf(e)).toEqual([
      ['bad-unit.yaml', '', "invalid rate limit unit 'fortnight'"],
      ['empty-domain.yaml', '', 'config file cannot have empty domain'],
    ]);
    expect(formatEnvoyConfigError(e)).toBe(
      "error loading rate limit configs: bad-unit.yaml: invalid rate limit unit 'fortnight'\n" +
        'error loading rate limit configs: empty-domain.yaml: config file cannot have empty domain',
    );
  });

  it('formats any other error after the same prefix', () => {
    expect(formatEnvoyConfigError(new Error('boom'))).toBe(
      'error loading rate limit configs: boom',
    );
  });

  it('no files give an empty config', () => {
    expect(loadEnvoyConfigFiles([])).toEqual({ domains: {}, warnings: [] });
  });
});

describe('Sluice extension validation', () => {
  const cases: [string, string, string][] = [
    [
      'sluice-unknown-field.yaml',
      'descriptors[0].sluice',
      "unknown field 'algoritm' (expected one of algorithm, batch, burst, failure_mode, local, name)",
    ],
    [
      'sluice-bad-algorithm.yaml',
      'descriptors[0].sluice.algorithm',
      'expected one of token-bucket, gcra, fixed-window, sliding-log, sliding-window-counter, leaky-bucket; got "token_bucket"',
    ],
    [
      'sluice-bad-burst.yaml',
      'descriptors[0].sluice.burst',
      'expected a whole number from 1 to 9007199254740991; got "0"',
    ],
    [
      'sluice-burst-on-window.yaml',
      'descriptors[0].sluice.burst',
      'only applies to algorithms token-bucket, gcra, leaky-bucket; this rule uses fixed-window',
    ],
    [
      'sluice-bad-failure-mode.yaml',
      'descriptors[0].sluice.failure_mode',
      'expected one of open, closed, stale; got "fail-open"',
    ],
    [
      'sluice-bad-name.yaml',
      'descriptors[0].sluice.name',
      'must start with a letter or digit and use only letters, digits, "_", "." or "-" (at most 128); got "payments tenant"',
    ],
    [
      'sluice-not-a-map.yaml',
      'descriptors[0].sluice',
      'expected a map with any of algorithm, batch, burst, failure_mode, local, name',
    ],
    [
      'sluice-without-rate-limit.yaml',
      'descriptors[0].sluice',
      'needs a rate_limit on the same descriptor',
    ],
    [
      'sluice-on-unlimited.yaml',
      'descriptors[0].sluice.algorithm',
      'does not apply to an unlimited rate_limit',
    ],
    [
      'sluice-on-deny-all.yaml',
      'descriptors[0].sluice.algorithm',
      'does not apply when requests_per_unit is 0 (every request is denied)',
    ],
    [
      'sluice-misplaced.yaml',
      'descriptors[0].rate_limit.sluice',
      'a sluice block belongs on a descriptor, beside rate_limit, or at the top level (the domain)',
    ],
    [
      'sluice-domain-bad-decision.yaml',
      'sluice.decision',
      'expected one of per-descriptor, all-or-nothing; got "all_or_nothing"',
    ],
    [
      'sluice-domain-unknown-field.yaml',
      'sluice',
      "unknown field 'algorithm' (expected decision) ('algorithm' belongs in a descriptor's sluice block)",
    ],
    ['sluice-domain-not-a-map.yaml', 'sluice', 'expected a map with decision'],
    ['sluice-bad-local.yaml', 'descriptors[0].sluice.local.rate', 'must be > 0'],
    [
      'sluice-batch-too-big.yaml',
      'descriptors[0].sluice.batch.size',
      "batch size 80 exceeds the policy's capacity 50: it could never be reserved",
    ],
  ];

  it.each(cases)('%s', (file, path, message) => {
    const e = errorOf(() => loadFixtures([file]));
    expect(e.code).toBe('SLUICE_ERR_CONFIG_INVALID');
    expect(issuesOf(e)).toEqual([[file, path, message]]);
    expect(formatEnvoyConfigError(e)).toBe(
      `error loading rate limit configs: ${file}: ${path}: ${message}`,
    );
  });

  it('loads every extension with defaults filled in, and upstream rules as a 1-unit fixed window', () => {
    const c = loadFixtures(['sluice-valid.yaml']);
    const top = c.domains.payments!.descriptors.nodes;
    const tenant = top.tenant!.rule!;
    expect(tenant.sluice).toEqual({
      algorithm: 'token-bucket',
      burst: 50,
      failureMode: 'stale',
      name: 'payments-tenant',
      params: { rate: 600, periodMs: 60_000, burst: 50 },
    });
    expect(publicRuleName(tenant)).toBe('payments-tenant');
    const transfers = top.tenant!.children.nodes.route_transfers!.rule!;
    expect(transfers.sluice).toEqual({
      algorithm: 'sliding-window-counter',
      failureMode: 'closed',
      params: { limit: 5, windowMs: 1_000 },
    });
    expect(publicRuleName(transfers)).toBe('payments.tenant.route_transfers');
    expect(top.export!.rule!.sluice.params).toEqual({
      rate: 20,
      periodMs: 3_600_000,
      capacity: 2,
      mode: 'reject',
    });
    // No sluice block: upstream's fixed window of one unit.
    expect(top.partner!.rule!.sluice).toEqual({
      algorithm: 'fixed-window',
      params: { limit: 1000, windowMs: 86_400_000 },
    });
    // requests_per_unit 0 denies everything: no algorithm parameters.
    expect(top.tenant_banned!.rule!.sluice).toEqual({ algorithm: 'fixed-window' });
    const internal = top.internal!.rule!;
    expect(internal.unlimited).toBe(true);
    expect(internal.unit).toBeUndefined();
    expect(publicRuleName(internal)).toBe('internal-traffic');
  });
});

describe('what upstream accepts', () => {
  it('types scalars by YAML 1.1 rules, and keeps string fields as written', () => {
    const c = loadFixtures(['yaml11-scalars.yaml']);
    const d = c.domains['0x10']!.descriptors.nodes;
    const tenant = d.tenant_010!;
    expect(tenant.value).toBe('010');
    expect(tenant.rule).toMatchObject({
      unit: 'minute',
      requestsPerUnit: 16,
      shadowMode: true,
      detailedMetric: true,
    });
    expect(d['region_2024-01-02']!.rule).toMatchObject({ unit: 'day', requestsPerUnit: 1000 });
  });

  it('resolves anchors, aliases and merge keys', () => {
    const c = loadFixtures(['anchors.yaml']);
    const d = c.domains.payments!.descriptors.nodes;
    expect(d.tenant!.rule).toMatchObject({ unit: 'minute', requestsPerUnit: 100 });
    expect(d.route!.rule).toMatchObject({ unit: 'minute', requestsPerUnit: 7 });
    expect(c.warnings).toEqual([]);
  });

  it('accepts keys at levels where they do nothing, with a warning for each', () => {
    const c = loadFixtures(['ignored-keys.yaml']);
    expect(c.warnings.map((w) => [w.path, w.message])).toEqual([
      ['descriptors[0].descriptors[0]', "'key' is given more than once; the last one is used"],
      ['', "'unit' has no effect here and is ignored; it belongs in rate_limit"],
      [
        'descriptors[0]',
        "'requests_per_unit' has no effect here and is ignored; it belongs in rate_limit",
      ],
      ['', 'only the first YAML document is read; 1 more ignored'],
      ['descriptors[0]', 'shadow_mode has no effect without a rate_limit on the same descriptor'],
    ]);
    const tenant = c.domains.payments!.descriptors.nodes.tenant!;
    expect(tenant.rule).toBeUndefined();
    // The later "key" wins, as in yaml.v2.
    expect(Object.keys(tenant.children.nodes)).toEqual(['method']);
    expect(c.domains.ignored).toBeUndefined();
  });

  it('keeps the last of a repeated key anywhere, as yaml.v2 does, with a warning for each', () => {
    const c = loadFixtures(['repeated-keys.yaml']);
    expect(c.warnings.map((w) => [w.path, w.message])).toEqual([
      ['', "'domain' is given more than once; the last one is used"],
      ['descriptors[0].rate_limit', "'unit' is given more than once; the last one is used"],
      ['descriptors[0].metadata', "'team' is given more than once; the last one is used"],
      ['descriptors[0].metadata.owner', "'name' is given more than once; the last one is used"],
      ['descriptors[0].sluice', "'algorithm' is given more than once; the last one is used"],
    ]);
    expect(Object.keys(c.domains)).toEqual(['payments']);
    const rule = c.domains.payments!.descriptors.nodes.tenant!.rule!;
    expect(rule).toMatchObject({
      unit: 'minute',
      metadata: { team: 'payments', owner: { name: 'b' } },
      sluice: { algorithm: 'token-bucket', burst: 20 },
    });
  });

  it('returns a deep-frozen config', () => {
    const c = loadFixtures(['sluice-valid.yaml']);
    const tenant = c.domains.payments!.descriptors.nodes.tenant!;
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.domains)).toBe(true);
    expect(Object.isFrozen(tenant.rule!.sluice.params)).toBe(true);
    expect(Object.isFrozen(tenant.children.wildcards)).toBe(true);
  });
});

describe('parseEnvoyConfigYaml', () => {
  it('reads one file without building the config', () => {
    const doc = parseEnvoyConfigYaml('domain: d\ndescriptors:\n  - key: k\n', 'one.yaml');
    expect(doc.name).toBe('one.yaml');
    expect(doc.root.domain).toBe('d');
    expect(doc.root.descriptors.map((x) => [x.key, x.path])).toEqual([['k', 'descriptors[0]']]);
  });

  it('throws with the file named, for mistakes it can see alone', () => {
    const e = errorOf(() => parseEnvoyConfigYaml('domain: d\nratelimit: {}\n', 'one.yaml'));
    expect(issuesOf(e)).toEqual([['one.yaml', '', "config error, unknown key 'ratelimit'"]]);
  });

  it('leaves whole-config rules (empty domain, units) to loading', () => {
    expect(parseEnvoyConfigYaml('descriptors: []\n', 'no-domain.yaml').root).toEqual({
      domain: '',
      descriptors: [],
    });
  });

  it('says an empty file (or one with only comments) is empty, as for a policy file', () => {
    for (const text of ['', '\n# nothing yet\n']) {
      const e = errorOf(() => parseEnvoyConfigYaml(text, 'empty.yaml'));
      expect(e.code).toBe('SLUICE_ERR_CONFIG_INVALID');
      expect(issuesOf(e)).toEqual([['empty.yaml', '', 'the file is empty']]);
    }
  });
});

describe('yaml.v2 corner cases', () => {
  const load = (text: string): unknown => loadEnvoyConfigFiles([{ name: 'x.yaml', text }]);
  const messageOf = (text: string): string =>
    errorOf(() => load(text))
      .issues.map((i) => i.message)
      .join('\n');

  it('shows a value of exactly 10 bytes whole', () => {
    expect(
      messageOf(
        'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 4294967296 }\n',
      ),
    ).toBe(
      'error loading config file: yaml: unmarshal errors:\n  line 4: cannot unmarshal !!int `4294967296` into uint32',
    );
  });

  it.each([
    ['true: x\n', 'config error, key is not of type string: true'],
    ['~: x\n', 'config error, key is not of type string: <nil>'],
    ['1.5e6: x\n', 'config error, key is not of type string: 1.5e+06'],
    [
      'domain: d\ndescriptors: [[a, 1]]\n',
      'config error, yaml file contains list of type other than map: [a 1]',
    ],
    [
      'domain: d\ndescriptors: [~]\n',
      'config error, yaml file contains list of type other than map: <nil>',
    ],
    ['domain: 9223372036854775808\n', 'error checking config'],
    ['"domain": d\nkey: [1]\n', 'config error, yaml file contains list of type other than map: 1'],
    [
      'domain: { key: x }\n',
      'error loading config file: yaml: unmarshal errors:\n  line 1: cannot unmarshal !!map into string',
    ],
    [
      'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 42949672960 }\n',
      'error loading config file: yaml: unmarshal errors:\n  line 4: cannot unmarshal !!int `4294967...` into uint32',
    ],
    [
      'domain: d\ndescriptors:\n  - key: k\n    metadata: [a]\n',
      'error loading config file: yaml: unmarshal errors:\n  line 4: cannot unmarshal !!seq into map[string]interface {}',
    ],
    [
      'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, replaces: { name: x } }\n',
      'error loading config file: yaml: unmarshal errors:\n  line 4: cannot unmarshal !!map into []config.yamlReplaces',
    ],
    [
      'domain: d\ndescriptors:\n  - key: k\n    rate_limit: 5\n',
      'error loading config file: yaml: unmarshal errors:\n  line 4: cannot unmarshal !!int `5` into config.YamlRateLimit',
    ],
    [
      'domain: d\n? [1, b]\n: x\n',
      'error loading config file: yaml: invalid map key: []interface {}{1, "b"}',
    ],
    ['a: &x [*x]\n', "error loading config file: yaml: anchor 'x' value contains itself"],
    [
      'domain: d\n<<: 5\n',
      'error loading config file: yaml: map merge requires map or sequence of maps as the value',
    ],
    [
      'domain: !!int abc\n',
      'error loading config file: yaml: cannot decode !!str `abc` as a !!int',
    ],
    [
      'foo\n',
      'error loading config file: yaml: unmarshal errors:\n  line 1: cannot unmarshal !!str `foo` into map[interface {}]interface {}',
    ],
  ])('%j', (text, message) => {
    expect(messageOf(text)).toBe(message);
  });

  it('a "rate_limit: null" is no rule, but "rate_limit: Null" is an empty one (yaml.v2)', () => {
    const c = load('domain: d\ndescriptors:\n  - key: k\n    rate_limit: null\n') as {
      domains: Record<string, { descriptors: { nodes: Record<string, { rule?: unknown }> } }>;
    };
    expect(c.domains.d!.descriptors.nodes.k!.rule).toBeUndefined();
    expect(messageOf('domain: d\ndescriptors:\n  - key: k\n    rate_limit: Null\n')).toBe(
      "invalid rate limit unit ''",
    );
  });

  it('keeps metadata as plain data', () => {
    const c = loadFixtures(['match-flags.yaml']);
    expect(c.domains.api!.descriptors.nodes.credits!.rule!.metadata).toEqual({
      plan: { tier: 'gold' },
      owners: ['billing'],
    });
  });

  it('an unlimited rule may leave the unit out, or give an unknown one (upstream does not check it)', () => {
    const c = load(
      'domain: d\ndescriptors:\n  - key: a\n    rate_limit: { unlimited: true }\n  - key: b\n    rate_limit: { unlimited: true, unit: unknown }\n',
    ) as {
      domains: Record<string, { descriptors: { nodes: Record<string, { rule?: unknown }> } }>;
    };
    expect(c.domains.d!.descriptors.nodes.b!.rule).toMatchObject({ unlimited: true });
  });

  it('reads units in any letter case, as upstream upper-cases them', () => {
    const c = load(
      'domain: d\ndescriptors:\n  - key: a\n    rate_limit: { unit: wEeK, requests_per_unit: 1 }\n',
    ) as {
      domains: Record<string, { descriptors: { nodes: Record<string, { rule?: unknown }> } }>;
    };
    expect(c.domains.d!.descriptors.nodes.a!.rule).toMatchObject({ unit: 'week' });
  });
});
