/** The batched policy and global-bucket read the token-batch suites share. */
import { algorithmOf } from '../../../src/algorithms/index.js';
import { parsePolicies } from '../../../src/config/policies.js';
import type { Policy } from '../../../src/core/policy.js';
import type { MemoryStore } from '../../../src/stores/memory/memory-store.js';

/** The one tenant's bucket key of `batchPolicy()`. */
export const KEY = '{t1}:api';

/** `api`: 1,000/s, burst 1,000, batches of 8 kept 1 s; `extra` overrides any field. */
export function batchPolicy(extra: Record<string, unknown> = {}): Policy {
  return parsePolicies([
    {
      name: 'api',
      match: ['tenant'],
      rate: 1_000,
      burst: 1_000,
      batch: { size: 8, ttl: '1s' },
      ...extra,
    },
  ]).policies[0]!;
}

/** What the global bucket holds now (a read: cost 0). */
export function globalRemaining(store: MemoryStore, p: Policy, nowMs: number): number {
  const [r] = store.apply(
    [{ key: KEY, algorithm: algorithmOf(p.algorithm), params: p.params, cost: 0, enforce: true }],
    { nowMs },
  );
  return r!.ok ? r!.decision.remaining : NaN;
}
