/**
 * A real Redis Cluster on loopback for `*.cluster.test.ts` suites: N primaries with M replicas
 * each, created with `redis-cli --cluster create`, and helpers that read the live topology
 * (roles change after a failover).
 */
import { spawn } from 'node:child_process';
import { Cluster, type ClusterOptions } from 'ioredis';
import { ensureRedisBinaries } from './redis-binary.js';
import { RedisServer } from './redis-server.js';
import { parseInfo, respCommand, RespError, respString, type RespReply } from './resp.js';
import { sleep, waitFor } from './wait.js';

/** Number of hash slots in Redis Cluster. */
export const CLUSTER_SLOTS = 16384;

/** Options for {@link RedisCluster.start}. */
export interface RedisClusterOptions {
  /** Primaries (slot owners); `redis-cli --cluster create` needs at least 3. @default 3 */
  primaries?: number;
  /** Replicas per primary. @default 1 */
  replicasPerPrimary?: number;
  /**
   * `cluster-node-timeout` in milliseconds: a primary unreachable for this long is marked
   * failed and its replica promoted (failover takes roughly 2–3× this). @default 1000
   */
  nodeTimeoutMs?: number;
  /** Deadline for the whole start (nodes, create, convergence). @default 60000 */
  startTimeoutMs?: number;
}

/** One line of `CLUSTER NODES`, as seen by one node. */
export interface ClusterNodeView {
  /** 40-hex node ID (stable across restarts: it lives in the node's nodes.conf). */
  id: string;
  host: string;
  port: number;
  /** Raw flags, e.g. `['myself', 'master']`, `['slave']`, `['master', 'fail']`. */
  flags: readonly string[];
  role: 'primary' | 'replica';
  /** For a replica, its primary's node ID. */
  primaryId: string | undefined;
  /** True when flagged `fail` or `fail?` (PFAIL). */
  failing: boolean;
  /** Owned slot ranges, inclusive `[first, last]`; empty for replicas. */
  slots: readonly (readonly [number, number])[];
}

/**
 * ioredis `ClusterOptions` for {@link RedisCluster.client}. The harness's clients use the
 * default (`legacy`) reply mapping, so the typed result is a plain `Cluster`.
 */
export type HarnessClusterOptions = ClusterOptions & {
  redisOptions?: ClusterOptions['redisOptions'] & { replyMapping?: 'legacy' };
};

/** A `{ host, port }` pair as ioredis's `Cluster` takes for its startup nodes. */
export interface StartupNode {
  host: string;
  port: number;
}

/**
 * A Redis Cluster of {@link RedisServer} nodes.
 *
 * @example
 * const cluster = await RedisCluster.start(); // 3 primaries + 3 replicas
 * const redis = cluster.client();
 * await redis.set('user:1', 'x');
 * const owner = await cluster.nodeForSlot(await cluster.slotOfKey('user:1'));
 * await owner.kill();
 * const promoted = await cluster.waitForFailover(owner);
 * await cluster.stop();
 */
export class RedisCluster {
  /** Every node, in the order passed to `redis-cli --cluster create` (primaries first). */
  readonly nodes: readonly RedisServer[];
  /** `{ host, port }` of every node, for ioredis `Cluster` or another client. */
  readonly startupNodes: readonly StartupNode[];
  /** Milliseconds {@link RedisCluster.start} took, from first node spawn to converged. */
  get startupMs(): number {
    return this.startupMsValue;
  }

  private startupMsValue = 0;

  private readonly ids = new Map<RedisServer, string>();
  private readonly clients = new Set<Cluster>();
  /** Last agreed slot ownership (node ID per range), used to find a failed primary's slots. */
  private ownership: readonly ClusterNodeView[] = [];

  private constructor(nodes: readonly RedisServer[]) {
    this.nodes = nodes;
    this.startupNodes = nodes.map((node) => ({ host: node.host, port: node.port }));
  }

  /**
   * Starts `primaries × (1 + replicasPerPrimary)` cluster-mode servers, creates the cluster
   * with `redis-cli --cluster create … --cluster-replicas R --cluster-yes`, and resolves once
   * every node reports `cluster_state:ok`, knows every other node, agrees on the owner of all
   * 16384 slots, and every replica's link to its primary is up.
   *
   * On any failure, every node already started is stopped before the error propagates.
   */
  static async start(options: RedisClusterOptions = {}): Promise<RedisCluster> {
    const primaries = options.primaries ?? 3;
    const replicasPerPrimary = options.replicasPerPrimary ?? 1;
    const nodeTimeoutMs = options.nodeTimeoutMs ?? 1000;
    const timeoutMs = options.startTimeoutMs ?? 60_000;
    if (!Number.isInteger(primaries) || primaries < 3) {
      throw new Error(`redis-cli --cluster create needs at least 3 primaries, got ${primaries}`);
    }
    if (!Number.isInteger(replicasPerPrimary) || replicasPerPrimary < 0) {
      throw new Error(
        `replicasPerPrimary must be a non-negative integer, got ${replicasPerPrimary}`,
      );
    }
    const binaries = await ensureRedisBinaries();
    const began = Date.now();
    const total = primaries * (1 + replicasPerPrimary);
    const settled = await Promise.allSettled(
      Array.from({ length: total }, () =>
        RedisServer.start({
          cluster: true,
          clusterNodeTimeoutMs: nodeTimeoutMs,
          startTimeoutMs: timeoutMs,
        }),
      ),
    );
    const nodes = settled.flatMap((result) =>
      result.status === 'fulfilled' ? [result.value] : [],
    );
    const failed = settled.find((result) => result.status === 'rejected');
    if (failed) {
      await Promise.all(nodes.map((node) => node.stop()));
      throw failed.reason;
    }
    try {
      const create = await runCli(
        binaries.cli,
        [
          '--cluster',
          'create',
          ...nodes.map((node) => `${node.host}:${node.port}`),
          '--cluster-replicas',
          String(replicasPerPrimary),
          '--cluster-yes',
        ],
        timeoutMs,
      );
      if (create.code !== 0 || !create.output.includes('All 16384 slots covered')) {
        throw new Error(
          `redis-cli --cluster create exited ${create.code}:\n${create.output.trimEnd()}`,
        );
      }
      const cluster = new RedisCluster(nodes);
      for (const node of nodes) {
        cluster.ids.set(node, await respString(node.host, node.port, ['CLUSTER', 'MYID']));
      }
      await cluster.waitForHealthy({
        timeoutMs: Math.max(5000, timeoutMs - (Date.now() - began)),
        expectNodes: total,
      });
      cluster.startupMsValue = Date.now() - began;
      return cluster;
    } catch (error) {
      await Promise.all(nodes.map((node) => node.stop()));
      const tails = nodes.map((node) => `--- ${node.url} (${node.logFile})\n${node.logTail(10)}`);
      throw new Error(`${(error as Error).message}\n${tails.join('\n')}`, { cause: error });
    }
  }

  /** The node ID of `node` (`CLUSTER MYID`, read once at start). */
  nodeId(node: RedisServer): string {
    const id = this.ids.get(node);
    if (id === undefined) throw new Error(`${node.url} is not a node of this cluster`);
    return id;
  }

  /** The server with this node ID. */
  nodeById(id: string): RedisServer {
    for (const [node, nodeId] of this.ids) if (nodeId === id) return node;
    throw new Error(`no node of this cluster has ID ${id}`);
  }

  /**
   * `CLUSTER NODES` as seen by the first running node that answers (in {@link nodes} order).
   * Views may briefly disagree during a failover; {@link waitForHealthy} waits for agreement.
   */
  async topology(): Promise<ClusterNodeView[]> {
    const errors: string[] = [];
    for (const node of this.nodes) {
      if (!node.running) continue;
      try {
        return parseClusterNodes(
          await respString(node.host, node.port, ['CLUSTER', 'NODES'], { timeoutMs: 1000 }),
        );
      } catch (error) {
        errors.push(`${node.url}: ${(error as Error).message}`);
      }
    }
    throw new Error(
      `no cluster node answered CLUSTER NODES (${errors.join('; ') || 'none running'})`,
    );
  }

  /** Current slot-owning primaries that are not flagged failing, per {@link topology}. */
  async primaries(): Promise<RedisServer[]> {
    const view = await this.topology();
    return view
      .filter((line) => line.role === 'primary' && !line.failing && line.slots.length > 0)
      .map((line) => this.nodeById(line.id));
  }

  /** Current replicas that are not flagged failing, per {@link topology}. */
  async replicas(): Promise<RedisServer[]> {
    const view = await this.topology();
    return view
      .filter((line) => line.role === 'replica' && !line.failing)
      .map((line) => this.nodeById(line.id));
  }

  /** The primary that currently owns `slot` (0–16383), per {@link topology}. */
  async nodeForSlot(slot: number): Promise<RedisServer> {
    if (!Number.isInteger(slot) || slot < 0 || slot >= CLUSTER_SLOTS) {
      throw new RangeError(`slot must be an integer in [0, ${CLUSTER_SLOTS - 1}], got ${slot}`);
    }
    const owner = ownerOf(await this.topology(), slot);
    if (owner === undefined) throw new Error(`no live primary owns slot ${slot}`);
    return this.nodeById(owner);
  }

  /** The hash slot of `key` as the server computes it (`CLUSTER KEYSLOT`, honours `{tags}`). */
  async slotOfKey(key: string): Promise<number> {
    for (const node of this.nodes) {
      if (!node.running) continue;
      const reply = await respCommand(node.host, node.port, ['CLUSTER', 'KEYSLOT', key]);
      if (typeof reply === 'number') return reply;
      throw new Error(`CLUSTER KEYSLOT ${key} on ${node.url} replied ${JSON.stringify(reply)}`);
    }
    throw new Error('no cluster node is running');
  }

  /**
   * Waits until the slots `oldPrimary` owned are owned by another node, and the cluster is
   * healthy again (see {@link waitForHealthy}); resolves with the node that took over. Call it
   * after `oldPrimary.kill()` (or a manual `CLUSTER FAILOVER` on its replica). With the default
   * node timeout of 1000 ms this takes a few seconds.
   *
   * `oldPrimary`'s slots are taken from the last topology the harness saw healthy (at start, or
   * in the last {@link waitForHealthy} / `waitForFailover`), so call {@link waitForHealthy}
   * after moving slots by hand.
   *
   * @param options.timeoutMs - deadline. @default 30000
   */
  async waitForFailover(
    oldPrimary: RedisServer,
    options: { timeoutMs?: number } = {},
  ): Promise<RedisServer> {
    const oldId = this.nodeId(oldPrimary);
    const firstSlot = this.ownership.find((line) => line.id === oldId)?.slots[0]?.[0];
    if (firstSlot === undefined) {
      throw new Error(`${oldPrimary.url} owned no slots in the last agreed topology`);
    }
    const timeoutMs = options.timeoutMs ?? 30_000;
    return waitFor(
      async (report) => {
        const view = await this.agreedView(report);
        if (view === undefined) return undefined;
        if (view.some((line) => line.id === oldId && line.slots.length > 0)) {
          report(`${oldPrimary.url} still owns its slots`);
          return undefined;
        }
        const owner = ownerOf(view, firstSlot);
        if (owner === undefined || owner === oldId) return undefined;
        this.ownership = view;
        return this.nodeById(owner);
      },
      { what: `failover away from ${oldPrimary.url}`, timeoutMs },
    );
  }

  /**
   * Waits until every running node reports `cluster_state:ok`; every running node's view lists
   * all running nodes, none of them flagged failing and none a primary without slots; all views
   * agree on which node owns each of the 16384 slots and on every running node's role and
   * primary; and every running replica of a running primary has `master_link_status:up`.
   *
   * Call it after restarting a killed node: a former primary comes back as an empty primary and
   * only then turns itself into a replica.
   */
  async waitForHealthy(options: { timeoutMs?: number; expectNodes?: number } = {}): Promise<void> {
    await waitFor(
      async (report) => {
        const view = await this.agreedView(report, options.expectNodes);
        if (view === undefined) return undefined;
        this.ownership = view;
        return true;
      },
      {
        what: 'cluster_state:ok and slot agreement on every node',
        timeoutMs: options.timeoutMs ?? 30_000,
      },
    );
  }

  /**
   * Moves `slot` from its current primary to `target` (another primary) the way
   * `redis-cli --cluster reshard` does, one step at a time so traffic can run across it:
   * `CLUSTER SETSLOT slot IMPORTING` on the target, `MIGRATING` on the source, then
   * `CLUSTER GETKEYSINSLOT` + `MIGRATE … KEYS` in batches of `batch` keys until the slot
   * is empty on the source, then `SETSLOT slot NODE target` on the target, the source and
   * every other primary; finally waits for {@link waitForHealthy}. `pauseMs` is slept after
   * MIGRATING and between MIGRATE batches, so clients meet the ASK / TRYAGAIN states.
   * Resolves with the number of keys moved.
   */
  async migrateSlot(
    slot: number,
    target: RedisServer,
    options: { pauseMs?: number; batch?: number } = {},
  ): Promise<number> {
    const source = await this.nodeForSlot(slot);
    if (source === target) throw new Error(`${target.url} already owns slot ${slot}`);
    const sourceId = this.nodeId(source);
    const targetId = this.nodeId(target);
    const pauseMs = options.pauseMs ?? 0;
    const run = async (
      node: RedisServer,
      args: readonly (string | number)[],
    ): Promise<RespReply> => {
      const reply = await respCommand(node.host, node.port, args.map(String));
      if (reply instanceof RespError) {
        throw new Error(`${args.join(' ')} on ${node.url}: ${reply.message}`);
      }
      return reply;
    };
    await run(target, ['CLUSTER', 'SETSLOT', slot, 'IMPORTING', sourceId]);
    await run(source, ['CLUSTER', 'SETSLOT', slot, 'MIGRATING', targetId]);
    if (pauseMs > 0) await sleep(pauseMs);
    let moved = 0;
    for (;;) {
      const keys = (await run(source, [
        'CLUSTER',
        'GETKEYSINSLOT',
        slot,
        options.batch ?? 10,
      ])) as string[];
      if (keys.length === 0) break;
      await run(source, ['MIGRATE', target.host, target.port, '', 0, 5000, 'KEYS', ...keys]);
      moved += keys.length;
      if (pauseMs > 0) await sleep(pauseMs);
    }
    await run(target, ['CLUSTER', 'SETSLOT', slot, 'NODE', targetId]);
    await run(source, ['CLUSTER', 'SETSLOT', slot, 'NODE', targetId]);
    for (const node of await this.primaries()) {
      if (node !== source && node !== target) {
        await run(node, ['CLUSTER', 'SETSLOT', slot, 'NODE', targetId]);
      }
    }
    await this.waitForHealthy();
    return moved;
  }

  /**
   * Returns an ioredis `Cluster` client over {@link startupNodes} with `scaleReads: 'master'`,
   * merged with `options`. Disconnected by {@link RedisCluster.stop}.
   */
  client(options: HarnessClusterOptions = {}): Cluster {
    const client = new Cluster(
      this.startupNodes.map((node) => ({ ...node })),
      { scaleReads: 'master', ...options },
    );
    // Node kills in failover tests make ioredis emit errors; commands still reject.
    client.on('error', () => undefined);
    this.clients.add(client);
    return client;
  }

  /** Disconnects this cluster's clients and stops every node by PID (SIGTERM, then SIGKILL). */
  async stop(): Promise<void> {
    for (const client of this.clients) client.disconnect();
    this.clients.clear();
    await Promise.all(this.nodes.map((node) => node.stop()));
  }

  /**
   * One probe of cluster health. Returns the agreed view when healthy, otherwise undefined
   * after reporting why.
   */
  private async agreedView(
    report: (detail: string) => void,
    expectNodes?: number,
  ): Promise<ClusterNodeView[] | undefined> {
    const running = this.nodes.filter((node) => node.running);
    const runningPorts = new Set(running.map((node) => node.port));
    let agreed: ClusterNodeView[] | undefined;
    let agreedSignature: string | undefined;
    for (const node of running) {
      const info = parseInfo(await respString(node.host, node.port, ['CLUSTER', 'INFO']));
      if (info.get('cluster_state') !== 'ok') {
        report(`${node.url} cluster_state:${info.get('cluster_state') ?? '?'}`);
        return undefined;
      }
      if (expectNodes !== undefined && info.get('cluster_known_nodes') !== String(expectNodes)) {
        report(
          `${node.url} knows ${info.get('cluster_known_nodes') ?? '?'} of ${expectNodes} nodes`,
        );
        return undefined;
      }
      const view = parseClusterNodes(await respString(node.host, node.port, ['CLUSTER', 'NODES']));
      const seen = new Set(view.map((line) => line.port));
      const missing = [...runningPorts].filter((port) => !seen.has(port));
      if (missing.length > 0) {
        report(`${node.url} does not list ${missing.join(', ')}`);
        return undefined;
      }
      const unsettled = view.find(
        (line) =>
          runningPorts.has(line.port) &&
          (line.failing || (line.role === 'primary' && line.slots.length === 0)),
      );
      if (unsettled) {
        // A running node flagged failing, or a primary without slots (a restarted former
        // primary before it turns itself into a replica of the node that took its slots).
        report(
          `${node.url} sees ${unsettled.host}:${unsettled.port} as ${unsettled.flags.join(',')}`,
        );
        return undefined;
      }
      const slots = slotSignature(view);
      if (slots === undefined) {
        report(`${node.url} does not see all ${CLUSTER_SLOTS} slots owned by live primaries`);
        return undefined;
      }
      const roles = view
        .filter((line) => runningPorts.has(line.port))
        .map((line) => `${line.id}:${line.role}:${line.primaryId ?? '-'}`)
        .sort()
        .join(',');
      const signature = `${slots}|${roles}`;
      if (agreedSignature !== undefined && signature !== agreedSignature) {
        report(`${node.url} disagrees on slot ownership or roles`);
        return undefined;
      }
      agreedSignature = signature;
      agreed ??= view;
    }
    if (agreed === undefined) {
      report('no node is running');
      return undefined;
    }
    const byId = new Map(agreed.map((line) => [line.id, line]));
    for (const line of agreed) {
      if (line.role !== 'replica' || line.failing || !runningPorts.has(line.port)) continue;
      const primary = line.primaryId === undefined ? undefined : byId.get(line.primaryId);
      if (primary === undefined || primary.failing || !runningPorts.has(primary.port)) continue;
      const replication = parseInfo(
        await respString(line.host, line.port, ['INFO', 'replication']),
      );
      if (replication.get('master_link_status') !== 'up') {
        report(
          `replica 127.0.0.1:${line.port} master_link_status:${replication.get('master_link_status') ?? '?'}`,
        );
        return undefined;
      }
    }
    return agreed;
  }
}

/**
 * Parses `CLUSTER NODES` output. Migrating/importing markers (`[slot->-id]`) are ignored.
 *
 * @example
 * parseClusterNodes('e7d1… 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460\n')
 * // → [{ id: 'e7d1…', port: 30001, role: 'primary', slots: [[0, 5460]], … }]
 */
export function parseClusterNodes(text: string): ClusterNodeView[] {
  const views: ClusterNodeView[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === '') continue;
    const fields = line.split(' ');
    const [id, address, flagField, primaryField] = fields;
    if (id === undefined || address === undefined || flagField === undefined) {
      throw new Error(`malformed CLUSTER NODES line: ${line}`);
    }
    // ip:port@cport[,hostname]
    const hostPort = address.split('@')[0] ?? '';
    const colon = hostPort.lastIndexOf(':');
    const flags = flagField.split(',');
    const slots: [number, number][] = [];
    for (const field of fields.slice(8)) {
      if (field.startsWith('[')) continue;
      const [first, last] = field.split('-');
      const start = Number(first);
      slots.push([start, last === undefined ? start : Number(last)]);
    }
    views.push({
      id,
      host: hostPort.slice(0, colon),
      port: Number(hostPort.slice(colon + 1)),
      flags,
      role: flags.includes('master') ? 'primary' : 'replica',
      primaryId: primaryField === undefined || primaryField === '-' ? undefined : primaryField,
      failing: flags.includes('fail') || flags.includes('fail?'),
      slots,
    });
  }
  return views;
}

/** Node ID of the non-failing primary owning `slot` in `view`. */
function ownerOf(view: readonly ClusterNodeView[], slot: number): string | undefined {
  return view.find(
    (line) =>
      line.role === 'primary' &&
      !line.failing &&
      line.slots.some(([first, last]) => slot >= first && slot <= last),
  )?.id;
}

/**
 * A canonical string of "range→owner" for the live primaries in `view`, or undefined when the
 * live primaries do not cover every slot exactly once.
 */
function slotSignature(view: readonly ClusterNodeView[]): string | undefined {
  const ranges = view
    .filter((line) => line.role === 'primary' && !line.failing)
    .flatMap((line) => line.slots.map(([first, last]) => ({ first, last, id: line.id })))
    .sort((a, b) => a.first - b.first);
  let next = 0;
  for (const range of ranges) {
    if (range.first !== next) return undefined;
    next = range.last + 1;
  }
  if (next !== CLUSTER_SLOTS) return undefined;
  return ranges.map((range) => `${range.first}-${range.last}:${range.id}`).join(',');
}

function runCli(
  cli: string,
  args: readonly string[],
  timeoutMs: number,
): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(cli, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    const timer = setTimeout(() => {
      output += `\n(killed by the harness after ${timeoutMs} ms)`;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      resolve({ code: -1, output: `${output}\n${error.message}` });
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, output });
    });
  });
}
