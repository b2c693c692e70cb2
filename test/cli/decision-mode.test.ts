/**
 * SLUICE_DECISION_MODE through the built CLI (dist/, spawned): `sluice serve` reads it,
 * refuses a value it cannot read, and decides the domains that do not say otherwise with
 * it. The counting rules themselves are tested in test/service/counting.test.ts.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/free-port.js';
import { sleep, waitFor } from '../support/wait.js';

const root = join(import.meta.dirname, '../..');
const bin = join(root, 'dist/cli/main.js');
const config = join(root, 'test/service/fixtures/counting');
const children: ChildProcess[] = [];

afterAll(async () => {
  for (const child of children) {
    if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) continue;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    process.kill(child.pid, 'SIGTERM');
    if ((await Promise.race([exited.then(() => true), sleep(5_000).then(() => false)])) === false)
      process.kill(child.pid, 'SIGKILL');
  }
});

describe('SLUICE_DECISION_MODE (sluice serve, spawned)', () => {
  it('refuses a value it cannot read, naming the variable', async () => {
    const r = await promisify(execFile)(process.execPath, [bin, 'serve', '--config', config], {
      env: { ...process.env, SLUICE_DECISION_MODE: 'all_or_nothing', PORT: '0', GRPC_PORT: '0' },
    }).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => e,
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      'SLUICE_DECISION_MODE: expected per-descriptor or all-or-nothing, got "all_or_nothing"',
    );
  });

  it('all-or-nothing: a request that one descriptor denies is charged nowhere', async () => {
    const [port, grpcPort] = [await freePort(), await freePort()];
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      SLUICE_DECISION_MODE: 'all-or-nothing',
      HOST: '127.0.0.1',
      GRPC_HOST: '127.0.0.1',
      PORT: String(port),
      GRPC_PORT: String(grpcPort),
    };
    delete env['REDIS_URL'];
    const child = spawn(process.execPath, [bin, 'serve', '--config', config], {
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    children.push(child);
    const base = `http://127.0.0.1:${port}`;
    await waitFor(
      async () =>
        (await fetch(`${base}/healthcheck`).catch(() => undefined))?.ok ? true : undefined,
      { what: 'sluice serve to be healthy', timeoutMs: 15_000, intervalMs: 50 },
    );
    const ask = async (tightHits: number) => {
      const res = await fetch(`${base}/json`, {
        method: 'POST',
        body: JSON.stringify({
          domain: 'counting',
          descriptors: [
            { entries: [{ key: 'tight', value: 'cli' }], hitsAddend: tightHits },
            { entries: [{ key: 'loose', value: 'cli' }] },
          ],
        }),
      });
      return ((await res.json()) as { statuses: { limitRemaining?: number }[] }).statuses.map(
        (s) => s.limitRemaining ?? 0,
      );
    };
    expect(await ask(2)).toEqual([0, 9]);
    // tight denies: loose is not charged (per descriptor, the default, it would answer 8)
    expect(await ask(1)).toEqual([0, 9]);
  });
});
