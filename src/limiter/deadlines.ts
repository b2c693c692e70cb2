/** One pending deadline; `clear()` when the call it guards has answered. */
export interface Deadline {
  clear(): void;
}

class Entry implements Deadline {
  constructor(
    readonly queue: DeadlineQueue,
    readonly atMs: number,
    /** Undefined once cleared or fired. */
    public onExpire: (() => void) | undefined,
  ) {}

  clear(): void {
    if (this.onExpire === undefined) return;
    this.onExpire = undefined;
    this.queue.dropCleared();
  }
}

/**
 * Deadlines of in-flight store calls that share one timeout length. Calls start in time
 * order, so they expire in the order they were added: one timer, for the oldest pending
 * one, serves them all, where a timer per call (a `setTimeout` and its `clearTimeout`,
 * plus a promise to race) cost a remote check more than its own decision.
 */
class DeadlineQueue {
  readonly #timeoutMs: number;
  readonly #entries: Entry[] = [];
  #head = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(timeoutMs: number) {
    this.#timeoutMs = timeoutMs;
  }

  add(onExpire: () => void): Deadline {
    const entry = new Entry(this, performance.now() + this.#timeoutMs, onExpire);
    this.#entries.push(entry);
    if (this.#timer === undefined) this.#arm(entry.atMs);
    return entry;
  }

  /** Drops answered calls from the front, so the queue holds only what is pending. */
  dropCleared(): void {
    const entries = this.#entries;
    while (this.#head < entries.length && entries[this.#head]!.onExpire === undefined) this.#head++;
    if (this.#head === entries.length) {
      entries.length = 0;
      this.#head = 0;
      clearTimeout(this.#timer);
      this.#timer = undefined;
    } else if (this.#head > 1024 && this.#head * 2 > entries.length) {
      entries.splice(0, this.#head);
      this.#head = 0;
    }
  }

  #arm(atMs: number): void {
    this.#timer = setTimeout(() => this.#fire(), Math.max(0, atMs - performance.now()));
  }

  #fire(): void {
    this.#timer = undefined;
    const now = performance.now();
    const entries = this.#entries;
    // Timers may fire a little early or late; an entry is due once its instant has come.
    while (this.#head < entries.length && entries[this.#head]!.atMs <= now + 0.5) {
      const entry = entries[this.#head++]!;
      const expire = entry.onExpire;
      entry.onExpire = undefined;
      expire?.();
    }
    this.dropCleared();
    if (this.#head < entries.length && this.#timer === undefined) {
      this.#arm(entries[this.#head]!.atMs);
    }
  }
}

/** Deadlines grouped by timeout length (a limiter sees few distinct lengths). */
export class Deadlines {
  readonly #queues = new Map<number, DeadlineQueue>();

  /** Calls `onExpire` after `timeoutMs` unless the returned deadline is cleared first. */
  add(timeoutMs: number, onExpire: () => void): Deadline {
    let queue = this.#queues.get(timeoutMs);
    if (queue === undefined) {
      // Bounded: a caller-supplied timeoutMs could make a queue per value.
      if (this.#queues.size >= 64) this.#queues.clear();
      this.#queues.set(timeoutMs, (queue = new DeadlineQueue(timeoutMs)));
    }
    return queue.add(onExpire);
  }
}
