/**
 * Saves a leader's state with at most one write in flight. A save asked for while one
 * runs joins the next write, which starts when the running one ends and serializes the
 * state as it is then: it holds everything issued before any of its callers asked, so
 * each caller's "saved before sent" holds, and N newcomers in one round trip cost two
 * writes, not N (each of the whole ledger, queued in front of the term's renewals).
 */
export class StateSaver {
  readonly #write: () => Promise<boolean>;
  #running: Promise<boolean> | undefined;
  #next: Promise<boolean> | undefined;

  /** @param write serializes the state now and writes it; false when refused. */
  constructor(write: () => Promise<boolean>) {
    this.#write = write;
  }

  /** Resolves true once a write that began after this call has succeeded. */
  save(): Promise<boolean> {
    // A next write already waits (also in the moment between the running write's end and
    // the next one's start): join it, so that two writes are never in flight.
    if (this.#next !== undefined) return this.#next;
    if (this.#running === undefined) return this.#start();
    // The running write may have serialized the state before this caller's change.
    this.#next = this.#running.then(
      () => this.#start(),
      () => this.#start(),
    );
    return this.#next;
  }

  #start(): Promise<boolean> {
    this.#next = undefined;
    const running = this.#write().finally(() => {
      if (this.#running === running) this.#running = undefined;
    });
    this.#running = running;
    return running;
  }
}
