import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import type { PolicyBounds } from '../../src/local/bounds.js';

const run = promisify(execFile);
const root = join(import.meta.dirname, '../..');
const bin = join(root, 'dist/cli/main.js');

async function sluice(
  ...args: string[]
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [bin, ...args], { cwd: root });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

describe('sluice explain (built dist/, spawned)', () => {
  it('prints what docs/local-and-batching.md shows for the payments examples', async () => {
    const doc = readFileSync(join(root, 'docs/local-and-batching.md'), 'utf8');
    const blocks = [...doc.matchAll(/```text\n([\s\S]*?)```/g)].map((m) => m[1]);
    const shown = await Promise.all(
      ['examples/policies.yaml', 'examples/local-and-batching.yaml'].map(async (file) => {
        const r = await sluice(
          'explain',
          '--policies',
          file,
          '--instances',
          '100',
          '--rps',
          '1000',
        );
        return `${r.stdout.trimEnd()}\n`;
      }),
    );
    expect(blocks).toEqual(shown);
  });

  it('prints the payments example with local and batching on 100 instances', async () => {
    const r = await sluice(
      'explain',
      '--policies',
      'examples/local-and-batching.yaml',
      '--instances',
      '100',
      '--rps',
      '1000',
    );
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n');
    expect(lines[0]).toBe(
      'payments-tenant: token-bucket 100/s, 20 at once; local 10/s, burst 20; no batching; failure mode closed',
    );
    expect(lines).toContain('    local stages let through at once  2,000  (100 × local burst 20)');
    expect(r.stdout).toContain('payments-reads: token-bucket 1,000/s, 1,000 at once');
    expect(r.stdout).toMatch(/reserved units, at most +5,000 +\(100 × batch size 50/);
  });

  it('--json prints the same as JSON', async () => {
    const r = await sluice(
      'explain',
      '--policies',
      'examples/local-and-batching.yaml',
      '--instances',
      '100',
      '--json',
    );
    expect(r.code).toBe(0);
    const all = JSON.parse(r.stdout) as PolicyBounds[];
    expect(all.map((b) => [b.policy, b.fleetBurst, b.heldOutside])).toEqual([
      ['payments-tenant', { localStage: 2_000, storeUp: 20 }, 0],
      ['payments-reads', { storeUp: 6_000 }, 5_000],
    ]);
  });

  it('prints, for a policy that settles, what unsettled reservations hold and what under-estimates let through', async () => {
    const r = await sluice(
      'explain',
      '--policies',
      'test/cli/fixtures/settle.yaml',
      '--instances',
      '4',
    );
    expect(r.code).toBe(0);
    const [settles, plain] = r.stdout.split('\n\n');
    expect(settles).toContain(
      [
        '  reserve and settle',
        '    held by unsettled reservations  1,000 at most  (their estimates, until settled; after their ttl they stay charged)',
        '    let through by under-estimates  300 beyond capacity at most  (settle.maxDebt; later checks wait until it is repaid, an excess past it is reported as cappedUnits)',
      ].join('\n'),
    );
    expect(plain).not.toContain('reserve and settle');
    // docs/costs.md shows this section as printed.
    const section = settles!.slice(settles!.indexOf('  reserve and settle'));
    expect(readFileSync(join(root, 'docs/costs.md'), 'utf8')).toContain(
      `\`\`\`text\n${section}\n\`\`\``,
    );
    const json = JSON.parse(
      (
        await sluice(
          'explain',
          '--policies',
          'test/cli/fixtures/settle.yaml',
          '--instances',
          '4',
          '--json',
        )
      ).stdout,
    ) as PolicyBounds[];
    expect(json.map((b) => b.settle)).toEqual([
      { heldByReservations: 1_000, debtBound: 300 },
      undefined,
    ]);
  });

  it('refuses a bad --instances and names it', async () => {
    const r = await sluice('explain', '--policies', 'examples/policies.yaml', '--instances', '0');
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('--instances must be a whole number >= 1');
  });

  it('reports a bad local block with its path', async () => {
    const r = await sluice(
      'explain',
      '--policies',
      'test/config/fixtures/local-and-batch-bad.yaml',
      '--instances',
      '3',
    );
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(
      "policies[0].local.burst: local burst 4 is below the policy's cost 5: every instance would deny that cost, always",
    );
  });

  it('adds the quota lease partition bound (src/quota/bounds.ts) when given --lease-refresh', async () => {
    // payments-tenant: 100/s. 10 of 100 agents cut off for 6 s on a static share (1/s each),
    // R = 1 s, L = 2 s: the fallback runs 6 + 1 − 2 = 5 s, 10/s over the budget, 50 units.
    const r = await sluice(
      'explain',
      '--policies',
      'examples/policies.yaml',
      '--instances',
      '100',
      '--lease-refresh',
      '1000',
      '--lease-ttl',
      '2000',
      '--partition',
      '6000',
      '--cut-off',
      '10',
      '--json',
    );
    expect(r.stderr).toBe('');
    const all = JSON.parse(r.stdout) as PolicyBounds[];
    const lease = all[0]!.sections.find((x) => x.title.startsWith('lease, controller'))!;
    expect(lease.title).toBe('lease, controller unreachable for 6s');
    expect(lease.lines.map((l) => [l.label, l.value])).toEqual([
      ['stale lease', '0'],
      ['fallback runs, at most', '5s'],
      ['units over the budget, at most', '50'],
      ['any window of R, at most', '110% of the budget'],
      // ⌈C·R⌉ + n − 1 = 100 + 99: each of 100 agents may hold a share over a fill longer
      // than R (1 per 20 s), paced at 1 per window of R, all in the same window.
      ['paced shares', '199 units in a window of R, at most'],
    ]);
    const deny = await sluice(
      'explain',
      '--policies',
      'examples/policies.yaml',
      '--instances',
      '100',
      '--lease-refresh',
      '1000',
      '--fallback',
      'deny',
    );
    expect(deny.stdout).toMatch(/units over the budget, at most +0 /);
  });

  it('prints what each lease failure costs (src/quota/bounds.ts leaseFailureBounds)', async () => {
    // payments-tenant: 100/s over 100 agents on a static share (1/s each, 100/s in all);
    // R = 1 s, L = 3 s, E = 1 s (tick 333 ms), reconnect 200 ms × 2 controllers, S = 2 s; a
    // paused leader's agents leave its silent stream after R + δ = 1.5 s.
    const r = await sluice(
      'explain',
      '--policies',
      'examples/policies.yaml',
      '--instances',
      '100',
      '--lease-refresh',
      '1000',
      '--json',
    );
    expect(r.stderr).toBe('');
    const sections = (JSON.parse(r.stdout) as PolicyBounds[])[0]!.sections;
    const rows = (title: string) =>
      sections.find((x) => x.title === title)!.lines.map((l) => [l.label, l.value]);
    expect(rows('lease, leader killed (election TTL 1s)')).toEqual([
      ['successor leads within', '1.33s'],
      ['fleet back on leases within', '1.98s'],
      ['fallback runs, at most', '0s'],
      ['units over the budget, at most', '0'],
      ['any window of R, at most', '100% of the budget'],
    ]);
    expect(rows('lease, leader paused for 2s')).toEqual([
      ['leases under the lost term', '0'],
      ['fleet back on leases within', '2.15s'],
      ['fallback runs, at most', '0.15s'],
      ['units over the budget, at most', '15'],
      ['any window of R, at most', '200% of the budget'],
    ]);
    expect(rows("lease, controllers' Redis lost or emptied")).toEqual([
      ['fleet back on leases within', '1.07s'],
      ['old leases outside the ledger, at most', '3.5s'],
      ['units over the budget, at most', '350'],
      ['any window of R, at most', '200% of the budget'],
    ]);
    expect(rows('lease, an agent refused (duplicate name, not authenticated, over a cap)')).toEqual(
      [
        ['units over the budget per second', '1'],
        ['any window of R, at most', '101% of the budget'],
      ],
    );
  });

  it('refuses lease options without --lease-refresh, naming them', async () => {
    const r = await sluice(
      'explain',
      '--policies',
      'examples/policies.yaml',
      '--instances',
      '10',
      '--partition',
      '5000',
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('--partition needs --lease-refresh');
  });
});
