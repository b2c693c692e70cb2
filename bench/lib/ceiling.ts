/**
 * Redis reference points from `redis-benchmark` (redis-tools, `-c 50 -P 16`): a trivial
 * script and INCR. Sluice's own script call has a packed binary argument, which
 * redis-benchmark cannot send; script-ceiling.ts replays it instead.
 */
import { spawn } from 'node:child_process';
import { constants as fsConstants } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { openWindow } from './redis-stats.js';

/** Where redis-benchmark is: PATH, then /usr/bin and /usr/local/bin (as test/support does). */
export async function findRedisBenchmark(): Promise<string | undefined> {
  const dirs = (process.env['PATH'] ?? '').split(path.delimiter).filter((d) => d !== '');
  for (const dir of [...dirs, '/usr/bin', '/usr/local/bin']) {
    const candidate = path.resolve(dir, 'redis-benchmark');
    try {
      await fs.access(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      // keep looking
    }
  }
  return undefined;
}

export interface CeilingResult {
  readonly callsPerSecond: number;
  /** Redis command time per call (commandstats usec/calls of the command). */
  readonly redisUsPerCall: number;
  readonly command: string;
}

/** Runs redis-benchmark for one command; `-r 100000` fills `__rand_int__`. */
export async function runRedisBenchmark(
  binary: string,
  admin: Redis,
  port: number,
  requests: number,
  command: readonly string[],
): Promise<CeilingResult> {
  const close = await openWindow(admin);
  const args = [
    '-h',
    '127.0.0.1',
    '-p',
    String(port),
    '-c',
    '50',
    '-P',
    '16',
    '-n',
    String(requests),
    '-r',
    '100000',
    '--csv',
    ...command,
  ];
  const stdout = await new Promise<string>((resolve, reject) => {
    const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve(out) : reject(new Error(`redis-benchmark exited ${code}: ${err}`)),
    );
  });
  const line = stdout.trim().split('\n').at(-1) ?? '';
  const rps = Number(/^"[^"]*","([\d.]+)"/.exec(line)?.[1]);
  if (!Number.isFinite(rps)) throw new Error(`could not parse redis-benchmark output: ${stdout}`);
  const window = await close(requests);
  return {
    callsPerSecond: rps,
    // every call is one command, so per-decision command time is per-call time
    redisUsPerCall: window.commandUsPerDecision,
    command: command.map((a) => (a.length > 60 ? `${a.slice(0, 57)}...` : a || "''")).join(' '),
  };
}
