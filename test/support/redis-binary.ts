/**
 * Finds (and, as root, installs) the `redis-server` and `redis-cli` binaries that the
 * `*.redis.test.ts` and `*.cluster.test.ts` suites run against. Those suites must fail loudly
 * when Redis is missing (STYLE.md §5), so nothing here skips.
 */
import { spawn } from 'node:child_process';
import { constants as fsConstants } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { sleep } from './wait.js';

/** Absolute paths of the Redis binaries and the server's version (e.g. `7.0.15`). */
export interface RedisBinaries {
  /** Absolute path of `redis-server`. */
  server: string;
  /** Absolute path of `redis-cli`. */
  cli: string;
  /** `redis-server --version`'s `v=` field, e.g. `7.0.15`. */
  version: string;
}

/** Directories searched after `PATH`, in order. */
const EXTRA_DIRS = ['/usr/bin', '/usr/local/bin'];
const POLICY_RC_D = '/usr/sbin/policy-rc.d';
const INSTALL_LOCK = path.join(os.tmpdir(), 'sluice-redis-install.lock');
const LOCK_WAIT_MS = 10 * 60_000;
const INSTALL_HINT =
  'Install them with `sudo apt-get install redis-server` (Debian/Ubuntu; this also brings ' +
  'redis-cli through redis-tools), or put both redis-server and redis-cli on PATH.';

let cached: Promise<RedisBinaries> | undefined;

/**
 * Resolves the Redis binaries, installing Debian's `redis-server` package when they are
 * missing and the process is root.
 *
 * - Looks on `PATH`, then `/usr/bin` and `/usr/local/bin`.
 * - As root: `apt-get install -y --no-install-recommends redis-server` with
 *   `DEBIAN_FRONTEND=noninteractive`, running `apt-get update` only when the first attempt
 *   fails for lack of package lists. A `policy-rc.d` that exits 101 is in place during the
 *   install so the package does not start a system service; any pre-existing `policy-rc.d` is
 *   restored afterwards. If a server nonetheless appears on port 6379 during the install, it is
 *   stopped.
 * - Not root: rejects with an Error that says how to install.
 *
 * Concurrency: callers in one process share one promise (a success is cached for the life of
 * the process; a failure is not, so a later call tries again). Callers in different processes
 * (vitest forks) serialise the install through a lock file in `os.tmpdir()`.
 */
export function ensureRedisBinaries(): Promise<RedisBinaries> {
  if (!cached) {
    cached = resolveBinaries().catch((error: unknown) => {
      cached = undefined;
      throw error;
    });
  }
  return cached;
}

async function resolveBinaries(): Promise<RedisBinaries> {
  const found = await findBinaries();
  if (found) return found;
  if (process.getuid?.() !== 0) {
    throw new Error(
      `redis-server and/or redis-cli were not found on PATH, /usr/bin or /usr/local/bin, ` +
        `and this process is not root, so the test harness will not install them. ${INSTALL_HINT}`,
    );
  }
  return withInstallLock(async () => {
    // Another fork may have installed while we waited for the lock.
    const again = await findBinaries();
    if (again) return again;
    await installDebianPackage();
    const installed = await findBinaries();
    if (!installed) {
      throw new Error(
        `apt-get installed redis-server but redis-server/redis-cli are still not on PATH, ` +
          `/usr/bin or /usr/local/bin. ${INSTALL_HINT}`,
      );
    }
    return installed;
  });
}

async function findBinaries(): Promise<RedisBinaries | undefined> {
  const server = await which('redis-server');
  const cli = await which('redis-cli');
  if (!server || !cli) return undefined;
  const { stdout, code } = await run(server, ['--version']);
  const version = /v=(\S+)/.exec(stdout)?.[1];
  if (code !== 0 || !version) {
    throw new Error(`\`${server} --version\` exited ${code} and printed: ${stdout.trim()}`);
  }
  return { server, cli, version };
}

async function which(name: string): Promise<string | undefined> {
  const dirs = (process.env['PATH'] ?? '').split(path.delimiter).filter((dir) => dir !== '');
  for (const dir of [...dirs, ...EXTRA_DIRS]) {
    const candidate = path.resolve(dir, name);
    try {
      await fs.access(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      // not here; keep looking
    }
  }
  return undefined;
}

/** Holds a cross-process lock (an exclusive-create file holding our PID) while `body` runs. */
async function withInstallLock<T>(body: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      const handle = await fs.open(INSTALL_LOCK, 'wx');
      await handle.writeFile(String(process.pid));
      await handle.close();
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const holder = Number(await fs.readFile(INSTALL_LOCK, 'utf8').catch(() => ''));
    if (Number.isInteger(holder) && holder > 0 && !isAlive(holder)) {
      // The holder died mid-install; its lock is stale.
      await fs.rm(INSTALL_LOCK, { force: true });
      continue;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `waited ${LOCK_WAIT_MS} ms for the redis install lock ${INSTALL_LOCK} held by PID ${holder}`,
      );
    }
    await sleep(250);
  }
  try {
    return await body();
  } finally {
    const holder = await fs.readFile(INSTALL_LOCK, 'utf8').catch(() => '');
    if (holder === String(process.pid)) await fs.rm(INSTALL_LOCK, { force: true });
  }
}

async function installDebianPackage(): Promise<void> {
  const portWasBusy = await isListening(6379);
  const restorePolicy = await blockServiceStarts();
  try {
    const args = [
      '-o',
      'DPkg::Lock::Timeout=300',
      'install',
      '-y',
      '--no-install-recommends',
      'redis-server',
    ];
    let result = await run('apt-get', args);
    if (
      result.code !== 0 &&
      /Unable to locate package|has no installation candidate/.test(result.stdout)
    ) {
      const update = await run('apt-get', ['-o', 'DPkg::Lock::Timeout=300', 'update']);
      if (update.code !== 0) {
        throw new Error(`apt-get update exited ${update.code}:\n${tail(update.stdout)}`);
      }
      result = await run('apt-get', args);
    }
    if (result.code !== 0) {
      throw new Error(
        `apt-get install redis-server exited ${result.code}:\n${tail(result.stdout)}\n${INSTALL_HINT}`,
      );
    }
  } finally {
    await restorePolicy();
  }
  if (!portWasBusy && (await isListening(6379))) await stopSystemRedis();
}

/**
 * Puts a `policy-rc.d` that exits 101 ("action forbidden") in place so that invoke-rc.d in the
 * package's postinst starts no service. Returns a function restoring what was there before.
 */
async function blockServiceStarts(): Promise<() => Promise<void>> {
  const previous = await fs
    .readFile(POLICY_RC_D)
    .then(async (content) => ({ content, mode: (await fs.stat(POLICY_RC_D)).mode }))
    .catch(() => undefined);
  await fs.mkdir(path.dirname(POLICY_RC_D), { recursive: true });
  await fs.writeFile(
    POLICY_RC_D,
    '#!/bin/sh\n# sluice test harness: no services during install\nexit 101\n',
    {
      mode: 0o755,
    },
  );
  await fs.chmod(POLICY_RC_D, 0o755);
  return async () => {
    if (previous) {
      await fs.writeFile(POLICY_RC_D, previous.content);
      await fs.chmod(POLICY_RC_D, previous.mode & 0o7777);
    } else {
      await fs.rm(POLICY_RC_D, { force: true });
    }
  };
}

/** Stops a system redis that the package install started on 6379 despite policy-rc.d. */
async function stopSystemRedis(): Promise<void> {
  for (const pidFile of ['/run/redis/redis-server.pid', '/var/run/redis/redis-server.pid']) {
    const pid = Number(await fs.readFile(pidFile, 'utf8').catch(() => ''));
    if (!Number.isInteger(pid) || pid <= 0) continue;
    const comm = await fs.readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '');
    if (!comm.startsWith('redis-server')) continue;
    process.kill(pid, 'SIGTERM');
    for (let i = 0; i < 100 && isAlive(pid); i += 1) await sleep(100);
    if (!(await isListening(6379))) return;
  }
  const cli = await which('redis-cli');
  if (cli) await run(cli, ['-h', '127.0.0.1', '-p', '6379', 'shutdown', 'nosave']);
  for (let i = 0; i < 50 && (await isListening(6379)); i += 1) await sleep(100);
  if (await isListening(6379)) {
    throw new Error(
      'installing redis-server started a system service on 127.0.0.1:6379 that could not be ' +
        'stopped; stop it by hand (e.g. `service redis-server stop`)',
    );
  }
}

function isListening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => {
      socket.destroy();
      resolve(false);
    });
  });
}

/** True when a process with this PID exists (EPERM still means it exists). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Runs a command without a shell; resolves with its exit code and interleaved stdout+stderr. */
function run(command: string, args: readonly string[]): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.on('error', (error) => resolve({ code: -1, stdout: `${stdout}\n${error.message}` }));
    child.on('close', (code, signal) => resolve({ code: code ?? (signal ? 128 : -1), stdout }));
  });
}

function tail(text: string, lines = 30): string {
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}
