/**
 * decideBatch, the batch rules every store shares, over token buckets at one instant:
 * which decisions come back and which states are written.
 */
import { describe, expect, it } from 'vitest';
import type { Algorithm } from '../../src/algorithms/algorithm.js';
import { fixedWindow, type FixedWindowState } from '../../src/algorithms/fixed-window.js';
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

  it('independent: each request is a batch of its own, reading what the ones before it wrote', () => {
    const { decisions, writes } = decideBatch(
      [request('a', 4), request('b', 5), request('a', 4), request('a', 4), request('a', 0)],
      [bucket(10), bucket(4), bucket(10), bucket(10), bucket(10)],
      t0,
      true,
    );
    // a: 10 - 4 = 6; b: 5 > 4 denied, alone; a: 6 - 4 = 2; a: 4 > 2 denied; a: a read
    expect(decisions.map((d) => [d.allowed, d.remaining])).toEqual([
      [true, 6],
      [false, 4],
      [true, 2],
      [false, 2],
      [true, 2],
    ]);
    expect(writes).toEqual([bucket(6), undefined, bucket(2), undefined, undefined]);
  });

  it('charges a request whose params charge denials, whatever the rest of the batch decides', () => {
    // fixed window of 3 per minute that counts denied requests too
    const counting = fixedWindow.chargingDenied!(
      fixedWindow.paramsSchema.parse({ limit: 3, window: '1m' }),
    );
    const counted = (key: string, cost: number, enforce = true): StoreRequest => ({
      key,
      algorithm: fixedWindow as Algorithm<unknown, unknown>,
      params: counting,
      cost,
      enforce,
    });
    const w = Math.floor(t0 / 60_000);
    const window = (count: number): FixedWindowState => ({ window: w, count });
    // b is denied, so a is not charged; c counts its denial (2 + 2 > 3) and d its admission
    const denied = decideBatch(
      [request('a', 3), request('b', 5), counted('c', 2), counted('d', 1), counted('e', 0)],
      [bucket(10), bucket(4), window(2), window(0), window(3)],
      t0,
    );
    expect(denied.decisions.map((d) => [d.allowed, d.remaining])).toEqual([
      [true, 10],
      [false, 4],
      [false, 1],
      [true, 2],
      [true, 0],
    ]);
    expect(denied.writes).toEqual([undefined, undefined, window(4), window(1), undefined]);
    // admitted as a whole: a shadow counting denial is written along with the admissions,
    // after the count the earlier request on its key left (2 + 1 = 3, then 3 + 1 > 3)
    const admitted = decideBatch(
      [counted('c', 1), request('a', 3), counted('c', 1, false)],
      [window(2), bucket(10), window(2)],
      t0,
    );
    expect(admitted.decisions.map((d) => d.allowed)).toEqual([true, true, false]);
    expect(admitted.writes).toEqual([window(3), bucket(7), window(4)]);
  });

  it('reads an absent state as a fresh bucket', () => {
    const { decisions, writes } = decideBatch([request('a', 1)], [undefined], t0);
    expect(decisions[0]!.remaining).toBe(9);
    expect(writes).toEqual([bucket(9)]);
  });
});
