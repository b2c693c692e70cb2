import type { AlgorithmKind } from '../core/policy.js';
import type { WindowParams } from './fixed-window.js';
import type { GcraParams } from './gcra.js';
import type { LeakyBucketParams } from './leaky-bucket.js';
import type { TokenBucketParams } from './token-bucket.js';

/** What an algorithm admits over time: a sustained rate and what may come at once. */
export interface SustainedRate {
  /** Units admitted per second, sustained. */
  readonly perSecond: number;
  /**
   * Most units admitted at one instant: the burst (token bucket, GCRA), the queue (leaky
   * bucket), or twice the limit across a fixed window's boundary (the limit for the
   * sliding algorithms).
   */
  readonly atOnce: number;
  /** The window, for window algorithms (their counts start again each window). */
  readonly windowMs?: number;
}

/** The sustained rate and the most at once of an algorithm's validated params. */
export function sustainedRate(kind: AlgorithmKind, params: unknown): SustainedRate {
  switch (kind) {
    case 'token-bucket':
    case 'gcra': {
      const p = params as TokenBucketParams | GcraParams;
      return { perSecond: (p.rate * 1_000) / p.periodMs, atOnce: p.burst };
    }
    case 'leaky-bucket': {
      const p = params as LeakyBucketParams;
      return { perSecond: (p.rate * 1_000) / p.periodMs, atOnce: p.capacity };
    }
    case 'fixed-window': {
      const p = params as WindowParams;
      return {
        perSecond: (p.limit * 1_000) / p.windowMs,
        atOnce: 2 * p.limit,
        windowMs: p.windowMs,
      };
    }
    case 'sliding-log':
    case 'sliding-window-counter': {
      const p = params as WindowParams;
      return { perSecond: (p.limit * 1_000) / p.windowMs, atOnce: p.limit, windowMs: p.windowMs };
    }
  }
}
