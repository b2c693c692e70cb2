/**
 * Finds the commands a test needs and, as root, installs the Debian packages that
 * provide them (the way the Redis suites get redis-server): `promtool` from `prometheus`,
 * `chromium`, `faketime`, `openssl`. Tests never skip for a missing command: when it
 * cannot be installed they fail with a message saying how to install it.
 */
import { spawn } from 'node:child_process';
import { constants as fsConstants } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sleep } from './wait.js';

/** Directories searched after `PATH`, in order. */
const EXTRA_DIRS = ['/usr/bin', '/usr/local/bin', '/usr/sbin'];
const POLICY_RC_D = '/usr/sbin/policy-rc.d';
// One lock for every package: dpkg itself allows one install at a time.
const INSTALL_LOCK = path.join(os.tmpdir(), 'sluice-redis-install.lock');
const LOCK_WAIT_MS = 10 * 60_000;

const found = new Map<string, Promise<string>>();

/**
 * The absolute path of `command`, installing Debian's `pkg` first when the command is
 * missing and this process is root. Callers in one process share one attempt; forks
 * serialise installs through a lock file. Rejects, saying how to install, otherwise.
 */
export function ensureDebianCommand(command: string, pkg: string): Promise<string> {
  let pending = found.get(command);
  if (pending === undefined) {
    pending = resolveCommand(command, pkg).catch((error: unknown) => {
      found.delete(command);
      throw error;
    });
    found.set(command, pending);
  }
  return pending;
}

async function resolveCommand(command: string, pkg: string): Promise<string> {
  const hint = `Install it with \`sudo apt-get install ${pkg}\` (Debian/Ubuntu), or put ${command} on PATH.`;
  const existing = await which(command);
  if (existing) return existing;
  if (process.getuid?.() !== 0) {
    throw new Error(
      `${command} was not found on PATH or ${EXTRA_DIRS.join(', ')}, and this process is not ` +
        `root, so the test harness will not install it. ${hint}`,
    );
  }
  return withInstallLock(async () => {
    const again = await which(command);
    if (again) return again;
    await installDebianPackages([pkg], hint);
    const installed = await which(command);
    if (!installed) {
      throw new Error(`apt-get installed ${pkg} but ${command} is still not on PATH. ${hint}`);
    }
    return installed;
  });
}

/** The absolute path of an executable `name` on PATH or the usual system directories. */
export async function which(name: string): Promise<string | undefined> {
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

/**
 * As root: `apt-get install -y --no-install-recommends` the packages with
 * `DEBIAN_FRONTEND=noninteractive`, running `apt-get update` only when the first attempt
 * fails for lack of package lists. A `policy-rc.d` that exits 101 is in place meanwhile
 * so no package starts a system service; what was there before is put back. Call it
 * inside {@link withInstallLock}.
 */
export async function installDebianPackages(pkgs: readonly string[], hint: string): Promise<void> {
  const restorePolicy = await blockServiceStarts();
  try {
    const args = [
      '-o',
      'DPkg::Lock::Timeout=300',
      'install',
      '-y',
      '--no-install-recommends',
      ...pkgs,
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
        `apt-get install ${pkgs.join(' ')} exited ${result.code}:\n${tail(result.stdout)}\n${hint}`,
      );
    }
  } finally {
    await restorePolicy();
  }
}

/** Holds a cross-process lock (an exclusive-create file holding our PID) while `body` runs. */
export async function withInstallLock<T>(body: () => Promise<T>): Promise<T> {
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
        `waited ${LOCK_WAIT_MS} ms for the package install lock ${INSTALL_LOCK} held by PID ${holder}`,
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
export function run(
  command: string,
  args: readonly string[],
): Promise<{ code: number; stdout: string }> {
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
