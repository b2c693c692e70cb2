import type { LimitAlgorithm } from './limit-algorithm.js';
import { PolicyError } from '../core/errors.js';

/** A limit that never changes: a plain bulkhead. */
export class FixedLimit implements LimitAlgorithm {
  readonly limit: number;

  /**
   * @param limit requests in flight at most, a whole number ≥ 1; else a `PolicyError`
   *   (`SLUICE_ERR_OVERLOAD_CONFIG_INVALID`)
   */
  constructor(limit: number) {
    if (!Number.isSafeInteger(limit) || limit < 1) {
      throw new PolicyError(
        'SLUICE_ERR_OVERLOAD_CONFIG_INVALID',
        `fixed limit: limit must be a whole number >= 1, got ${String(limit)}`,
      );
    }
    this.limit = limit;
  }

  onSample(): void {
    // A fixed limit learns nothing.
  }
}
