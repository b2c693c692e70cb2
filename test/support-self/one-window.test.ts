import { describe, expect, it } from 'vitest';
import { inOneWindow } from '../support/one-window.js';
import { sleep } from '../support/wait.js';

describe('inOneWindow', () => {
  it('returns the first round that stays inside one window', async () => {
    const attempts: number[] = [];
    const r = await inOneWindow(3_600_000 * 24 * 365, async (attempt) => {
      attempts.push(attempt);
      return 'done';
    });
    expect(r).toBe('done');
    // A one-year window: the first round straddles a boundary only at New Year.
    expect(attempts.length).toBeLessThanOrEqual(2);
  });

  it('runs again, with the next attempt number, while rounds straddle a boundary, then gives up', async () => {
    const attempts: number[] = [];
    // Rounds of 5 ms against 1 ms windows always straddle one.
    await expect(
      inOneWindow(1, async (attempt) => {
        attempts.push(attempt);
        await sleep(5);
      }),
    ).rejects.toThrow('every one of 3 rounds straddled a 1 ms window boundary');
    expect(attempts).toEqual([0, 1, 2]);
  });
});
