/**
 * Unit tests of the Redis Cluster pieces that need no server: slot computation, the
 * hot-key top-k, the cross-slot policy check and the sequential-refund strategy over
 * scripted slot operations (failures included). The real-cluster behaviour is in
 * test/stores/redis/cluster/.
 */
import { describe, expect, it } from 'vitest';
import { tokenBucket } from '../../../src/algorithms/token-bucket.js';
import type { Algorithm } from '../../../src/algorithms/algorithm.js';
import { parsePolicies } from '../../../src/config/policies.js';
import type { AlgorithmDecision } from '../../../src/core/decision.js';
import { StoreError } from '../../../src/core/errors.js';
import {
  applySequentialRefund,
  crossSlotPair,
  newCrossSlotStats,
  orderMostRestrictiveFirst,
  type GroupOutcome,
} from '../../../src/stores/redis/cross-slot.js';
import { HotKeys } from '../../../src/stores/redis/hot-keys.js';
import { groupBySlot, keySlot } from '../../../src/stores/redis/slot-groups.js';
import type { StoreRequest } from '../../../src/stores/store.js';

describe('keySlot', () => {
  it('matches the Redis Cluster specification examples and hash-tag rules', () => {
    // CRC16/XMODEM("123456789") = 0x31C3 = 12739 (the spec's check value).
    expect(keySlot('123456789')).toBe(12739);
    expect(keySlot('foo')).toBe(12182);
    expect(keySlot('{user1000}.following')).toBe(keySlot('user1000'));
    expect(keySlot('foo{}{bar}')).toBe(keySlot('foo{}{bar}')); // empty tag: whole key
    expect(keySlot('foo{{bar}}zap')).toBe(keySlot('{bar'));
  });

  it('groups keys by slot in order of first appearance', () => {
    const groups = groupBySlot(['sl:{a}:x', 'sl:{b}:y', 'sl:{a}:z']);
    expect(groups.map((g) => g.indices)).toEqual([[0, 2], [1]]);
  });
});

describe('HotKeys', () => {
  it('keeps at most k hashed identities and always lists one with more than 1/k of the traffic', () => {
    const hot = new HotKeys(3);
    for (let i = 0; i < 1000; i++) hot.record(i % 3 === 0 ? 'whale' : `t-${i}`);
    const top = hot.top();
    expect(top).toHaveLength(3);
    expect(top[0]!.count - top[0]!.error).toBeGreaterThanOrEqual(334);
    expect(top.every((t) => /^[0-9a-f]{16}$/.test(t.identity))).toBe(true);
    expect(() => new HotKeys(0)).toThrow(RangeError);
  });
});

describe('crossSlotPair', () => {
  it('finds policies that can match together with different identities', () => {
    const set = parsePolicies([
      { name: 'tenant', match: ['tenant'], rate: 10 },
      { name: 'route', match: ['tenant', 'route'], identity: ['tenant'], rate: 10 },
    ]);
    expect(crossSlotPair(set.policies)).toBeUndefined();
    const withGlobal = parsePolicies([
      { name: 'tenant', match: ['tenant'], rate: 10 },
      { name: 'global', match: [{ key: 'env', value: 'prod' }], rate: 100 },
    ]);
    expect(crossSlotPair(withGlobal.policies)?.map((p) => p.name)).toEqual(['tenant', 'global']);
    const disjoint = parsePolicies([
      { name: 'a', match: [{ key: 'env', value: 'prod' }], rate: 100 },
      { name: 'b', match: [{ key: 'env', value: 'dev' }], rate: 100 },
    ]);
    expect(crossSlotPair(disjoint.policies)).toBeUndefined();
  });
});

describe('applySequentialRefund', () => {
  const req = (key: string, burst: number, enforce = true): StoreRequest => ({
    key,
    algorithm: tokenBucket as Algorithm<unknown, unknown>,
    params: { rate: 1, periodMs: 1000, burst },
    cost: 1,
    enforce,
  });
  const decision = (allowed: boolean, remaining: number): AlgorithmDecision => ({
    status: allowed ? 'OK' : 'OVER_LIMIT',
    allowed,
    limit: 10,
    remaining,
    retryAfterMs: 0,
    resetAfterMs: 0,
  });
  const batch = [req('{g}:global', 100), req('{t}:tenant', 10)];
  const groups = groupBySlot(batch.map((r) => r.key));

  it('orders the smallest capacity first', () => {
    expect(orderMostRestrictiveFirst(batch, groups).map((g) => g.indices)).toEqual([[1], [0]]);
    const shadowFirst = [req('{a}:s', 1, false), req('{b}:e', 50)];
    expect(
      orderMostRestrictiveFirst(shadowFirst, groupBySlot(shadowFirst.map((r) => r.key))).map(
        (g) => g.indices,
      ),
    ).toEqual([[1], [0]]);
  });

  it('refunds the earlier slot when a later one denies, and reports it unconsumed', async () => {
    const calls: string[] = [];
    const stats = newCrossSlotStats();
    const results = await applySequentialRefund(
      batch,
      groups,
      {
        consume: async (g): Promise<GroupOutcome> => {
          calls.push(`consume ${g.indices.join()}`);
          const allowed = g.indices[0] === 1;
          return { ok: true, decisions: [decision(allowed, allowed ? 9 : 0)], decidedAtMs: 5 };
        },
        dryRun: () => Promise.reject(new Error('no later group')),
        refund: async (g, indices, at): Promise<GroupOutcome> => {
          calls.push(`refund ${indices.join()} at ${at}`);
          return { ok: true, decisions: [decision(true, 10)], decidedAtMs: at };
        },
      },
      stats,
    );
    expect(calls).toEqual(['consume 1', 'consume 0', 'refund 1 at 5']);
    expect(results.map((r) => (r.ok ? [r.decision.allowed, r.decision.remaining] : r))).toEqual([
      [false, 0],
      [true, 10],
    ]);
    expect([stats.batches, stats.refunded, stats.refundFailures]).toEqual([1, 1, 0]);
    expect(stats.partialWindowsMs).toHaveLength(1);
  });

  it('refunds the earlier slot when a later call fails, and reports the failure for all', async () => {
    const stats = newCrossSlotStats();
    const error = new StoreError('SLUICE_ERR_STORE_UNAVAILABLE', 'down');
    let refunded = 0;
    const results = await applySequentialRefund(
      batch,
      groups,
      {
        consume: async (g): Promise<GroupOutcome> =>
          g.indices[0] === 1
            ? { ok: true, decisions: [decision(true, 9)], decidedAtMs: 1 }
            : { ok: false, error },
        dryRun: () => Promise.reject(new Error('unused')),
        refund: async (): Promise<GroupOutcome> => {
          refunded++;
          return { ok: false, error };
        },
      },
      stats,
    );
    expect(refunded).toBe(1);
    expect(results).toEqual([
      { ok: false, error },
      { ok: false, error },
    ]);
    expect(stats.refundFailures).toBe(1);
  });

  it('dry-runs the slots after the one that denied', async () => {
    const three = [req('{a}:a', 1), req('{b}:b', 2), req('{c}:c', 3)];
    const seen: string[] = [];
    const results = await applySequentialRefund(
      three,
      groupBySlot(three.map((r) => r.key)),
      {
        consume: async (g): Promise<GroupOutcome> => {
          seen.push(`consume ${g.indices.join()}`);
          return { ok: true, decisions: [decision(false, 0)], decidedAtMs: 0 };
        },
        dryRun: async (g): Promise<GroupOutcome> => {
          seen.push(`dry ${g.indices.join()}`);
          return { ok: true, decisions: [decision(true, 1)], decidedAtMs: 0 };
        },
        refund: () => Promise.reject(new Error('nothing consumed')),
      },
      newCrossSlotStats(),
    );
    expect(seen).toEqual(['consume 0', 'dry 1', 'dry 2']);
    expect(results.map((r) => r.ok && r.decision.allowed)).toEqual([false, true, true]);
  });
});
