import type { Algorithm, InPlaceStep } from '../../algorithms/algorithm.js';

/**
 * The buckets MemoryStore holds under one kind of key: one value index (buckets by raw
 * descriptor value, see bucket-place.ts), or the text keys (`id` undefined).
 */
export interface Table {
  readonly id: string | undefined;
  readonly owner: object;
  readonly map: Map<string, Bucket>;
  /** Kept while empty: handed out by `valueIndex` (a caller may hold it), or the text table. */
  pinned: boolean;
  /** The object the next in-place step of `spareOf` writes into before a commit copies it. */
  spare: unknown;
  spareOf: InPlaceStep<unknown, unknown> | undefined;
}

export function newTable(id: string | undefined, owner: object, pinned: boolean): Table {
  return { id, owner, map: new Map(), pinned, spare: undefined, spareOf: undefined };
}

/**
 * A held bucket: its place in the store (its expiry and use mark are in the store's
 * per-slot arrays) and, for an algorithm with an in-place step, the
 * state's own fields, copied in (`state` is then the bucket itself), so a check reads one
 * object rather than a bucket and then its state. A class on purpose: V8 keeps the fields
 * set while a class instance is built inside the object (in-object slack tracking),
 * where fields added to an object literal would go to a separate array.
 */
export class Bucket {
  readonly table: Table;
  readonly key: string;
  /** Its slot in the store's ring. */
  readonly slot: number;
  /** The algorithm whose state it holds (another algorithm reads it as a fresh bucket). */
  readonly algorithm: Algorithm<unknown, unknown>;
  /** False once removed (expired, evicted or closed): a stale handle then looks the key up. */
  held = true;
  state: unknown;

  constructor(
    table: Table,
    key: string,
    slot: number,
    algorithm: Algorithm<unknown, unknown>,
    state: unknown,
  ) {
    this.table = table;
    this.key = key;
    this.slot = slot;
    this.algorithm = algorithm;
    const inPlace = algorithm.inPlace;
    if (inPlace === undefined) this.state = state;
    else {
      this.state = this;
      inPlace.copy(state, this as never);
    }
  }
}

/**
 * One subclass per algorithm: V8 sizes a class's instances from the first few built, so
 * buckets of algorithms with more state fields, built later, would spill them out of the
 * object if every algorithm shared one class.
 */
const classes = new WeakMap<Algorithm<unknown, unknown>, typeof Bucket>();

/** A new bucket holding `state` of `algorithm` (see {@link Bucket}). */
export function newBucket(
  table: Table,
  key: string,
  slot: number,
  algorithm: Algorithm<unknown, unknown>,
  state: unknown,
): Bucket {
  let Class = classes.get(algorithm);
  if (Class === undefined) {
    Class = class extends Bucket {};
    classes.set(algorithm, Class);
  }
  return new Class(table, key, slot, algorithm, state);
}
