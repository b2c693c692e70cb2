import type { AlgorithmKind } from '../core/policy.js';
import type { Algorithm } from './algorithm.js';
import { fixedWindow } from './fixed-window.js';
import { gcra } from './gcra.js';
import { leakyBucket } from './leaky-bucket.js';
import { slidingLog } from './sliding-log.js';
import { slidingWindowCounter } from './sliding-window-counter.js';
import { tokenBucket } from './token-bucket.js';

/**
 * Every algorithm by kind. Typed loosely on purpose: a policy's params were produced by
 * the same algorithm's `paramsSchema`, which is what makes the pairing safe.
 */
export const ALGORITHMS: Readonly<Record<AlgorithmKind, Algorithm<unknown, unknown>>> =
  Object.freeze({
    'token-bucket': tokenBucket as Algorithm<unknown, unknown>,
    gcra: gcra as Algorithm<unknown, unknown>,
    'fixed-window': fixedWindow as Algorithm<unknown, unknown>,
    'sliding-log': slidingLog as Algorithm<unknown, unknown>,
    'sliding-window-counter': slidingWindowCounter as Algorithm<unknown, unknown>,
    'leaky-bucket': leakyBucket as Algorithm<unknown, unknown>,
  });

export function algorithmOf(kind: AlgorithmKind): Algorithm<unknown, unknown> {
  return ALGORITHMS[kind];
}
