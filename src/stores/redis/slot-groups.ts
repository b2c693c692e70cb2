/**
 * Redis Cluster hash slots of Sluice keys, and the grouping of a batch by slot.
 *
 * The slot is computed here (CRC16/XMODEM of the hash tag, mod 16384, as the Redis
 * Cluster specification defines it) rather than with `cluster-key-slot`: that package is
 * only a transitive dependency of ioredis (not declared by Sluice, so a strict installer
 * may not expose it) and ships no types. The cluster tests check this function against
 * the server's `CLUSTER KEYSLOT`.
 */

/** Number of hash slots in Redis Cluster. */
export const SLOT_COUNT = 16_384;

const TABLE = (() => {
  const t = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let b = 0; b < 8; b++)
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    t[i] = crc;
  }
  return t;
})();

function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ byte) & 0xff]!;
  return crc;
}

/**
 * The hash slot of a full Redis key: of the text between the first `{` and the next `}`
 * when that is non-empty, else of the whole key (UTF-8 bytes), as Redis Cluster computes it.
 */
export function keySlot(key: string): number {
  const open = key.indexOf('{');
  if (open >= 0) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) key = key.slice(open + 1, close);
  }
  return crc16(Buffer.from(key, 'utf8')) % SLOT_COUNT;
}

/** The requests of one batch that share a slot: their indices in the batch, in order. */
export interface SlotGroup {
  readonly slot: number;
  readonly indices: readonly number[];
}

/** Groups the batch's full Redis keys by slot, groups in order of first appearance. */
export function groupBySlot(keys: readonly string[]): SlotGroup[] {
  const bySlot = new Map<number, number[]>();
  keys.forEach((key, i) => {
    const slot = keySlot(key);
    const group = bySlot.get(slot);
    if (group === undefined) bySlot.set(slot, [i]);
    else group.push(i);
  });
  return [...bySlot].map(([slot, indices]) => ({ slot, indices }));
}

/** The batch's groups: by slot on a Cluster, else one group of every index (one call). */
export function slotGroupsOf(keys: readonly string[], cluster: boolean): readonly SlotGroup[] {
  return cluster ? groupBySlot(keys) : [{ slot: 0, indices: keys.map((_, i) => i) }];
}

/**
 * Runs `call` for every group at once and puts each group's results (one per index of
 * the group, in its order) at the group's indices of the batch.
 */
export async function perGroup<R>(
  groups: readonly SlotGroup[],
  size: number,
  call: (group: SlotGroup) => Promise<readonly R[]>,
): Promise<R[]> {
  const results = new Array<R>(size);
  await Promise.all(
    groups.map(async (g) => {
      const out = await call(g);
      g.indices.forEach((i, j) => {
        results[i] = out[j]!;
      });
    }),
  );
  return results;
}
