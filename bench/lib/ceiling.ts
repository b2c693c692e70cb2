/**
 * The Redis ceiling: `redis-benchmark` (redis-tools) sending one exact script call, as
 * fast as one Redis serves it (`-c 50 -P 16`, many connections, pipelined), with keys
 * drawn by redis-benchmark (`__rand_int__`) or one hot key. The call is captured with
 * MONITOR from a real Sluice check, so the ceiling always runs the script and arguments
 * the store actually sends, whatever their layout.
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

/**
 * Runs `check()` twice with MONITOR on and returns the arguments of the last EVALSHA the
 * server saw (the first call may have been EVALSHA → NOSCRIPT → EVAL).
 */
export async function captureScriptCall(
  admin: Redis,
  check: () => Promise<unknown>,
): Promise<string[]> {
  const base = admin.duplicate();
  base.on('error', () => undefined);
  const monitor = await base.monitor();
  monitor.on('error', () => undefined);
  let last: string[] | undefined;
  monitor.on('monitor', (_time: string, args: string[]) => {
    if (String(args[0]).toLowerCase() === 'evalsha') last = args.map(String);
  });
  try {
    await check();
    await check();
    // MONITOR output is asynchronous to the command's reply: give it a moment.
    for (let i = 0; i < 50 && last === undefined; i++) {
      await new Promise((r) => setTimeout(r, 20));
    }
  } finally {
    monitor.disconnect();
    base.disconnect();
  }
  if (last === undefined) throw new Error('no EVALSHA seen while capturing the script call');
  return last;
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
