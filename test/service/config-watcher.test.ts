/**
 * ConfigWatcher on its own, for what the end-to-end reload tests (config-reload.test.ts)
 * cannot time: a directory learnt from a load is watched only after that load, so a file
 * written into it in between raises no event.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigWatcher, type WatchedPath } from '../../src/service/config-watcher.js';
import { waitFor } from '../support/wait.js';

const base = mkdtempSync(join(tmpdir(), 'sluice-watcher-'));
afterAll(() => rmSync(base, { recursive: true, force: true }));

describe('ConfigWatcher', () => {
  it('reloads when a directory learnt from a load already holds a file that load did not read', async () => {
    const config = join(base, 'config');
    const team = join(base, 'team'); // outside every watched directory until a load names it
    mkdirSync(config);
    let loads = 0;
    let sentinelAt: number | undefined; // the load that first saw sentinel.yaml
    const watcher = new ConfigWatcher(
      [{ path: config, entries: true }],
      async (): Promise<WatchedPath[]> => {
        loads++;
        if (sentinelAt === undefined && existsSync(join(config, 'sentinel.yaml'))) {
          sentinelAt = loads;
        }
        if (loads === 1) {
          // The load lists `team` (empty), then a file lands there before it is watched.
          mkdirSync(team);
          writeFileSync(join(team, 'deep.yaml'), 'domain: deep\n');
          return [
            { path: config, entries: true },
            { path: team, entries: true },
          ];
        }
        return [
          { path: config, entries: true },
          { path: team, entries: true },
          { path: join(team, 'deep.yaml'), entries: false },
        ];
      },
      { debounceMs: 10 },
    );
    try {
      await watcher.start();
      writeFileSync(join(config, 'svc.yaml'), 'domain: svc\n');
      await waitFor(() => (loads >= 2 ? true : undefined), {
        what: 'a second load that reads team/deep.yaml',
        timeoutMs: 5_000,
      });
      // The second load read everything, so no third before the next change: one more
      // change (a sentinel) is made and awaited, and loads run in order, so a late
      // duplicate would have been counted before the sentinel's load. No fixed sleep: on
      // a busy machine it may end before a late duplicate shows.
      writeFileSync(join(config, 'sentinel.yaml'), 'domain: sentinel\n');
      await waitFor(() => sentinelAt, { what: 'a load that reads the sentinel', timeoutMs: 5_000 });
      expect(sentinelAt).toBe(3);
    } finally {
      watcher.close();
    }
  });
});
