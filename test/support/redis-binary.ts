/**
 * Finds (and, as root, installs) the `redis-server` and `redis-cli` binaries that the
 * `*.redis.test.ts` and `*.cluster.test.ts` suites run against. Those suites must fail loudly
 * when Redis is missing (STYLE.md §5), so nothing here skips.
 */
import fs from 'node:fs/promises';
import net from 'node:net';
import { installDebianPackages, isAlive, run, which, withInstallLock } from './debian-package.js';
import { sleep } from './wait.js';

export { isAlive };

/** Absolute paths of the Redis binaries and the server's version (e.g. `7.0.15`). */
export interface RedisBinaries {
  /** Absolute path of `redis-server`. */
  server: string;
  /** Absolute path of `redis-cli`. */
  cli: string;
  /** `redis-server --version`'s `v=` field, e.g. `7.0.15`. */
  version: string;
}

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

async function installDebianPackage(): Promise<void> {
  const portWasBusy = await isListening(6379);
  await installDebianPackages(['redis-server'], INSTALL_HINT);
  if (!portWasBusy && (await isListening(6379))) await stopSystemRedis();
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
