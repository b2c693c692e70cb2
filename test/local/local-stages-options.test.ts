import { describe, expect, it } from 'vitest';
import { parsePolicies } from '../../src/config/policies.js';
import { ManualClock } from '../../src/core/clock.js';
import type { Policy } from '../../src/core/policy.js';
import { LocalStage } from '../../src/local/local-stage.js';
import { localStages } from '../../src/local/stages.js';
import { TokenBatchStage } from '../../src/local/token-batch.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import { stageCheck } from './support/stage-check.js';

const both: Policy = parsePolicies([
  {
    name: 'api',
    match: ['tenant'],
    rate: 1_000,
    burst: 1_000,
    local: { rate: 100, burst: 100 },
    batch: { size: 8, ttl: '1s' },
  },
]).policies[0]!;

async function checkKeys(
  stages: ReturnType<typeof localStages>,
  keys: number,
  perKey = 3,
): Promise<void> {
  const store = new MemoryStore();
  for (let i = 0; i < keys; i++) {
    for (let j = 0; j < perKey; j++) {
      const d = await stageCheck(stages, store, both, `{t${i}}:api`, 1, {
        nowMs: 0,
      });
      expect(d.allowed).toBe(true);
    }
  }
}

describe('localStages options reach their stages', () => {
  it('maxLocalKeys bounds the local buckets; without it 5 keys are 5 buckets', async () => {
    const bounded = localStages({ maxLocalKeys: 2 });
    await checkKeys(bounded, 5);
    expect((bounded[0] as LocalStage).keys).toBe(2);
    const free = localStages({});
    await checkKeys(free, 5);
    expect((free[0] as LocalStage).keys).toBe(5);
  });

  it('maxBatchKeys bounds the reserves (a new key drops the oldest reserve)', async () => {
    // 4 checks a key: slow start reserves 1 + 2 + 4, so each key keeps 3 unspent.
    const bounded = localStages({ maxBatchKeys: 1, clock: new ManualClock(0) });
    await checkKeys(bounded, 3, 4);
    const batch = bounded[1] as TokenBatchStage;
    expect([batch.unitsHeld, batch.stats.unitsDropped]).toEqual([3, 6]);
    const free = localStages({ clock: new ManualClock(0) });
    await checkKeys(free, 3, 4);
    const all = free[1] as TokenBatchStage;
    expect([all.unitsHeld, all.stats.unitsDropped]).toEqual([9, 0]);
  });

  it("the batch's close reads the given clock: unexpired reserves go back", async () => {
    const store = new MemoryStore();
    const stages = localStages({ clock: new ManualClock(0) });
    for (let i = 0; i < 4; i++) await stageCheck(stages, store, both, '{t1}:api', 1, { nowMs: 0 });
    const batch = stages[1] as TokenBatchStage;
    expect(batch.unitsHeld).toBe(3); // reserved 1 + 2 + 4, spent 4
    await batch.close();
    expect(batch.stats.unitsReturned).toBe(3);
  });
});

describe('LocalStage edges', () => {
  it('takes a bound of 1 key, and makes no bucket for cost 0 or a policy without local', () => {
    const stage = new LocalStage({ maxKeys: 1 });
    const none = parsePolicies([{ name: 'x', match: ['t'], rate: 1 }]).policies[0]!;
    expect(stage.enter({ policy: both, key: 'k', capacity: 100, cost: 0 }, { nowMs: 0 })).toBe(
      undefined,
    );
    expect(stage.enter({ policy: none, key: 'k', capacity: 1, cost: 1 }, { nowMs: 0 })).toBe(
      undefined,
    );
    expect(stage.keys).toBe(0);
    expect(stage.enter({ policy: both, key: 'k', capacity: 100, cost: 1 }, { nowMs: 0 })).toBe(
      undefined,
    );
    expect(stage.keys).toBe(1);
  });
});
