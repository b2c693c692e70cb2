import { describe, expect, it } from 'vitest';
import { StateSaver } from '../../src/quota/state-saver.js';

/** A write the test finishes by hand; records the state version each write serialized. */
function manualWrites() {
  let version = 0;
  const writes: { saw: number; finish: (ok: boolean) => void }[] = [];
  const saver = new StateSaver(
    () => new Promise<boolean>((finish) => writes.push({ saw: version, finish })),
  );
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
});
