import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DriveResult } from '../../bench/lib/driver.js';
import { startChild } from '../../bench/lib/serve-child.js';
import { RedisServer } from '../support/redis-server.js';

const SIDE_CHILD = path.join(import.meta.dirname, '..', '..', 'bench', 'lib', 'side-child.ts');

/** One side of the pinned mode, driven for `ms` over the child protocol, then closed. */
async function driveSide(
  args: readonly string[],
  ms: number,
  cores?: string,
): Promise<{ result: DriveResult; pid: number }> {
  const child = await startChild(SIDE_CHILD, args, cores);
  try {
    expect(child.first).toBe('ready');
    const answer = await child.request(`drive ${ms}`);
    expect(answer.startsWith('result ')).toBe(true);
    const result = JSON.parse(answer.slice('result '.length)) as DriveResult;
    expect(await child.request('close')).toBe('closed');
    return { result, pid: child.pid };
  } finally {
    await child.stop();
  }
}

describe('bench side child (the pinned mode)', () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await RedisServer.start();
  });
  afterAll(async () => {
    await server.stop();
  });

  it('drives a memory-store side in its own process and reports its own CPU', async () => {
    for (const side of ['sluice-sync', 'peer']) {
      const { result, pid } = await driveSide(
        ['--scenario', 'memory/c64/zipf/tb/allow', '--side', side],
        150,
      );
      expect(pid).not.toBe(process.pid);
      expect(result.errors).toBe(0);
      expect(result.decisions).toBeGreaterThan(0);
      expect(result.allowed).toBe(result.decisions);
      expect(result.clientCpuUsPerDecision).toBeGreaterThan(0);
    }
  });

  it('drives Sluice and the peer on Redis, pinned with taskset', async () => {
    for (const side of ['sluice', 'peer']) {
      const { result } = await driveSide(
        [
          '--scenario',
          'redis/c1/zipf/tb/allow',
          '--side',
          side,
          '--redis-port',
          String(server.port),
        ],
        150,
        '0',
      );
      expect(result.errors).toBe(0);
      expect(result.decisions).toBeGreaterThan(0);
      // fail-closed policies: a decision Redis did not make would be a denial
      expect(result.allowed).toBe(result.decisions);
    }
  });

  it('answers an unknown request with an error, not a hang', async () => {
    const child = await startChild(SIDE_CHILD, [
      '--scenario',
      'memory/c64/zipf/tb/allow',
      '--side',
      'bare',
    ]);
    try {
      await expect(child.request('jump')).rejects.toThrow(/unknown request "jump"/);
    } finally {
      await child.stop();
    }
  });
});
