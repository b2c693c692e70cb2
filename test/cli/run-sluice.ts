/**
 * Spawns the built CLI (dist/cli/main.js; `npm run build` first) the way a user runs it.
 */
import { spawn, type SpawnOptions } from 'node:child_process';
import { join } from 'node:path';

export const root = join(import.meta.dirname, '../..');
export const bin = join(root, 'dist/cli/main.js');

export interface Outcome {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** `serve` logged that it serves (the test then stopped it). */
  readonly served: boolean;
}

export interface RunOptions {
  /** The whole environment besides PATH (nothing else is inherited). */
  readonly env?: Record<string, string>;
  /** Run as this user and group (only root may ask). */
  readonly uid?: number;
  readonly gid?: number;
  readonly cwd?: string;
}

/**
 * Runs `sluice ...args` until it exits, or until it logs "sluice serving" (then it is
 * killed). A run that does neither within 20 s is killed too, so nothing outlives a test.
 */
export function runSluice(args: readonly string[], options: RunOptions = {}): Promise<Outcome> {
  const spawnOptions: SpawnOptions = {
    cwd: options.cwd ?? root,
    env: { PATH: process.env['PATH'] ?? '', ...options.env },
    ...(options.uid === undefined ? {} : { uid: options.uid }),
    ...(options.gid === undefined ? {} : { gid: options.gid }),
  };
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], spawnOptions);
    let stdout = '';
    let stderr = '';
    let served = false;
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
      if (!served && stdout.includes('sluice serving')) {
        served = true;
        child.kill('SIGKILL');
      }
    });
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, served });
    });
  });
}

/** Loopback and any free ports, so that a `serve` that does start binds nothing fixed. */
export const SERVE_ENV: Readonly<Record<string, string>> = Object.freeze({
  PORT: '0',
  GRPC_PORT: '0',
  HOST: '127.0.0.1',
  GRPC_HOST: '127.0.0.1',
});
