import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadPolicyFile } from '../../src/config/load.js';
import { parsePolicies } from '../../src/config/policies.js';
import { formatBounds, policyBounds } from '../../src/local/bounds.js';

// The same report `sluice explain --instances 100 --rps 1000` prints, built in-process from
// src so a mutation of the bounds or their wording shows here (the CLI test runs dist/).
const root = join(import.meta.dirname, '../..');

async function report(file: string): Promise<string> {
  const set = await loadPolicyFile(join(root, file));
  return formatBounds(set.policies.map((p) => policyBounds(p, 100, 1_000)));
}

describe('explain report from src', () => {
  it('is what docs/local-and-batching.md shows for the payments examples', async () => {
    const doc = readFileSync(join(root, 'docs/local-and-batching.md'), 'utf8');
    const blocks = [...doc.matchAll(/```text\n([\s\S]*?)```/g)].map((m) => m[1]);
    const shown = await Promise.all(
      ['examples/policies.yaml', 'examples/local-and-batching.yaml'].map(
        async (f) => `${(await report(f)).trimEnd()}\n`,
      ),
    );
    expect(blocks).toEqual(shown);
  });

  it('prints every line kind: stale with ms, fractions, unlimited, both stages, no --rps', () => {
    // 4 instances. stale-both: local 4 × (3 + 2.5/s) = 12 + 10/s binds below the global
    // 20 + 100/s (under-use 8 + 90/s) and caps the 20 + 4 × 7 a batch could hold; 10/s in
    // batches of 7 is 1.43 calls/s. plain has no local stage: store down and open is unlimited.
    const set = parsePolicies([
      {
        name: 'stale-both',
        match: ['tenant'],
        rate: 100,
        burst: 20,
        failureMode: 'stale',
        stale: { ttl: '1500ms', fallback: 'open' },
        local: { rate: 2.5, burst: 3 },
        batch: { size: 7, ttl: '250ms' },
      },
      {
        name: 'open-local',
        match: ['tenant'],
        rate: 100,
        burst: 20,
        failureMode: 'open',
        local: { rate: 20, burst: 20 },
      },
      { name: 'plain', match: ['tenant'], rate: 10, burst: 5 },
    ]).policies;
    const text = formatBounds(
      set.map((p) => policyBounds(p, 4, p.name === 'open-local' ? undefined : 1_000.5)),
    );
    expect(text.split('\n')).toEqual([
      'stale-both: token-bucket 100/s, 20 at once; local 2.5/s, burst 3; batch 7, ttl 250ms; failure mode stale',
      '  on 4 instances, 1,000.5 req/s to one key',
      '  fleet burst',
      '    local stages let through at once  12  (4 × local burst 3)',
      '    admitted at once, store up        12  (global burst 20 + 4 × batch 7 held; they stack, capped by the local stages)',
      '  held outside the global owner',
      '    reserved units, at most  28  (4 × batch size 7; a killed instance loses at most its 7)',
      '  overshoot (above the global policy alone), store up',
      '    global store                0  (the store decides atomically)',
      '    local stage                 0  (it only refuses, never admits)',
      '    over-limit cache (when on)  0  (it only refuses, never admits)',
      '    batching                    28  (in any interval: units reserved before it and spent in it; each unit within 250ms of its reservation)',
      '  under-use, store up',
      '    local stage, load spread evenly  8 + 90/s + 0.1 per ms of store round trip  (global 20 + 100/s vs 4 × (3 + 2.5/s); the round-trip term: checks in flight hold local units while the global bucket refills; load on k instances: 20 + 100/s − k × (3 + 2.5/s))',
      '    over-limit cache (when on)       0  (denies only what the store would deny, until its retry time)',
      '    batching                         28  (reserved, not yet spent: spent later, or dropped 250ms after reservation)',
      '  remote calls at 1,000.5 req/s to one key',
      '    every check to the store  1,000.5/s',
      '    with these stages         1.43/s  (local stages pass ≤ 10/s; 1 reservation per 7 admitted units (a cold key: per unit); over 100/s: ≤ 2 calls per instance per 7 units refilled)',
      '  store down',
      '    failure mode open                 12 at once, 10/s  (the local stages still limit)',
      '    failure mode closed               0  (everything is refused, status UNAVAILABLE)',
      "    failure mode stale (this policy)  12 at once, 10/s  (each instance spends the store's last budget for 1,500ms, then falls back to open)",
      '',
      'open-local: token-bucket 100/s, 20 at once; local 20/s, burst 20; no batching; failure mode open',
      '  on 4 instances',
      '  fleet burst',
      '    local stages let through at once  80  (4 × local burst 20)',
      '    admitted at once, store up        20  (global burst 20)',
      '  held outside the global owner',
      '    reserved units, at most  0  (no batching)',
      '  overshoot (above the global policy alone), store up',
      '    global store                0  (the store decides atomically)',
      '    local stage                 0  (it only refuses, never admits)',
      '    over-limit cache (when on)  0  (it only refuses, never admits)',
      '  under-use, store up',
      '    local stage, load spread evenly  0 + 20/s + 0.1 per ms of store round trip  (global 20 + 100/s vs 4 × (20 + 20/s); the round-trip term: checks in flight hold local units while the global bucket refills; load on k instances: 20 + 100/s − k × (20 + 20/s))',
      '    over-limit cache (when on)       0  (denies only what the store would deny, until its retry time)',
      '  store down',
      '    failure mode open (this policy)  80 at once, 80/s  (the local stages still limit)',
      '    failure mode closed              0  (everything is refused, status UNAVAILABLE)',
      "    failure mode stale               80 at once, 80/s  (each instance spends the store's last budget for 10s, then falls back to closed)",
      '',
      'plain: token-bucket 10/s, 5 at once; no local stage; no batching; failure mode open',
      '  on 4 instances, 1,000.5 req/s to one key',
      '  fleet burst',
      '    admitted at once, store up  5  (global burst 5)',
      '  held outside the global owner',
      '    reserved units, at most  0  (no batching)',
      '  overshoot (above the global policy alone), store up',
      '    global store                0  (the store decides atomically)',
      '    over-limit cache (when on)  0  (it only refuses, never admits)',
      '  under-use, store up',
      '    over-limit cache (when on)  0  (denies only what the store would deny, until its retry time)',
      '  remote calls at 1,000.5 req/s to one key',
      '    every check to the store  1,000.5/s',
      '    with these stages         1,000.5/s  (no local stage)',
      '  store down',
      '    failure mode open (this policy)  unlimited at once, unlimited/s  (everything is admitted)',
      '    failure mode closed              0  (everything is refused, status UNAVAILABLE)',
      "    failure mode stale               20 at once, 40/s  (each instance spends the store's last budget for 10s, then falls back to closed)",
      '',
    ]);
  });
});
