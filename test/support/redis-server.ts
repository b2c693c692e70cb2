/**
 * Real `redis-server` processes for `*.redis.test.ts` and `*.cluster.test.ts` suites.
 *
 * Every server listens on 127.0.0.1 only, on a free port, with persistence off and a fresh
 * directory under `os.tmpdir()/sluice-redis/`. Servers are tracked in a per-process registry;
 * on process exit (and on SIGINT/SIGTERM/SIGHUP) any still running is SIGKILLed by PID, and the
 * next process to start a server sweeps servers orphaned by a test process that was itself
 * SIGKILLed. Only processes this harness spawned are ever signalled.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis, type RedisOptions } from 'ioredis';
import { freePort } from './free-port.js';
import { ensureRedisBinaries, isAlive, type RedisBinaries } from './redis-binary.js';
import { parseInfo, respCommand, respString } from './resp.js';
import { waitFor } from './wait.js';

/** Options for {@link RedisServer.start}. */
export interface RedisServerOptions {
  /** Start as a replica of this server (`--replicaof`) and wait for `master_link_status:up`. */
  replicaOf?: RedisServer;
  /** Appended after the harness's own arguments, e.g. `['--maxmemory', '10mb']`. */
  extraArgs?: readonly string[];
  /** Start with cluster mode enabled (`nodes.conf` in the server's directory). @default false */
  cluster?: boolean;
  /** `cluster-node-timeout` in milliseconds; only used with `cluster`. @default 1000 */
  clusterNodeTimeoutMs?: number;
  /** Deadline for the server to answer PING (and, for a replica, to link up). @default 20000 */
  startTimeoutMs?: number;
  /**
   * More environment for the server process, e.g. `LD_PRELOAD` of libfaketime with
   * `FAKETIME` (see faketime.ts): the PID stays redis-server's own.
   */
  env?: Readonly<Record<string, string>>;
  /**
   * Start as a Sentinel (`redis-server sentinel.conf --sentinel`) monitoring `primary` as
   * `name`; the config file is written in the server's directory (Sentinel rewrites it).
   */
  sentinel?: SentinelOptions;
}

/** What a Sentinel started by {@link RedisServer.start} monitors, and how fast it acts. */
export interface SentinelOptions {
  /** The master name (`sentinel monitor <name> …`). */
  readonly name: string;
  readonly primary: RedisServer;
  /** Sentinels that must agree the primary is down. */
  readonly quorum: number;
  /** `down-after-milliseconds`. */
  readonly downAfterMs: number;
  /** `failover-timeout`, in ms. @default 3000 */
  readonly failoverTimeoutMs?: number;
  /** The Sentinel's own password (its `default` user's, set once it answers PING). */
  readonly password?: string;
}

/** Options for {@link RedisServer.stop}. */
export interface RedisStopOptions {
  /** Wait this long after SIGTERM before sending SIGKILL. @default 5000 */
  timeoutMs?: number;
  /**
   * Keep the clients made by {@link RedisServer.client} open, e.g. to test that they survive a
   * graceful restart. By default `stop()` disconnects them. @default false
   */
  keepClients?: boolean;
}

const HOST = '127.0.0.1';
const BASE_DIR = path.join(os.tmpdir(), 'sluice-redis');
const OWNER_FILE = 'owner.json';
const LOG_FILE = 'redis.log';
const BIND_ATTEMPTS = 5;

const registry = new Set<RedisServer>();
let hooksInstalled = false;
let swept = false;

/** Why a launch failed; `portTaken` means "try again on another port". */
class LaunchError extends Error {
  constructor(
    message: string,
    readonly portTaken: boolean,
  ) {
    super(message);
    this.name = 'LaunchError';
  }
}

/**
 * One `redis-server` child process, standalone, replica or cluster node.
 *
 * Lifecycle: {@link RedisServer.start} → any of {@link RedisServer.stop} /
 * {@link RedisServer.kill} → optionally {@link RedisServer.restart} (same port and directory,
 * so cluster nodes keep their `nodes.conf` identity; data does not survive, as persistence is
 * off). Methods are not meant to be called concurrently on one instance.
 *
 * @example
 * const server = await RedisServer.start();
 * const redis = server.client();
 * await redis.set('k', 'v');
 * await server.stop(); // also disconnects `redis`
 */
export class RedisServer {
  /** Always `127.0.0.1`: the harness never listens beyond loopback. */
  readonly host: string = HOST;
  /** The client port; stable across {@link RedisServer.restart}. */
  readonly port: number;
  /** The cluster bus port (`--cluster-port`), or `undefined` for a non-cluster server. */
  readonly busPort: number | undefined;
  /** `redis://127.0.0.1:<port>`. */
  readonly url: string;
  /** The server's working directory (nodes.conf, redis.log). */
  readonly dir: string;
  /** Log file (server stdout and stderr, appended across restarts). */
  readonly logFile: string;
  /** Whether this is a cluster-mode node. */
  readonly cluster: boolean;

  private readonly args: readonly string[];
  private readonly env: Readonly<Record<string, string>>;
  private readonly binaries: RedisBinaries;
  private readonly clients = new Set<Redis>();
  private child: ChildProcess | undefined;
  private exitPromise: Promise<void> = Promise.resolve();
  private exited = true;
  private currentPid = 0;

  private constructor(init: {
    port: number;
    busPort: number | undefined;
    dir: string;
    args: readonly string[];
    binaries: RedisBinaries;
    cluster: boolean;
    env: Readonly<Record<string, string>>;
  }) {
    this.env = init.env;
    this.port = init.port;
    this.busPort = init.busPort;
    this.url = `redis://${HOST}:${init.port}`;
    this.dir = init.dir;
    this.logFile = path.join(init.dir, LOG_FILE);
    this.args = init.args;
    this.binaries = init.binaries;
    this.cluster = init.cluster;
  }

  /**
   * PID of the most recently started process. After {@link RedisServer.stop} or
   * {@link RedisServer.kill} it still names the (now gone) process, so tests can assert that it
   * no longer exists.
   */
  get pid(): number {
    return this.currentPid;
  }

  /** True while the most recently started process has not exited. */
  get running(): boolean {
    return !this.exited;
  }

  /**
   * Starts a server on a free loopback port and resolves once it answers PING (and, for a
   * replica, once `master_link_status:up`).
   *
   * Runs `redis-server --port N --bind 127.0.0.1 --save "" --appendonly no --dir <fresh dir>
   * --daemonize no --protected-mode yes --repl-diskless-sync-delay 0`, plus cluster flags
   * (`--cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout T
   * --cluster-port B`) and then `extraArgs`, which may override any of them. If the port was
   * taken between choosing and binding, retries on another port (up to 5 times).
   *
   * @throws Error when Redis is not installed and cannot be installed, or the server does not
   *   come up in time; the message includes the tail of the server's log.
   */
  static async start(options: RedisServerOptions = {}): Promise<RedisServer> {
    const binaries = await ensureRedisBinaries();
    installExitHooks();
    sweepOrphans();
    const cluster = options.cluster ?? false;
    if (cluster && options.replicaOf) {
      throw new Error('cluster nodes get replicas through CLUSTER REPLICATE, not replicaOf');
    }
    if (options.replicaOf && !options.replicaOf.running) {
      throw new Error(`replicaOf server ${options.replicaOf.url} is not running`);
    }
    fs.mkdirSync(BASE_DIR, { recursive: true });
    const timeoutMs = options.startTimeoutMs ?? 20_000;
    let lastError: LaunchError | undefined;
    for (let attempt = 1; attempt <= BIND_ATTEMPTS; attempt += 1) {
      const port = await freePort();
      const busPort = cluster ? await freeBusPort(port, binaries.version) : undefined;
      const dir = fs.mkdtempSync(path.join(BASE_DIR, `${port}-`));
      const sentinel = options.sentinel;
      const args: string[] =
        sentinel === undefined ? [] : [sentinelConfig(dir, sentinel), '--sentinel'];
      args.push(
        '--port',
        String(port),
        '--bind',
        HOST,
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        dir,
        '--daemonize',
        'no',
        '--protected-mode',
        'yes',
        // A primary otherwise waits 5 s for more replicas before a diskless full sync, which
        // would dominate replica and cluster start-up. `extraArgs` can set it back.
        '--repl-diskless-sync-delay',
        '0',
      );
      if (cluster) {
        args.push(
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          'nodes.conf',
          '--cluster-node-timeout',
          String(options.clusterNodeTimeoutMs ?? 1000),
        );
        if (busPort !== undefined && busPort !== port + 10_000) {
          args.push('--cluster-port', String(busPort));
        }
      }
      if (options.replicaOf) args.push('--replicaof', HOST, String(options.replicaOf.port));
      args.push(...(options.extraArgs ?? []));
      const server = new RedisServer({
        port,
        busPort,
        dir,
        args,
        binaries,
        cluster,
        env: options.env ?? {},
      });
      registry.add(server);
      try {
        await server.launch(timeoutMs);
        if (sentinel?.password !== undefined) {
          // Set after the PING check, which sends no password.
          await respCommand(HOST, port, [
            'ACL',
            'SETUSER',
            'default',
            'resetpass',
            `>${sentinel.password}`,
          ]);
        }
        if (options.replicaOf) {
          await server.waitForReplicaLink(timeoutMs);
          await waitForStreaming(options.replicaOf, timeoutMs);
        }
        return server;
      } catch (error) {
        await server.kill().catch(() => undefined);
        registry.delete(server);
        // The log tail is in the error message; keep the directory only when asked to.
        if (process.env['SLUICE_KEEP_REDIS_DIRS'] !== '1') {
          fs.rmSync(dir, { recursive: true, force: true });
        }
        if (!(error instanceof LaunchError) || !error.portTaken) throw error;
        lastError = error;
      }
    }
    throw new Error(`could not bind a free port after ${BIND_ATTEMPTS} attempts`, {
      cause: lastError,
    });
  }

  /**
   * Returns an ioredis client for this server (`lazyConnect: false`, so it connects at once),
   * merged with `options`. The harness disconnects it in {@link RedisServer.stop} (unless
   * `keepClients`) and in {@link stopAllRedisServers}; {@link RedisServer.kill} leaves it
   * connected so it can reconnect after {@link RedisServer.restart}.
   */
  client(options: RedisOptions & { replyMapping?: 'legacy' } = {}): Redis {
    const client = new Redis({ host: HOST, port: this.port, lazyConnect: false, ...options });
    // Without a listener ioredis prints every reconnect failure after a kill(); commands still
    // reject with the error, which is what tests assert on.
    client.on('error', () => undefined);
    this.clients.add(client);
    return client;
  }

  /**
   * Graceful stop: SIGTERM to this server's PID, wait for it to exit, SIGKILL after
   * `timeoutMs`. Resolves when the process has exited and been reaped. Idempotent; a no-op on
   * the process when it has already exited. Disconnects this server's clients unless
   * `keepClients`.
   */
  async stop(options: RedisStopOptions = {}): Promise<void> {
    if (!options.keepClients) this.disconnectClients();
    if (this.exited) return;
    this.signal('SIGTERM');
    const timeoutMs = options.timeoutMs ?? 5000;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      this.exitPromise.then(() => false),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), timeoutMs);
      }),
    ]);
    clearTimeout(timer);
    if (timedOut) await this.kill();
  }

  /**
   * Crash: SIGKILL to this server's PID; resolves when the process has exited and been reaped.
   * Clients stay open (they reconnect after {@link RedisServer.restart}).
   */
  async kill(): Promise<void> {
    if (this.exited) return;
    this.signal('SIGKILL');
    await this.exitPromise;
  }

  /**
   * Starts the server again on the same port, directory and arguments after a stop or kill
   * (stopping it first if still running), and resolves once it answers PING. A replica waits
   * for its link again; a cluster node rejoins with its `nodes.conf` identity, so follow with
   * `RedisCluster.waitForHealthy()`. If the port is briefly taken by someone else, keeps trying
   * until `timeoutMs` (@default 20000).
   */
  async restart(options: { timeoutMs?: number } = {}): Promise<void> {
    if (!this.exited) await this.stop({ keepClients: true });
    const timeoutMs = options.timeoutMs ?? 20_000;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        await this.launch(Math.max(1000, deadline - Date.now()));
        break;
      } catch (error) {
        await this.kill().catch(() => undefined);
        if (!(error instanceof LaunchError) || !error.portTaken || Date.now() > deadline)
          throw error;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
    if (this.args.includes('--replicaof')) {
      await this.waitForReplicaLink(Math.max(1000, deadline - Date.now()));
    }
  }

  /** `INFO [section]` parsed into `field → value` (e.g. `role`, `master_link_status`). */
  async info(section?: string): Promise<Map<string, string>> {
    const args = section === undefined ? ['INFO'] : ['INFO', section];
    return parseInfo(await respString(HOST, this.port, args));
  }

  /** Last `lines` lines of the server's log, for error messages. */
  logTail(lines = 40): string {
    try {
      return fs.readFileSync(this.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
    } catch {
      return '(no log)';
    }
  }

  /** @internal SIGKILL synchronously; used by the exit hook. */
  killSync(): void {
    if (!this.exited) this.signal('SIGKILL');
  }

  /** @internal Disconnects every client made by {@link RedisServer.client}. */
  disconnectClients(): void {
    for (const client of this.clients) client.disconnect();
    this.clients.clear();
  }

  private signal(signal: NodeJS.Signals): void {
    // Only ever our own child, and only while it has not been reaped (after that the PID may
    // belong to an unrelated process).
    if (this.exited || this.currentPid <= 0) return;
    try {
      process.kill(this.currentPid, signal);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
    }
  }

  private async launch(timeoutMs: number): Promise<void> {
    fs.appendFileSync(
      this.logFile,
      `\n=== sluice harness: ${new Date().toISOString()} ${this.binaries.server} ${this.args.map((arg) => (arg === '' ? '""' : arg)).join(' ')}\n`,
    );
    const logFd = fs.openSync(this.logFile, 'a');
    let child: ChildProcess;
    try {
      child = spawn(this.binaries.server, this.args, {
        cwd: this.dir,
        stdio: ['ignore', logFd, logFd],
        env: { ...process.env, ...this.env },
      });
    } finally {
      fs.closeSync(logFd);
    }
    let spawnError: Error | undefined;
    child.once('error', (error) => {
      spawnError = error;
    });
    this.child = child;
    this.exited = false;
    let exitInfo = '';
    this.exitPromise = new Promise<void>((resolve) => {
      child.once('exit', (code, signal) => {
        this.exited = true;
        exitInfo = signal ? `signal ${signal}` : `code ${String(code)}`;
        resolve();
      });
      child.once('error', () => {
        // spawn failed: there will be no 'exit'.
        if (child.pid === undefined) {
          this.exited = true;
          resolve();
        }
      });
    });
    if (child.pid === undefined) {
      await this.exitPromise;
      throw new LaunchError(
        `could not spawn ${this.binaries.server}: ${spawnError?.message ?? 'unknown error'}`,
        false,
      );
    }
    this.currentPid = child.pid;
    fs.writeFileSync(
      path.join(this.dir, OWNER_FILE),
      JSON.stringify({ ownerPid: process.pid, pid: child.pid }),
    );

    const pid = child.pid;
    try {
      await waitFor(
        async (report) => {
          if (this.exited) {
            const log = this.logTail();
            throw new LaunchError(
              `redis-server (PID ${pid}, port ${this.port}) exited with ${exitInfo} before ` +
                `answering PING. Log ${this.logFile}:\n${log}`,
              /Address already in use|Could not create server TCP listening socket/i.test(log),
            );
          }
          const pong = await respCommand(HOST, this.port, ['PING'], { timeoutMs: 1000 });
          if (pong !== 'PONG') {
            report(`PING → ${JSON.stringify(pong)}`);
            return undefined;
          }
          // Something else may own the port (we lost the race and are about to exit): make
          // sure the PONG came from our process.
          const server = parseInfo(await respString(HOST, this.port, ['INFO', 'server']));
          if (server.get('process_id') !== String(pid)) {
            report(`port ${this.port} answered from PID ${server.get('process_id') ?? '?'}`);
            return undefined;
          }
          return true;
        },
        {
          what: `redis-server PID ${pid} to answer PING on ${HOST}:${this.port}`,
          timeoutMs,
          fatal: (error) => error instanceof LaunchError,
        },
      );
    } catch (error) {
      if (error instanceof LaunchError) throw error;
      const portTaken = /answered from PID/.test((error as Error).message);
      throw new LaunchError(
        `${(error as Error).message}\nLog ${this.logFile}:\n${this.logTail()}`,
        portTaken,
      );
    }
  }

  private async waitForReplicaLink(timeoutMs: number): Promise<void> {
    try {
      await waitFor(
        async (report) => {
          const replication = await this.info('replication');
          const link = replication.get('master_link_status');
          report(`role=${replication.get('role') ?? '?'} master_link_status=${link ?? '?'}`);
          return link === 'up' ? true : undefined;
        },
        { what: `replica ${this.url} to reach master_link_status:up`, timeoutMs },
      );
    } catch (error) {
      throw new Error(`${(error as Error).message}\nLog ${this.logFile}:\n${this.logTail()}`, {
        cause: error,
      });
    }
  }
}

/** Writes a Sentinel's config file in `dir`; returns its path. */
function sentinelConfig(dir: string, o: SentinelOptions): string {
  const file = path.join(dir, 'sentinel.conf');
  const lines = [
    `sentinel monitor ${o.name} ${HOST} ${o.primary.port} ${o.quorum}`,
    `sentinel down-after-milliseconds ${o.name} ${o.downAfterMs}`,
    `sentinel failover-timeout ${o.name} ${o.failoverTimeoutMs ?? 3000}`,
    // Sentinels authenticate to each other with it once it is set (see start()).
    ...(o.password === undefined ? [] : [`sentinel sentinel-pass ${o.password}`]),
  ];
  fs.writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

/**
 * Stops every server this process started (SIGTERM, then SIGKILL after `timeoutMs`) and
 * disconnects their clients. Convenient in a suite's `afterAll`.
 */
export async function stopAllRedisServers(options: { timeoutMs?: number } = {}): Promise<void> {
  const stopOptions: RedisStopOptions =
    options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs };
  await Promise.all([...registry].map((server) => server.stop(stopOptions)));
}

/** Every server started by this process and not yet abandoned, in start order. */
export function startedRedisServers(): readonly RedisServer[] {
  return [...registry];
}

/**
 * Picks the cluster bus port. Redis ≥ 7 takes any port through `--cluster-port`; older
 * versions always use `port + 10000`, which must then be free and ≤ 65535.
 */
async function freeBusPort(port: number, version: string): Promise<number> {
  const major = Number(version.split('.')[0]);
  if (major >= 7) {
    for (;;) {
      const bus = await freePort();
      if (bus !== port) return bus;
    }
  }
  throw new Error(
    `redis-server ${version} has no --cluster-port; the harness needs Redis 7 or newer for ` +
      `clusters (ephemeral ports + 10000 may exceed 65535)`,
  );
}

function installExitHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.on('exit', killAllSync);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      killAllSync();
      // Keep the default behaviour (terminate) when nobody else handles the signal.
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    });
  }
}

function killAllSync(): void {
  for (const server of registry) {
    try {
      server.killSync();
    } catch {
      // best effort on the way out
    }
    if (process.env['SLUICE_KEEP_REDIS_DIRS'] !== '1') {
      fs.rmSync(server.dir, { recursive: true, force: true });
    }
  }
}

/**
 * Removes servers left behind by an earlier test process that died without running its exit
 * hook (e.g. SIGKILL): a directory whose owner process is gone has its redis-server SIGKILLed
 * (only if `/proc/<pid>/cwd` is still that directory, so a reused PID is never hit) and is
 * deleted.
 */
function sweepOrphans(): void {
  if (swept) return;
  swept = true;
  let entries: string[];
  try {
    entries = fs.readdirSync(BASE_DIR);
  } catch {
    return;
  }
  for (const entry of entries) {
    const dir = path.join(BASE_DIR, entry);
    let owner: { ownerPid?: unknown; pid?: unknown };
    try {
      owner = JSON.parse(fs.readFileSync(path.join(dir, OWNER_FILE), 'utf8')) as typeof owner;
    } catch {
      continue; // being created right now by another process, or not ours
    }
    if (typeof owner.ownerPid !== 'number' || isAlive(owner.ownerPid)) continue;
    if (typeof owner.pid === 'number' && isAlive(owner.pid)) {
      // redis-server rewrites its argv (process title), so identify it by its working
      // directory, which the harness sets to the server's own directory.
      let cwd = '';
      try {
        cwd = fs.readlinkSync(`/proc/${owner.pid}/cwd`);
      } catch {
        // gone meanwhile, or not ours to inspect
      }
      if (cwd !== '' && (cwd === dir || cwd === safeRealpath(dir))) {
        try {
          process.kill(owner.pid, 'SIGKILL');
        } catch {
          // gone meanwhile
        }
      }
    }
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function safeRealpath(file: string): string | undefined {
  try {
    return fs.realpathSync(file);
  } catch {
    return undefined;
  }
}

/**
 * Adds (or resets) an ACL user `name`, any password, with every permission but the
 * FUNCTION command: a RedisStore connected as it cannot load its function library, so it
 * calls its script by EVALSHA.
 */
export async function addUserWithoutFunctions(admin: Redis, name: string): Promise<void> {
  await admin.call(
    'ACL',
    'SETUSER',
    name,
    'reset',
    'on',
    'nopass',
    '~*',
    '&*',
    '+@all',
    '-function',
  );
}

/**
 * Waits until `primary` streams writes to a replica. `master_link_status:up` comes first:
 * after a diskless sync the primary holds its stream until the replica's first ACK (sent
 * once a second), so a WAIT or a failover inside that window sees nothing replicated. A
 * marker is written and deleted until a WAIT for one replica answers 1 (the key is gone
 * on both sides afterwards).
 */
async function waitForStreaming(primary: RedisServer, timeoutMs: number): Promise<void> {
  const client = new Redis({ host: HOST, port: primary.port, lazyConnect: false });
  client.on('error', () => undefined);
  try {
    await waitFor(
      async (report) => {
        await client.set('sluice-test:replication-marker', '1');
        await client.del('sluice-test:replication-marker');
        const acked = Number(await client.call('WAIT', '1', '200'));
        report(`WAIT 1 answered ${acked}`);
        return acked >= 1 ? true : undefined;
      },
      { what: `primary ${primary.url} to stream writes to its replica`, timeoutMs },
    );
  } finally {
    client.disconnect();
  }
}
