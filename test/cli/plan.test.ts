/**
 * `sluice plan` as users run it (the built CLI): the payments example's plan in text and
 * JSON, and the messages for bad arguments. The arithmetic itself is checked in
 * test/capacity/capacity-plan.test.ts.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { CapacityPlan } from '../../src/capacity/capacity-plan.js';
import { root, runSluice } from './run-sluice.js';

const PAYMENTS = join(root, 'examples/policies.yaml');
const args = ['plan', '--policies', PAYMENTS, '--peak-rps', '50000', '--tenants', '10000'];

describe('sluice plan', () => {
  it('prints the plan of the payments example, each figure on its line, with its sources', async () => {
    const r = await runSluice(args);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n');
    const line = (label: string) => lines.find((l) => l.startsWith(label));
    expect(line('decisions ')).toBe('decisions         50,000/s');
    expect(line('Redis CPU ')).toBe('Redis CPU         0.71 cores at peak');
    expect(line('shards ')).toBe(
      'shards            2 primaries (each at most 50.0% of a core; 2 for the CPU alone)',
    );
    expect(line('hot key ')).toBe(
      'hot key           the busiest tenant makes 10.2% of decisions (0.07 cores); its shard takes 55.1% of the load (0.39 cores; an even share is 50.0%)',
    );
    expect(line('keys ')).toBe(
      'keys              10,000 (1.8 MiB of Redis memory; 913.1 KiB per primary)',
    );
    expect(line('expiry ')).toBe('expiry            at most 50,000 keys/s expire');
    expect(line('connections ')).toBe(
      'connections       66 to Redis: 33 sluice serve processes (each at most 50.0% of a core) × 2 primaries',
    );
    expect(r.stdout).toContain(
      '  Redis CPU per decision, token-bucket: 14.25 µs (bench/results/2026-11-30.md',
    );
    expect(r.stdout).toContain('  Redis memory per bucket, token-bucket: 187 B (docs/redis.md');
  });

  it('docs/operations.md shows what it prints for the payments example', async () => {
    const doc = await readFile(join(root, 'docs/operations.md'), 'utf8');
    const shown =
      /sluice plan --policies examples\/policies.yaml --peak-rps 50000 --tenants 10000\n```\n\n```text\n([\s\S]*?)```/.exec(
        doc,
      );
    expect(shown, 'the plan block in docs/operations.md').not.toBeNull();
    expect(shown![1]).toBe((await runSluice(args)).stdout);
  });

  it('--json prints the same plan as one JSON document', async () => {
    const r = await runSluice([...args, '--json']);
    expect(r.code).toBe(0);
    const plan = JSON.parse(r.stdout) as CapacityPlan;
    expect(plan).toMatchObject({
      input: { policies: ['payments-tenant'], peakRps: 50_000, tenants: 10_000, zipf: 1 },
      decisionsPerSecond: 50_000,
      shards: 2,
      keys: 10_000,
      bytes: 1_870_000,
      connections: 66,
    });
    expect(Object.keys(plan.sources)).toContain('Redis CPU per decision, token-bucket');
  });

  it('names a bad argument, or a file that is not a policy file, and exits 1', async () => {
    const zero = await runSluice([
      'plan',
      '--policies',
      PAYMENTS,
      '--peak-rps',
      '0',
      '--tenants',
      '10',
    ]);
    expect(zero.code).toBe(1);
    expect(zero.stderr).toContain("argument '0' is invalid. --peak-rps must be a number > 0");
    const missing = await runSluice(['plan', '--policies', PAYMENTS, '--peak-rps', '10']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("required option '--tenants <n>' not specified");
    const envoy = await runSluice([
      'plan',
      '--policies',
      join(root, 'examples/envoy/config.yaml'),
      '--peak-rps',
      '10',
      '--tenants',
      '10',
    ]);
    expect(envoy.code).toBe(1);
    expect(envoy.stderr).toContain('this is envoyproxy/ratelimit config');
  });
});
