import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadPolicyFile } from '../../src/config/load.js';
import { ENVOY_CONFIG_GIVEN, parsePolicies } from '../../src/config/policies.js';
import { PolicyError } from '../../src/core/errors.js';
import { maxDebtOf } from '../../src/config/settle-settings.js';

const fixture = (name: string): string => join(import.meta.dirname, 'fixtures', name);

async function errorOf(file: string): Promise<PolicyError> {
  const e = await loadPolicyFile(fixture(file)).then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(PolicyError);
  return e as PolicyError;
}

describe('policy files: one fixture per mistake, exact messages', () => {
  const cases: [file: string, code: string, issues: [path: string, message: string][]][] = [
    [
      'unknown-field.yaml',
      'SLUICE_ERR_CONFIG_INVALID',
      [
        [
          'policies[0]',
          'unknown key "bursts" (not a policy field, nor a field of algorithm "token-bucket")',
        ],
      ],
    ],
    ['negative-rate.yaml', 'SLUICE_ERR_CONFIG_INVALID', [['policies[0].rate', 'must be > 0']]],
    [
      'bad-duration.yaml',
      'SLUICE_ERR_CONFIG_INVALID',
      [
        [
          'policies[0].window',
          'expected a duration of at least 1ms as whole ms (number) or a string like "500ms", "1s", "1m", "1h", "1d"; got "5 parsecs"',
        ],
      ],
    ],
    [
      'cost-exceeds-burst.yaml',
      'SLUICE_ERR_CONFIG_INVALID',
      [
        [
          'policies[0].cost.rules[0].cost',
          "cost 50 exceeds the policy's capacity 20: it could never be admitted",
        ],
      ],
    ],
    [
      'local-and-batch-bad.yaml',
      'SLUICE_ERR_CONFIG_INVALID',
      [
        [
          'policies[0].batch.ttl',
          'expected a duration of at least 1ms as whole ms (number) or a string like "500ms", "1s", "1m", "1h", "1d"; got 0',
        ],
        [
          'policies[0].local.burst',
          "local burst 4 is below the policy's cost 5: every instance would deny that cost, always",
        ],
        ['policies[1].local', 'unknown key "periodd"'],
        [
          'policies[1].batch',
          'does not apply to a shadow policy (it never blocks, so reserved units would be held for nothing)',
        ],
      ],
    ],
    [
      'duplicate-name.yaml',
      'SLUICE_ERR_CONFIG_INVALID',
      [['policies[1].name', 'duplicate policy name "api" (first at policies[0])']],
    ],
    [
      'bad-identity.yaml',
      'SLUICE_ERR_CONFIG_INVALID',
      [['policies[0].identity[0]', '"route" must be a match key without a fixed value']],
    ],
    [
      'no-policies-key.json',
      'SLUICE_ERR_CONFIG_INVALID',
      [
        ['policies', 'missing; expected a list'],
        ['', 'unknown key "rules"'],
      ],
    ],
    [
      'four-problems.yaml',
      'SLUICE_ERR_CONFIG_INVALID',
      [
        [
          'policies[0].name',
          'must start with a letter or digit and use only letters, digits, "_", "." or "-" (at most 128)',
        ],
        ['policies[0].rate', 'must be > 0'],
        [
          'policies[0]',
          'unknown key "bursts" (not a policy field, nor a field of algorithm "token-bucket")',
        ],
        ['policies[0].identity[0]', '"route" must be a match key without a fixed value'],
      ],
    ],
    [
      'top-level-and-policy.yaml',
      'SLUICE_ERR_CONFIG_INVALID',
      [
        ['', 'unknown key "version"'],
        ['policies[0].rate', 'must be > 0'],
      ],
    ],
    [
      'wrong-types.yaml',
      'SLUICE_ERR_CONFIG_INVALID',
      [
        ['policies[0].match', 'expected a list, got "tenant"'],
        ['policies[0].cost', 'rules: expected a list, got 3'],
        ['policies[0].shadow', 'expected true or false, got "yes"'],
        ['policies[0].rate', 'expected a number, got "fast"'],
      ],
    ],
    ['empty.yaml', 'SLUICE_ERR_CONFIG_INVALID', [['', 'the file is empty']]],
    ['only-comments.yaml', 'SLUICE_ERR_CONFIG_INVALID', [['', 'the file is empty']]],
    ['envoy-config.yaml', 'SLUICE_ERR_CONFIG_INVALID', [['', ENVOY_CONFIG_GIVEN]]],
    ['envoy-config.json', 'SLUICE_ERR_CONFIG_INVALID', [['', ENVOY_CONFIG_GIVEN]]],
  ];
  for (const [file, code, issues] of cases) {
    it(file, async () => {
      const e = await errorOf(file);
      expect(e.code).toBe(code);
      expect(e.issues.map((i) => [i.path, i.message])).toEqual(issues);
      for (const i of e.issues) expect(i.file).toBe(fixture(file));
      expect(e.message).toContain(`${fixture(file)}: `);
    });
  }

  it('reports every issue of a file at once', async () => {
    const e = await errorOf('many-issues.yaml');
    expect(e.issues.map((i) => i.path)).toEqual([
      'policies[0].name',
      'policies[0].match',
      'policies[1].algorithm',
    ]);
    expect(e.message).toMatch(/^invalid policies \(3 issues\):/);
  });

  it('names the line of a YAML syntax error', async () => {
    const e = await errorOf('not-yaml.yaml');
    expect(e.code).toBe('SLUICE_ERR_CONFIG_PARSE');
    expect(e.message).toMatch(/not-yaml\.yaml: not valid YAML: .*at line \d+, column \d+/);
  });

  it('refuses duplicate keys in YAML rather than keeping the last', async () => {
    const e = await errorOf('duplicate-key.yaml');
    expect(e.code).toBe('SLUICE_ERR_CONFIG_PARSE');
    expect(e.message).toMatch(/Map keys must be unique/);
  });

  it('names a JSON syntax error', async () => {
    const e = await errorOf('not-json.json');
    expect(e.code).toBe('SLUICE_ERR_CONFIG_PARSE');
    expect(e.message).toMatch(/not-json\.json: not valid JSON: /);
  });

  it('says an envoyproxy/ratelimit file is one, and where it belongs', () => {
    expect(ENVOY_CONFIG_GIVEN).toBe(
      'this is envoyproxy/ratelimit config (it has a top-level "domain"), not a Sluice policy file; ' +
        'give it to "sluice serve --config" (or check it with "sluice validate")',
    );
  });

  it('names a missing file', async () => {
    const e = await errorOf('does-not-exist.yaml');
    expect(e.code).toBe('SLUICE_ERR_CONFIG_READ');
    expect(e.issues).toEqual([
      {
        file: fixture('does-not-exist.yaml'),
        path: '',
        message: 'cannot read: no such file or directory (ENOENT)',
      },
    ]);
  });
});

describe('policy validation: defaults and shapes', () => {
  it('loads the payments example with its documented values', async () => {
    const set = await loadPolicyFile(join(import.meta.dirname, '../../examples/policies.yaml'));
    expect(set.policies).toHaveLength(1);
    const p = set.policies[0]!;
    expect(p).toMatchObject({
      name: 'payments-tenant',
      match: [{ key: 'tenant' }],
      identity: ['tenant'],
      algorithm: 'token-bucket',
      params: { rate: 100, periodMs: 1_000, burst: 20 },
      failureMode: 'closed',
      shadow: false,
    });
    expect(p.cost.rules.map((r) => r.cost)).toEqual([5, 1]);
    expect(
      Object.isFrozen(p) && Object.isFrozen(p.params) && Object.isFrozen(p.cost.rules[0]),
    ).toBe(true);
  });

  it('applies documented defaults: token bucket, burst ceil(rate), period 1s, cost 1, open, not shadow', () => {
    const [p] = parsePolicies([{ name: 'x', match: ['user'], rate: 2.5 }]).policies;
    expect(p).toMatchObject({
      algorithm: 'token-bucket',
      params: { rate: 2.5, periodMs: 1_000, burst: 3 },
      cost: { defaultCost: 1, rules: [] },
      failureMode: 'open',
      shadow: false,
      identity: ['user'],
    });
  });

  it('reads local and batch with their defaults, and gives their issues stable codes', () => {
    const [p] = parsePolicies([
      { name: 'x', match: ['user'], rate: 100, local: { rate: 10 }, batch: { size: 50 } },
    ]).policies;
    expect(p!.local).toEqual({ rate: 10, periodMs: 1_000, burst: 10 });
    expect(p!.batch).toEqual({ size: 50, ttlMs: 1_000 });
    let caught: unknown;
    try {
      parsePolicies([
        { name: 'y', match: ['user'], rate: 100, local: { rate: -1 }, batch: { size: 500 } },
      ]);
    } catch (e) {
      caught = e;
    }
    expect((caught as PolicyError).issues.map((i) => [i.path, i.code])).toEqual([
      ['[0].local.rate', 'SLUICE_ERR_LOCAL_INVALID'],
      ['[0].batch.size', 'SLUICE_ERR_BATCH_INVALID'],
    ]);
  });

  it('reads settle, keeps it absent when not given, and gives its issues SLUICE_ERR_SETTLE_INVALID', () => {
    const [p, q] = parsePolicies([
      { name: 'x', match: ['user'], rate: 100, settle: { maxDebt: 40 } },
      { name: 'y', match: ['user'], rate: 100 },
    ]).policies;
    expect(p!.settle).toEqual({ maxDebt: 40 });
    expect(maxDebtOf(p!)).toBe(40);
    // Without a block the default is the capacity: burst ceil(100) = 100.
    expect(q!.settle).toBeUndefined();
    expect(maxDebtOf(q!)).toBe(100);
    expect(
      maxDebtOf(parsePolicies([{ name: 'z', match: ['u'], rate: 1, settle: {} }]).policies[0]!),
    ).toBe(1);
    let caught: unknown;
    try {
      parsePolicies([
        { name: 'a', match: ['user'], rate: 100, settle: { maxDebt: -1 } },
        { name: 'b', match: ['user'], rate: 100, settle: { maxDebt: 1.5 } },
        { name: 'c', match: ['user'], rate: 100, settle: { debt: 1 } },
      ]);
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(PolicyError);
    expect((caught as PolicyError).issues.map((i) => [i.path, i.code])).toEqual([
      ['[0].settle.maxDebt', 'SLUICE_ERR_SETTLE_INVALID'],
      ['[1].settle.maxDebt', 'SLUICE_ERR_SETTLE_INVALID'],
      ['[2].settle', 'SLUICE_ERR_SETTLE_INVALID'],
    ]);
  });

  it('makes a policy without free match keys global (empty identity)', () => {
    const [p] = parsePolicies([
      { name: 'g', match: [{ key: 'route', value: 'POST /x' }], rate: 1 },
    ]).policies;
    expect(p!.identity).toEqual([]);
  });

  it('rejects a non-object policy and names its index', () => {
    expect(() => parsePolicies([42])).toThrow(
      expect.objectContaining({ issues: [{ path: '[0]', message: 'expected a policy object' }] }),
    );
  });
});
