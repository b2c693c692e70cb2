import { Cluster, type Redis } from 'ioredis';

/** One node's totals for one script command, from `INFO commandstats`. */
export interface ScriptStats {
  /** The node, `host:port`. */
  readonly shard: string;
  /** `fcall`, `fcall_ro`, `evalsha` or `eval`. */
  readonly command: string;
  /** Calls since the node started (or `CONFIG RESETSTAT`). */
  readonly calls: number;
  /** Microseconds the node spent running them. */
  readonly usec: number;
}

/** The commands Sluice's scripts run as (FCALL once the library is loaded, else EVALSHA). */
const SCRIPT_COMMANDS = new Set(['fcall', 'fcall_ro', 'evalsha', 'eval']);

/**
 * The script commands' totals of each node `client` sends scripts to (a standalone
 * server, or a Cluster's primaries): the nodes' own measure of script execution time.
 * They count every client of the node, not only this process. Rejects when a node does
 * not answer.
 */
export async function scriptStats(client: Redis | Cluster): Promise<ScriptStats[]> {
  const nodes: Redis[] = client instanceof Cluster ? client.nodes('master') : [client];
  const perNode = await Promise.all(
    nodes.map(async (node) => {
      const shard = `${node.options.host ?? 'localhost'}:${node.options.port ?? 6379}`;
      return parseCommandStats(shard, await node.info('commandstats'));
    }),
  );
  return perNode.flat();
}

/** `cmdstat_fcall:calls=12,usec=345,...` lines of the script commands. */
export function parseCommandStats(shard: string, info: string): ScriptStats[] {
  const out: ScriptStats[] = [];
  for (const line of info.split(/\r?\n/)) {
    const m = /^cmdstat_([a-z_|]+):(.*)$/.exec(line);
    if (m === null || !SCRIPT_COMMANDS.has(m[1]!)) continue;
    const fields = new Map(m[2]!.split(',').map((kv) => kv.split('=') as [string, string]));
    out.push({
      shard,
      command: m[1]!,
      calls: Number(fields.get('calls') ?? 0),
      usec: Number(fields.get('usec') ?? 0),
    });
  }
  return out;
}
