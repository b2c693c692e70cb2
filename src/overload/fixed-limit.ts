import type { LimitAlgorithm } from './limit-algorithm.js';

/** A limit that never changes: a plain bulkhead. */
export class FixedLimit implements LimitAlgorithm {
  readonly limit: number;

  /** @param limit requests in flight at most, a whole number ≥ 1 (validated by the caller) */
  constructor(limit: number) {
    this.limit = limit;
  }

  onSample(): void {
    // A fixed limit learns nothing.
  }
}
