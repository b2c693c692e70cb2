import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { simulateLeases } from '../../src/quota/simulation/simulate.js';
import { runSluice } from '../cli/run-sluice.js';

// The full-scale run (100 regions, 10,000 agents, 600 s) is in docs/quota-leases.md; this
// runs the same code, spawned as a user runs it, at a scale the suite can afford, and
// asserts the same properties.
const dir = await mkdtemp(join(tmpdir(), 'sluice-sim-'));
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('sluice simulate leases', () => {
  it('shares the budget by demand: ≥ 98% used while demand exceeds it, never above 100% outside the partition, the partition within its bound', async () => {
    const svg = join(dir, 'chart.svg');
    const out = await runSluice([
      'simulate',
      'leases',
      ...['--regions', '10', '--agents', '200', '--seconds', '600', '--seed', '7'],
      ...['--svg', svg, '--json'],
    ]);
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    const r = JSON.parse(out.stdout) as ReturnType<typeof simulateLeases>['report'];
    expect(r.demandOverBudgetShare).toBeGreaterThan(0.5);
    expect(r.utilization).toBeGreaterThanOrEqual(0.98);
    expect(r.peakOverBudgetOutsidePartition).toBeLessThanOrEqual(1);
    expect(r.partition.agents).toBeGreaterThan(0);
    expect(r.partition.peakOverBudget).toBeLessThanOrEqual(r.partitionBound.peakRatio);
    expect(r.partition.extraUnits).toBeLessThanOrEqual(r.partitionBound.extraUnits);
    expect(r.partition.withinBound).toBe(true);
    // The deposed leader's delayed leases were all refused, by fencing token.
    expect(r.failover.tokens).toEqual([1, 2]);
    expect(r.failover.staleLeasesRefused).toBeGreaterThan(0);
    // The baselines on the same demand: static division strands capacity, and one
    // global owner costs a remote call per request.
    expect(r.baselines.staticDivision.utilization).toBeLessThan(r.utilization - 0.1);
    expect(r.baselines.globalOwner.peakOverBudget).toBeLessThanOrEqual(1);
    expect(r.baselines.globalOwner.remoteCallsPerSecond).toBeGreaterThan(50 * r.reportsPerSecond);
    const chart = await readFile(svg, 'utf8');
    expect(chart).toMatch(/^<svg /);
    expect(chart).toContain('partition bound');
  });

  it('is deterministic for a seed, and the seed matters', () => {
    const run = (seed: number) =>
      JSON.stringify(simulateLeases({ regions: 3, agents: 30, seconds: 60, seed }).report);
    expect(run(3)).toBe(run(3));
    expect(run(3)).not.toBe(run(4));
  });

  it('names what it cannot run', async () => {
    const out = await runSluice([
      'simulate',
      'leases',
      '--regions',
      '50',
      '--agents',
      '10',
      '--seconds',
      '60',
    ]);
    expect(out.code).not.toBe(0);
    expect(out.stderr).toContain('agents: must be a whole number ≥ 50, got 10');
    expect(out.stderr).toContain('SLUICE_ERR_QUOTA_CONFIG_INVALID');
  });

  it('refuses sizes that cannot fit in memory or time, naming the limit, before it allocates', async () => {
    const agents = await runSluice(['simulate', 'leases', '--agents', '1e7', '--seconds', '60']);
    expect(agents.code).toBe(1);
    expect(agents.stderr).toContain('agents: must be at most 100000, got 10000000');
    expect(agents.stderr).toContain('SLUICE_ERR_QUOTA_CONFIG_INVALID');
    const seconds = await runSluice(['simulate', 'leases', '--seconds', '1e9']);
    expect(seconds.code).toBe(1);
    expect(seconds.stderr).toContain('seconds: must be at most 86400, got 1000000000');
    const both = await runSluice([
      'simulate',
      'leases',
      ...['--agents', '100000', '--seconds', '600'],
    ]);
    expect(both.code).toBe(1);
    expect(both.stderr).toContain(
      'agents × seconds: must be at most 12000000 (memory and time grow with both), got 100000 × 600 = 60000000',
    );
    expect(`${agents.stderr}${seconds.stderr}${both.stderr}`).not.toMatch(/\n\s+at /);
  });
});
