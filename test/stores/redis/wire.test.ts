import { describe, expect, it } from 'vitest';
import { gcra } from '../../../src/algorithms/gcra.js';
import { tokenBucket } from '../../../src/algorithms/token-bucket.js';
import { encodeBatches, splitReplies, type WireBatch } from '../../../src/stores/redis/wire.js';

const tbParams = { rate: 10, periodMs: 1_000, burst: 20 };
const gcraParams = { rate: 7, periodMs: 1_000, burst: 7 };

const batch = (over: Partial<WireBatch> = {}): WireBatch => ({
  items: [
    { key: '{t}:a', algorithm: tokenBucket, params: tbParams, cost: 3, enforce: true },
    { key: '{t}:b', algorithm: gcra, params: gcraParams, cost: 0, enforce: false },
  ],
  keys: ['p:{t}:a', 'p:{t}:b'],
  nowMs: undefined,
  dedup: false,
  dedupTtlMs: 60_000,
  ...over,
});

const frame = (tag: number, body: Buffer): Buffer => {
  const head = Buffer.alloc(5);
  head.writeUInt8(tag, 0);
  head.writeUInt32LE(body.length, 1);
  return Buffer.concat([head, body]);
};

describe('applyBatches wire format', () => {
  it('packs each batch header and item in order, the keys of every batch one after another', () => {
    const { keys, packed } = encodeBatches([
      batch(),
      batch({ nowMs: 1_700_000_000_000.25, dedup: true, keys: ['p:{t}:a', 'p:{t}:b', 'p:{t}:d'] }),
    ]);
    expect(keys).toEqual(['p:{t}:a', 'p:{t}:b', 'p:{t}:a', 'p:{t}:b', 'p:{t}:d']);
    expect(packed.length).toBe(2 * (19 + 2 * 50));
    // first batch: server clock, no request id, 2 items
    expect(packed.readUInt8(0)).toBe(0);
    expect(packed.readUInt16LE(9)).toBe(2);
    expect(packed.readDoubleLE(11)).toBe(60_000);
    // its first item: token bucket (code 1), ttl, rate, periodMs, burst, 0, cost 3, enforce
    const item = 19;
    expect(packed.readUInt8(item)).toBe(1);
    expect(packed.readDoubleLE(item + 1)).toBe(tokenBucket.ttlMs(tbParams));
    expect([2, 3, 4, 5].map((i) => packed.readDoubleLE(item + 1 + 8 * (i - 1)))).toEqual([
      10, 1_000, 20, 0,
    ]);
    expect(packed.readDoubleLE(item + 41)).toBe(3);
    expect(packed.readUInt8(item + 49)).toBe(1);
    // its second item: gcra (code 2), cost 0, shadow
    expect(packed.readUInt8(item + 50)).toBe(2);
    expect(packed.readDoubleLE(item + 50 + 41)).toBe(0);
    expect(packed.readUInt8(item + 50 + 49)).toBe(0);
    // second batch: client clock and request id flags, its now exact
    const second = 19 + 100;
    expect(packed.readUInt8(second)).toBe(3);
    expect(packed.readDoubleLE(second + 1)).toBe(1_700_000_000_000.25);
  });

  it('splits a reply into one per batch: packed decisions, or [-1, item] for a foreign key', () => {
    const decided = Buffer.from([1, 2, 3]);
    const reply = Buffer.concat([frame(0, decided), frame(1, Buffer.from([2, 0, 0, 0]))]);
    const [a, b] = splitReplies(reply, 2);
    expect(a).toEqual(decided);
    expect(b).toEqual([-1, 2]);
  });

  it('refuses a reply that is not the batches it was asked for', () => {
    const one = frame(0, Buffer.from([1]));
    expect(() => splitReplies(one, 2)).toThrow(
      'applyBatches.lua answered 1 replies (6 bytes) for 2 batches',
    );
    expect(() => splitReplies(one.subarray(0, 5), 1)).toThrow(
      'applyBatches.lua answered 0 replies (5 bytes) for 1 batches',
    );
    expect(() => splitReplies(frame(7, Buffer.alloc(0)), 1)).toThrow(
      'applyBatches.lua answered tag 7 for batch 1',
    );
    expect(() => splitReplies([1, 2], 1)).toThrow('applyBatches.lua answered object');
  });
});
