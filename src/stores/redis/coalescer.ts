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
 * checks it carries. Nothing waits for company: a lone batch is sent on the next turn.
 * Each batch stays atomic on its own (applyBatches.lua); a failed call fails every batch
 * in it, since none of them is known to have run or not.
 */
export class ScriptCoalescer {
  readonly #send: ManyCall;
  readonly #maxBatches: number;
  #queue = new Map<string | number, Pending[]>();
  #scheduled = false;

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
    for (const pending of queue.values()) {
      for (let i = 0; i < pending.length; i += this.#maxBatches) {
        this.#sendChunk(pending.slice(i, i + this.#maxBatches));
      }
    }
  }

  #sendChunk(chunk: readonly Pending[]): void {
    const keys: string[] = [];
    const args: (string | number)[] = [chunk.length];
    for (const p of chunk) {
      for (const k of p.keys) keys.push(k);
      args.push(p.keys.length, p.args.length);
      for (const a of p.args) args.push(a);
    }
    this.#send(keys, args).then(
      (reply) => {
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
        for (const p of chunk) p.reject(error);
      },
    );
  }
}
