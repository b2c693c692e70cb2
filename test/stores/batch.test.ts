/**
 * decideBatch, the batch rules every store shares, over token buckets at one instant:
 * which decisions come back and which states are written.
 */
import { describe, expect, it } from 'vitest';
import type { Algorithm } from '../../src/algorithms/algorithm.js';
import { tokenBucket, type TokenBucketState } from '../../src/algorithms/token-bucket.js';
import { decideBatch } from '../../src/stores/batch.js';
import type { StoreRequest } from '../../src/stores/store.js';

const t0 = 1_700_000_000_000;
// burst 10, 1 token per 100ms (nothing refills at one instant)
const params = tokenBucket.paramsSchema.parse({ rate: 10, burst: 10 });
const request = (key: string, cost: number, enforce = true): StoreRequest => ({
  key,
  algorithm: tokenBucket as Algorithm<unknown, unknown>,
  params,
  cost,
  enforce,
});
const bucket = (tokens: number): TokenBucketState => ({ tokens, tsMs: t0 });

describe('decideBatch', () => {
  it('admitted: writes what was consumed; a cost-0 read and a shadow denial write nothing', () => {
    const { decisions, writes } = decideBatch(
      [request('a', 3), request('b', 0), request('c', 5, false)],
      [bucket(10), bucket(4), bucket(2)],
      t0,
    );
    expect(decisions.map((d) => [d.allowed, d.remaining])).toEqual([
      [true, 7],
      [true, 4],
      [false, 2],
    ]);
    expect(writes).toEqual([bucket(7), undefined, undefined]);
  });

  it('denied by an enforced request: writes nothing, and what fitted reports its capacity unconsumed', () => {
    const { decisions, writes } = decideBatch(
      [request('a', 3), request('b', 5), request('c', 1, false)],
      [bucket(10), bucket(4), bucket(9)],
      t0,
    );
    expect(decisions.map((d) => [d.status, d.remaining])).toEqual([
      ['OK', 10],
      ['OVER_LIMIT', 4],
      ['OK', 9],
    ]);
    expect(writes).toEqual([undefined, undefined, undefined]);
  });

  it('chains requests on one key: each sees what the earlier ones consumed', () => {
    const { decisions, writes } = decideBatch(
      [request('a', 4), request('a', 4), request('a', 4, false), request('a', 2)],
      [bucket(10), bucket(10), bucket(10), bucket(10)],
      t0,
    );
    // 10 - 4 = 6, 6 - 4 = 2, a shadow 4 does not fit 2 (and takes nothing), 2 - 2 = 0
    expect(decisions.map((d) => [d.allowed, d.remaining])).toEqual([
      [true, 6],
      [true, 2],
      [false, 2],
      [true, 0],
    ]);
    expect(writes).toEqual([bucket(6), bucket(2), undefined, bucket(0)]);
  });

  it('reads an absent state as a fresh bucket', () => {
    const { decisions, writes } = decideBatch([request('a', 1)], [undefined], t0);
    expect(decisions[0]!.remaining).toBe(9);
    expect(writes).toEqual([bucket(9)]);
  });
});
