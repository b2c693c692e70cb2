import { describe, expect, it } from 'vitest';
import { StateSaver } from '../../src/quota/state-saver.js';

/** A write the test finishes by hand; records the state version each write serialized. */
function manualWrites() {
  let version = 0;
  const writes: { saw: number; finish: (ok: boolean) => void; written: Promise<boolean> }[] = [];
  const saver = new StateSaver(() => {
    let finish!: (ok: boolean) => void;
    const written = new Promise<boolean>((resolve) => (finish = resolve));
    writes.push({ saw: version, finish, written });
    return written;
  });
  return { saver, writes, change: () => ++version };
}

describe('StateSaver', () => {
  it('one write in flight; every save asked for meanwhile shares the next one, which sees their changes', async () => {
    const { saver, writes, change } = manualWrites();
    change();
    const first = saver.save();
    const later = Array.from({ length: 100 }, () => (change(), saver.save()));
    expect(writes.length).toBe(1);
    writes[0]!.finish(true);
    await first;
    await Promise.resolve();
    expect(writes.length).toBe(2);
    // The second write began after all 100 changes.
    expect(writes[1]!.saw).toBe(101);
    writes[1]!.finish(true);
    expect(await Promise.all(later)).toEqual(Array.from({ length: 100 }, () => true));
    expect(writes.length).toBe(2);
  });

  it('a refused write is reported to its callers, and the next save writes again', async () => {
    const { saver, writes } = manualWrites();
    const a = saver.save();
    writes[0]!.finish(false);
    expect(await a).toBe(false);
    const b = saver.save();
    expect(writes.length).toBe(2);
    writes[1]!.finish(true);
    expect(await b).toBe(true);
  });

  it('a save asked for just as a write ends, before the waiting one starts, joins the waiting one', async () => {
    const { saver, writes } = manualWrites();
    const first = saver.save();
    const second = saver.save();
    // Runs when the first write ends: after the saver has seen it end, before the write
    // that waits has begun.
    let third: Promise<boolean> | undefined;
    void writes[0]!.written.then(() => (third = saver.save()));
    writes[0]!.finish(true);
    await first;
    await Promise.resolve();
    expect(third).toBeDefined();
    expect(writes.length).toBe(2);
    writes[1]!.finish(true);
    expect(await Promise.all([second, third])).toEqual([true, true]);
    expect(writes.length).toBe(2);
  });
});
