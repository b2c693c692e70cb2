/** A source of time in milliseconds. Everything time-dependent takes `nowMs` from one. */
export interface Clock {
  nowMs(): number;
}

/**
 * Wall-clock aligned but monotonic: `performance.timeOrigin + performance.now()`.
 * It starts at the wall time when the process started and never moves backwards, even
 * when the host's wall clock is stepped (NTP, manual changes). Epoch-aligned windows stay
 * aligned to within the drift accumulated since process start.
 */
export class SystemClock implements Clock {
  nowMs(): number {
    return performance.timeOrigin + performance.now();
  }
}

/** A clock for tests and simulations: time moves only when told to (also backwards). */
export class ManualClock implements Clock {
  #nowMs: number;

  /** @param startMs initial time in ms. @default 0 */
  constructor(startMs = 0) {
    this.#nowMs = startMs;
  }

  nowMs(): number {
    return this.#nowMs;
  }

  /** Moves time by `deltaMs` (may be negative, to test backwards time). */
  advance(deltaMs: number): void {
    this.#nowMs += deltaMs;
  }

  set(nowMs: number): void {
    this.#nowMs = nowMs;
  }
}

/** The process-wide default clock. */
export const systemClock: Clock = new SystemClock();
