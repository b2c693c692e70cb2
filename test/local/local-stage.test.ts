import { describe, expect, it } from 'vitest';
import { parsePolicies } from '../../src/config/policies.js';
import type { Policy } from '../../src/core/policy.js';
import { LocalStage } from '../../src/local/local-stage.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import { stageCheck } from './support/stage-check.js';

function policy(extra: Record<string, unknown> = {}): Policy {
  return parsePolicies([
    {
      name: 'api',
      match: ['tenant'],
      rate: 100,
      burst: 20,
      local: { rate: 10, burst: 5 },
      ...extra,
    },
  ]).policies[0]!;
}

async function run(
  stage: LocalStage,
  store: MemoryStore,
  p: Policy,
  n: number,
  nowMs = 0,
): Promise<string[]> {
  const paths: string[] = [];
  for (let i = 0; i < n; i++) {
    const d = await stageCheck([stage], store, p, '{t1}:api', 1, { nowMs });
    paths.push(`${d.path}:${d.status}`);
  }
  return paths;
}

describe('LocalStage', () => {
  it('admits the local burst, then answers OVER_LIMIT with path local without a store call', async () => {
    const store = new MemoryStore();
    const stage = new LocalStage();
    // 10 at t=0: the local burst is 5, the global 20: 5 reach the store, 5 stop here.
    expect(await run(stage, store, policy(), 10)).toEqual([
      ...Array<string>(5).fill('store:OK'),
      ...Array<string>(5).fill('local:OVER_LIMIT'),
    ]);
    // The store saw 5: a read (cost 0) finds 15 of 20 left.
    const [read] = store.apply(
      [
        {
          key: '{t1}:api',
          algorithm: (await import('../../src/algorithms/index.js')).ALGORITHMS['token-bucket'],
          params: policy().params,
          cost: 0,
          enforce: true,
        },
      ],
      { nowMs: 0 },
    );
    expect(read!.ok && read!.decision.remaining).toBe(15);
    // 100 ms later the local bucket has refilled 1 (10/s).
    expect(await run(stage, store, policy(), 2, 100)).toEqual(['store:OK', 'local:OVER_LIMIT']);
  });

  it('gives units back when the check is denied elsewhere (here by the store)', async () => {
    const store = new MemoryStore();
    const stage = new LocalStage();
    const tight = policy({ burst: 2 });
    // Global burst 2, local 5: 2 admitted, 3 denied by the store; their local units return.
    expect(await run(stage, store, tight, 5)).toEqual([
      'store:OK',
      'store:OK',
      'store:OVER_LIMIT',
      'store:OVER_LIMIT',
      'store:OVER_LIMIT',
    ]);
    // Local holds 3 (5 − 2 admitted): against a roomy global bucket, the next 3 pass the
    // local stage and the 4th does not.
    expect(await run(stage, new MemoryStore(), policy(), 4)).toEqual([
      'store:OK',
      'store:OK',
      'store:OK',
      'local:OVER_LIMIT',
    ]);
  });

  it('keeps its coarse limit while the store is down and the failure mode admits', async () => {
    const down = new MemoryStore();
    await down.close();
    const stage = new LocalStage();
    expect(await run(stage, down, policy({ failureMode: 'open' }), 8)).toEqual([
      ...Array<string>(5).fill('fail-open:OK'),
      ...Array<string>(3).fill('local:OVER_LIMIT'),
    ]);
    // Fail closed: nothing is admitted, so nothing stays taken locally.
    const closedStage = new LocalStage();
    const closed = policy({ failureMode: 'closed' });
    expect(await run(closedStage, down, closed, 8)).toEqual(
      Array<string>(8).fill('fail-closed:UNAVAILABLE'),
    );
  });

  it('holds at most maxKeys buckets', async () => {
    const stage = new LocalStage({ maxKeys: 3 });
    const store = new MemoryStore();
    for (let i = 0; i < 10; i++) {
      await stageCheck([stage], store, policy(), `{t${i}}:api`, 1, { nowMs: 0 });
    }
    expect(stage.keys).toBe(3);
  });

  it('passes cost 0 on without taking, and only applies to policies with local', () => {
    const stage = new LocalStage();
    expect(stage.appliesTo(policy())).toBe(true);
    expect(
      stage.appliesTo(parsePolicies([{ name: 'x', match: ['t'], rate: 1 }]).policies[0]!),
    ).toBe(false);
    const item = { policy: policy(), key: 'k', capacity: 20, cost: 0 };
    for (let i = 0; i < 10; i++) expect(stage.enter(item, { nowMs: 0 })).toBeUndefined();
  });

  it('passes every item on once closed: its buckets are gone', async () => {
    const store = new MemoryStore();
    const stage = new LocalStage();
    expect(await run(stage, store, policy(), 5)).toEqual(Array<string>(5).fill('store:OK'));
    await stage.close();
    // The local burst (5) is spent, but only the store (20) limits now.
    expect(await run(stage, store, policy(), 3)).toEqual(Array<string>(3).fill('store:OK'));
  });

  it('refuses a bad key bound with SLUICE_ERR_LOCAL_INVALID', () => {
    expect(() => new LocalStage({ maxKeys: 0 })).toThrow(
      expect.objectContaining({
        code: 'SLUICE_ERR_LOCAL_INVALID',
        message: 'local stage: maxKeys must be a positive whole number; got 0',
      }),
    );
  });
});
