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
});
