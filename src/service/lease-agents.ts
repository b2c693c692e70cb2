import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { Clock } from '../core/clock.js';
import { PolicyError } from '../core/errors.js';
import type { QuotaAgent } from '../quota/agent.js';
import type { LeaseFallback } from '../quota/lease.js';
import { RlqsAgentClient } from '../quota/rlqs/agent-client.js';
import { grpcClientChannel, type GrpcClientTls } from './grpc-client-tls.js';
import type { LeaseStatus } from './status/status-snapshot.js';

/**
 * Quota leases in `sluice serve` (`SLUICE_LEASE_*`): the service is an agent of a
 * `sluice controller`, and each policy or rule named takes its budget from a lease.
 */
export interface ServeLeaseOptions {
  /** Controller addresses (`host:port`), tried in turn until one leads. */
  readonly controllers: readonly string[];
  /**
   * Public names of the envoy rules (`sluice.name`, `rate_limit.name` or the key path)
   * and native policies decided by a lease. Each is one RLQS bucket, `{policy: NAME}`:
   * every bucket of the rule draws on that one lease.
   */
  readonly policies: readonly string[];
  /** The RLQS domain; the controller's `--domain`. @default "sluice" */
  readonly domain?: string;
  /**
   * This instance's agent name, unique in the fleet and kept across reconnects.
   * @default `<hostname>-<pid>-<8 random hex digits>`, new at each start
   */
  readonly agent?: string;
  /** Report period and enforcement window, in ms; the controller's `--refresh-ms`. @default 1000 */
  readonly refreshMs?: number;
  /** The longest a lease is held once received, in ms. @default the controller's TTL */
  readonly maxTtlMs?: number;
  /** What applies without a lease in force (cut off, or before the first). @default deny */
  readonly fallback?: LeaseFallback;
  /** TLS to the controllers (`SLUICE_LEASE_TLS*`). @default plaintext */
  readonly tls?: GrpcClientTls;
  /**
   * A file holding the bearer token presented to the controllers (`SLUICE_LEASE_TOKEN_FILE`),
   * read at start and again at each connect, so that a rotated token needs no restart.
   * @default no token
   */
  readonly tokenFile?: string;
}

/** The RLQS bucket of a leased policy: the controller's `--budget policy=NAME@RATE`. */
export function leaseBucket(policy: string): Record<string, string> {
  return { policy };
}

/**
 * The agent name of one leased policy's stream: `<agent>/<policy>`. A controller keeps one
 * live stream per name (a second is refused), so each policy's stream has its own.
 */
export function leaseAgentName(agent: string, policy: string): string {
  return `${agent}/${policy}`;
}

/**
 * Reads the token file now (a missing or empty one stops the start, naming the setting),
 * then at each call; a read that fails later keeps the last token and says why.
 */
function tokenReader(file: string, log: Logger): () => string {
  const read = () => readFileSync(file, 'utf8').trim();
  let last: string;
  try {
    last = read();
  } catch (e) {
    throw new PolicyError(
      'SLUICE_ERR_CONFIG_READ',
      `SLUICE_LEASE_TOKEN_FILE ${file}: ${(e as Error).message}`,
    );
  }
  if (last === '')
    throw new PolicyError('SLUICE_ERR_CONFIG_READ', `SLUICE_LEASE_TOKEN_FILE ${file} is empty`);
  return () => {
    try {
      const t = read();
      if (t !== '') last = t;
    } catch (e) {
      log.warn({ file, error: (e as Error).message }, 'quota lease token file unreadable');
    }
    return last;
  };
}

/** One {@link RlqsAgentClient} per leased policy, started at once. */
export class LeaseAgents {
  readonly #clients = new Map<string, RlqsAgentClient>();
  readonly #clock: Clock;
  readonly #fallback: LeaseFallback;
  readonly #windowMs: number;

  constructor(options: ServeLeaseOptions, clock: Clock, log: Logger) {
    this.#clock = clock;
    this.#fallback = options.fallback ?? { kind: 'deny' };
    this.#windowMs = options.refreshMs ?? 1_000;
    // Host and pid alone repeat: every container of a Deployment can be pid 1 on a host
    // name that a restart reuses, and two agents under one name would share one lease.
    const agent = options.agent ?? `${hostname()}-${process.pid}-${randomBytes(4).toString('hex')}`;
    const channel = grpcClientChannel(options.tls);
    const token = options.tokenFile === undefined ? undefined : tokenReader(options.tokenFile, log);
    for (const policy of new Set(options.policies)) {
      const client = new RlqsAgentClient({
        controllers: options.controllers,
        // One stream per policy, and a controller keeps one stream per agent name.
        agent: leaseAgentName(agent, policy),
        domain: options.domain ?? 'sluice',
        bucket: leaseBucket(policy),
        fallback: this.#fallback,
        refreshMs: this.#windowMs,
        ...(options.maxTtlMs === undefined ? {} : { maxTtlMs: options.maxTtlMs }),
        credentials: channel.credentials,
        channelOptions: channel.options,
        ...(token === undefined ? {} : { authToken: token }),
        clock,
        log: (e) => {
          // Applied leases come every refresh: debug; streams and refusals say more.
          const level = e['event'] === 'lease' && e['outcome'] === 'applied' ? 'debug' : 'info';
          const line = e['event'] === 'settings_mismatch' ? 'warn' : level;
          log[line]({ ...e, policy }, `quota lease ${String(e['event'])}`);
        },
      });
      this.#clients.set(policy, client);
    }
  }

  /** Per leased policy: whether a lease is in force, and the rate applied (`null` under `store`). */
  gauges(): { policy: string; inForce: boolean; ratePerSecond: number | null }[] {
    const nowMs = this.#clock.nowMs();
    const fallback = fallbackRate(this.#fallback);
    return [...this.#clients].map(([policy, c]) => {
      const lease = c.agent.lease(nowMs);
      return { policy, inForce: lease !== undefined, ratePerSecond: lease?.rate ?? fallback };
    });
  }

  /** Names of the leased policies. */
  get policies(): readonly string[] {
    return [...this.#clients.keys()];
  }

  start(): void {
    for (const c of this.#clients.values()) c.start();
  }

  /**
   * The agent of a leased policy, by its public name; none once closed (its leases were
   * given back), so the store decides.
   */
  agentFor(policy: string): QuotaAgent | undefined {
    const client = this.#clients.get(policy);
    return client === undefined || client.closed ? undefined : client.agent;
  }

  /** What `/status` shows: per leased policy, the rule in force now. */
  status(wallMs: number): LeaseStatus {
    const nowMs = this.#clock.nowMs();
    return {
      inForce: true,
      allocations: [...this.#clients].map(([policy, c]) => {
        const lease = c.agent.lease(nowMs);
        const w = c.agent.window(nowMs);
        return {
          policy,
          holder: c.agent.options.agent,
          mode: lease === undefined ? 'fallback' : 'lease',
          units: w.allowance ?? 0,
          usedInWindow: w.used,
          windowMs: lease?.windowMs ?? this.#windowMs,
          ratePerSecond: lease?.rate ?? fallbackRate(this.#fallback),
          ...(lease === undefined
            ? { fallback: this.#fallback.kind }
            : {
                expiresAt: new Date(wallMs + (c.agent.expiresAtMs - nowMs)).toISOString(),
                fencingToken: lease.fencingToken,
              }),
          controller: c.connectedTo ?? null,
          refused: c.agent.refused,
          refreshMs: c.refreshMs,
          ...(c.refreshMismatch === undefined ? {} : { refreshMismatch: c.refreshMismatch }),
        };
      }),
    };
  }

  /** Sends each agent's last usage and leaves the controller. */
  async close(): Promise<void> {
    await Promise.all([...this.#clients.values()].map((c) => c.close()));
  }
}

function fallbackRate(f: LeaseFallback): number | null {
  return f.kind === 'static' ? f.rate : f.kind === 'deny' ? 0 : null;
}
