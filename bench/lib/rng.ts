/**
 * Seeded key sequences for the load driver: a PRNG (mulberry32), a Zipf sampler over
 * ranks 0..n-1, and rings of pre-drawn ranks so the measured loop spends no time
 * sampling. Same seed, same sequence, on every run and for every side of a comparison.
 */

import { mulberry32 } from '../../test/support/random.js';

/**
 * Zipf(s) over ranks 0..n-1 (rank 0 the most frequent): P(k) ∝ 1/(k+1)^s. Inverse-CDF
 * sampling by binary search over a precomputed table.
 */
export function zipfSampler(n: number, s: number, random: () => number): () => number {
  const cdf = new Float64Array(n);
  let sum = 0;
  for (let i = 0; i < n; i++) {
    sum += 1 / Math.pow(i + 1, s);
    cdf[i] = sum;
  }
  for (let i = 0; i < n; i++) cdf[i] = cdf[i]! / sum;
  return () => {
    const u = random();
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (cdf[mid]! < u) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
}

/** How keys are drawn: one hot key, uniform over n keys, or Zipf(1.0) over n keys. */
export type Distribution = 'hot' | 'uniform' | 'zipf';

/** Ring size (a power of two, so the index is `i & RING_MASK`). */
export const RING_SIZE = 1 << 20;
export const RING_MASK = RING_SIZE - 1;

/** RING_SIZE pre-drawn key ranks for a distribution over `keys` keys. */
export function keyRing(dist: Distribution, keys: number, seed: number): Uint32Array {
  const ring = new Uint32Array(RING_SIZE);
  if (dist === 'hot') return ring; // every draw is rank 0
  const random = mulberry32(seed);
  const next = dist === 'zipf' ? zipfSampler(keys, 1.0, random) : () => Math.floor(random() * keys);
  for (let i = 0; i < RING_SIZE; i++) ring[i] = next();
  return ring;
}
