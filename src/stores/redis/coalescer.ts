/** Sends many batches in one script call and returns one reply per batch, in order. */
export type ManyCall = (
  keys: readonly string[],
  args: readonly (string | number)[],
) => Promise<unknown>;

interface Pending {
  readonly keys: readonly string[];
  readonly args: readonly (string | number)[];
  readonly resolve: (reply: unknown) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Coalesces the batches that arrive within one turn of the event loop into one script
 * call per group (per hash slot on a Cluster, one group on a standalone Redis): each
 * call costs the client one command and Redis one script invocation, however many
 * checks it carries. Nothing waits for company: when the group has no call in flight, a
 * batch is sent at once, and the ones that arrive while a call is out go together on the
 * next turn.
 * Each batch stays atomic on its own (applyBatches.lua); a failed call fails every batch
 * in it, since none of them is known to have run or not.
 */
export class ScriptCoalescer {
  readonly #send: ManyCall;
  readonly #maxBatches: number;
  #queue = new Map<string | number, Pending[]>();
  #scheduled = false;
  /** Calls out per group; a group with none sends a new batch at once. */
  readonly #inFlight = new Map<string | number, number>();

  /** `maxBatches` bounds one call, so one script never runs long on Redis. */
  constructor(send: ManyCall, maxBatches = 64) {
    if (!Number.isSafeInteger(maxBatches) || maxBatches < 1)
      throw new RangeError(
        `RedisStore: maxBatchesPerCall must be a positive integer, got ${String(maxBatches)}`,
      );
    this.#send = send;
    this.#maxBatches = maxBatches;
  }

  /** Queues one batch (its keys and its applyBatch arguments) for the next call of its group. */
  call(group: string | number, keys: readonly string[], args: readonly (string | number)[]) {
    return new Promise<unknown>((resolve, reject) => {
      if ((this.#inFlight.get(group) ?? 0) === 0 && !this.#queue.has(group)) {
        this.#sendChunk(group, [{ keys, args, resolve, reject }]);
        return;
      }
      let q = this.#queue.get(group);
      if (q === undefined) this.#queue.set(group, (q = []));
      q.push({ keys, args, resolve, reject });
      if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(() => this.#flush());
      }
    });
  }

  #flush(): void {
    this.#scheduled = false;
    const queue = this.#queue;
    this.#queue = new Map();
    for (const [group, pending] of queue) {
      for (let i = 0; i < pending.length; i += this.#maxBatches) {
        this.#sendChunk(group, pending.slice(i, i + this.#maxBatches));
      }
    }
  }

  #sendChunk(group: string | number, chunk: readonly Pending[]): void {
    this.#inFlight.set(group, (this.#inFlight.get(group) ?? 0) + 1);
    const done = (): void => {
      const n = (this.#inFlight.get(group) ?? 1) - 1;
      if (n === 0) this.#inFlight.delete(group);
      else this.#inFlight.set(group, n);
    };
    const keys: string[] = [];
    const args: (string | number)[] = [chunk.length];
    for (const p of chunk) {
      for (const k of p.keys) keys.push(k);
      args.push(p.keys.length, p.args.length);
      for (const a of p.args) args.push(a);
    }
    this.#send(keys, args).then(
      (reply) => {
        done();
        if (!Array.isArray(reply) || reply.length !== chunk.length) {
          const error = new TypeError(
            `applyBatches.lua answered ${Array.isArray(reply) ? reply.length : typeof reply} replies for ${chunk.length} batches`,
          );
          for (const p of chunk) p.reject(error);
          return;
        }
        chunk.forEach((p, i) => p.resolve(reply[i]));
      },
      (error: unknown) => {
        done();
        for (const p of chunk) p.reject(error);
      },
    );
  }
}
