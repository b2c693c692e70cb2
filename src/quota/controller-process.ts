import * as grpc from '@grpc/grpc-js';
import { Redis } from 'ioredis';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { systemClock, type Clock } from '../core/clock.js';
import { campaignTickMs, defaultElectionTtlMs } from './bounds.js';
import { QuotaController, type ControllerState } from './controller.js';
import type { ControllerOptions } from './controller-config.js';
import { controllerConfig } from './controller-config.js';
import { LeaderLease } from './leader-lease.js';
import { StateSaver } from './state-saver.js';
import type { RlqsStrategyKind } from './rlqs/mapping.js';
import type { PeerCaps } from './rlqs/peer-caps.js';
import { RlqsQuotaService } from './rlqs/quota-service.js';
import type { AgentAuth } from './rlqs/agent-auth.js';
import { agentServerCredentials, type AgentTls } from './rlqs/agent-tls.js';
import type { TermSigner } from './rlqs/term-signature.js';

/** How long the start waits for Redis before it serves without it, in ms (as `serve`). */
const REDIS_CONNECT_GRACE_MS = 1_000;

/** Options of {@link startQuotaController}. */
export interface QuotaControllerProcessOptions extends ControllerOptions {
  /** Redis URL holding the election key, token counter and state. */
  readonly redisUrl: string;
  /** Key prefix (a Cluster hash tag). @default 'sluice-quota' */
  readonly prefix?: string;
  /** This controller's name among its peers. */
  readonly id: string;
  /** The RLQS domain served. */
  readonly domain: string;
  /** @default '127.0.0.1' */
  readonly host?: string;
  /** gRPC port; 0 picks a free one. */
  readonly port: number;
  /** TLS of the RLQS port, and the CA that verifies agents' certificates. @default plaintext */
  readonly tls?: AgentTls;
  /** Who may stream (mTLS allow-list, bearer tokens). @default anyone */
  readonly auth?: AgentAuth;
  /**
   * How long a leader's term lasts unless renewed (renewed, and campaigned for, every third
   * of it). Kept under leaseTtlMs − refreshMs so that a successor leads, and re-sends
   * leases, before the leases its predecessor sent run out. @default leaseTtlMs / 3
   */
  readonly electionTtlMs?: number;
  /** @default 'token_bucket' */
  readonly strategy?: RlqsStrategyKind;
  /** Signs terms, and checks an agent's seen term (`--term-secret-file`). @default none */
  readonly termSigner?: TermSigner;
  readonly clock?: Clock;
  /** One JSON object per event (leader, round, step-down). @default ignore */
  readonly log?: (event: Record<string, unknown>) => void;
  /** Caps on what one peer may send (`rlqs/peer-caps.ts`). @default DEFAULT_PEER_CAPS */
  readonly caps?: Partial<PeerCaps>;
  /** A stream or message refused, by reason, `count` times (default 1). @default ignore */
  onRefusal?(reason: string, count?: number): void;
  /** An agent that could not be authenticated, by reason. @default ignore */
  onAuthFailure?(reason: string): void;
  /** A second live stream under an agent name already streaming. @default ignore */
  onDuplicateAgent?(agent: string): void;
  /** An agent configured with another setting than the controller's (`refresh-ms`). @default ignore */
  onSettingsMismatch?(setting: string): void;
}

/** What a controller process knows of itself now, for readiness and metrics. */
export interface ControllerProcessStatus {
  /** Whether its Redis connection is ready. */
  readonly connected: boolean;
  /** Whether it leads. */
  readonly leading: boolean;
  /** Its fencing token while it leads, else the last leader's token it read; 0 if none. */
  readonly term: number;
  /** The leader's `<token>:<id>` as last read from Redis (itself when it leads). */
  readonly leader: string | undefined;
  /** Agents (streams) by state, while it leads. */
  readonly agents: Readonly<Record<'streaming' | 'recorded', number>>;
  /** Per budget bucket: units per second committed by the ledger now, and the budget. */
  readonly buckets: readonly {
    readonly bucket: string;
    readonly committed: number;
    readonly budget: number;
  }[];
}

/** A running controller process. */
export interface QuotaControllerProcess {
  readonly port: number;
  /** The fencing token while this process leads; 0 otherwise. */
  token(): number;
  /**
   * Resolves once the Redis connection is ready; meanwhile `onError` hears each failed
   * attempt (the shape `waitForRedis` takes).
   */
  ready(options?: { readonly onError?: (error: Error) => void }): Promise<void>;
  status(): ControllerProcessStatus;
  close(): Promise<void>;
}

/**
 * Runs one quota controller: it campaigns for the Redis leader lease, and while it leads
 * it loads the last saved state, runs a round every refresh period, saves the state
 * (fenced by its term) and only then pushes the round's assignments over RLQS. A leader
 * that cannot renew its term or save its state stops leading at once and refuses its
 * streams, so its agents move to the next leader.
 */
export async function startQuotaController(
  o: QuotaControllerProcessOptions,
): Promise<QuotaControllerProcess> {
  const config = controllerConfig(o);
  const clock = o.clock ?? systemClock;
  const log = o.log ?? (() => {});
  const electionTtlMs = o.electionTtlMs ?? defaultElectionTtlMs(config.leaseTtlMs);
  const connect = () =>
    new Redis(o.redisUrl, {
      lazyConnect: true,
      maxRetriesPerRequest: 1,
      enableOfflineQueue: false,
    });
  // Two connections: Redis answers one connection's commands in order, so a renewal sent
  // on the connection that carries state writes would wait behind them. The election's
  // own connection keeps the term's renewal ahead of any round's save.
  const redis = connect();
  const stateRedis = connect();
  // Redis may be down at start, or go away: ioredis keeps reconnecting, the election
  // ticks fail and step down meanwhile, and `ready` says why it waits. Without a listener
  // each failed attempt would be an unhandled 'error' event with its stack.
  const errorListeners = new Set<(error: Error) => void>();
  // Both connections: `ready` waits for both, so either one's failure is why it waits.
  for (const connection of [redis, stateRedis]) {
    connection.on('error', (error: Error) => {
      for (const l of errorListeners) l(error);
    });
  }
  const connecting = Promise.all([redis.connect(), stateRedis.connect()]).catch(() => undefined);
  let knownLeader: string | undefined;
  const lease = new LeaderLease(redis, o.prefix ?? 'sluice-quota', o.id, electionTtlMs, stateRedis);
  // One save in flight; a round's and every newcomer's save share the next write.
  const saver = new StateSaver(async () => {
    const c = controller;
    return c !== undefined && (await lease.writeState(JSON.stringify(c.state())));
  });
  // The lowest token the next term may take (above a term an agent reported seeing).
  let termFloor = 0;
  // Until when (monotonic ms, which a SIGSTOP does not stop) the key cannot have run out:
  // E after the start of the last acquire or renewal that succeeded.
  let termHeldUntil = 0;
  const service: RlqsQuotaService = new RlqsQuotaService({
    domain: o.domain,
    clock,
    log,
    saveBeforeSend: () => saver.save(),
    ...(o.auth === undefined ? {} : { auth: o.auth }),
    onHigherTerm: (seen) => {
      termFloor = Math.max(termFloor, seen + 1);
      const c = controller;
      if (c === undefined) return;
      stepDown(`an agent has seen term ${seen}`);
      // Gives the key up so that the next campaign (here or elsewhere) takes a new term.
      void lease.resign().catch(() => {});
    },
    termHeld: () => performance.now() < termHeldUntil,
    // Nothing is sent meanwhile (the service refuses or drops what it meets): a renewal
    // at once says whether the key is still this controller's.
    onTermLapsed: () => void renewNow().catch(() => undefined),
    ...(o.strategy === undefined ? {} : { strategy: o.strategy }),
    ...(o.termSigner === undefined ? {} : { termSigner: o.termSigner }),
    ...(o.caps === undefined ? {} : { caps: o.caps }),
    ...(o.onRefusal === undefined
      ? {}
      : { onRefusal: (r: string, n?: number) => o.onRefusal?.(r, n) }),
    ...(o.onAuthFailure === undefined
      ? {}
      : { onAuthFailure: (r: string) => o.onAuthFailure?.(r) }),
    ...(o.onDuplicateAgent === undefined
      ? {}
      : { onDuplicateAgent: (a: string) => o.onDuplicateAgent?.(a) }),
    ...(o.onSettingsMismatch === undefined
      ? {}
      : { onSettingsMismatch: (x: string) => o.onSettingsMismatch?.(x) }),
  });
  // Pings find a peer that went away without closing: its stream ends, so the agent's
  // name is free for its reconnect (one live stream per name).
  const server = new grpc.Server({
    'grpc.keepalive_time_ms': 10_000,
    'grpc.keepalive_timeout_ms': 5_000,
  });
  server.addService(service.definition(), service.handlers());
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${o.host ?? '127.0.0.1'}:${o.port}`, agentServerCredentials(o.tls), (e, p) =>
      e ? reject(e) : resolve(p),
    ),
  );

  let controller: QuotaController | undefined;
  // The longest the event loop was held between two rounds, in each round's line: a
  // stalled loop is what costs a term (a renewal that could not run), so it is shown.
  const loopDelay = monitorEventLoopDelay({ resolution: 20 });
  loopDelay.enable();
  const loopMaxMs = () => {
    const ms = Math.round(loopDelay.max / 1e6);
    loopDelay.reset();
    return ms;
  };
  // One in-flight flag per timer: a slow round must not skip a renewal, nor a slow
  // campaign a round. They may overlap: a round acts on the controller it began with and
  // its save is fenced by that term's value, so a term lost meanwhile makes it a no-op.
  const inFlight = { campaign: false, round: false };
  let closed = false;
  const stepDown = (reason: string) => {
    if (controller === undefined) return;
    log({
      event: 'step_down',
      id: o.id,
      token: controller.fencingToken,
      reason,
      loopDelayMaxMs: loopMaxMs(),
    });
    controller = undefined;
    knownLeader = undefined;
    service.lead(undefined);
  };
  const round = async () => {
    const c = controller;
    if (c === undefined) return;
    const nowMs = clock.nowMs();
    const result = c.round(nowMs);
    // Saved before sent: a successor must know every lease this leader may have sent.
    const saved = await saver.save();
    if (controller !== c) return;
    if (!saved) {
      stepDown('state write refused');
      return;
    }
    if (performance.now() >= termHeldUntil && !(await renewNow())) return;
    if (controller !== c) return;
    // The ledger counts a lease until issue + L + δ, and δ must cover the delivery too: a
    // round whose save took more than half of δ is not sent (it stays counted, and the
    // agents keep their leases until the next round).
    const lateMs = clock.nowMs() - nowMs;
    if (lateMs > config.marginMs / 2) {
      log({ event: 'round_not_sent', id: o.id, token: c.fencingToken, atMs: nowMs, lateMs });
      return;
    }
    service.pushRound(result.leases, result.abandoned);
    let committed = 0;
    for (const bucket of config.budgets.keys()) committed += c.committed(bucket, nowMs);
    let budget = 0;
    for (const b of config.budgets.values()) budget += b;
    log({
      event: 'round',
      id: o.id,
      token: c.fencingToken,
      atMs: nowMs,
      leases: result.leases.length,
      committed,
      budget,
      saveMs: Math.round(lateMs),
      loopDelayMaxMs: loopMaxMs(),
    });
  };
  // One renewal in flight, shared by the election tick and a renewal asked for at once.
  let renewing: Promise<boolean> | undefined;
  const renew = async (): Promise<boolean> => {
    const startedAt = performance.now();
    const c = controller;
    const ok = await lease.renew();
    if (controller !== c) return false;
    if (ok) termHeldUntil = Math.max(termHeldUntil, startedAt + electionTtlMs);
    else stepDown('term lost');
    return ok;
  };
  /**
   * A term that may have lapsed by this process's clock (no renewal began within E: a
   * loop held up by a thousand streams, or a pause) is renewed at once, not given up:
   * the renewal checks the key still holds this controller's value, so it succeeds only
   * if no successor can lead, and then sending resumes from its start + E. Only a failed
   * renewal steps down. Nothing is sent until then, so nothing goes out under a term a
   * successor may hold.
   */
  const renewNow = (): Promise<boolean> => {
    if (controller === undefined) return Promise.resolve(false);
    if (renewing === undefined) {
      log({ event: 'renew_at_once', id: o.id, loopDelayMaxMs: Math.round(loopDelay.max / 1e6) });
      renewing = renew().finally(() => (renewing = undefined));
    }
    return renewing;
  };
  const campaign = async () => {
    const startedAt = performance.now();
    if (controller !== undefined) {
      if (renewing === undefined) {
        renewing = renew().finally(() => (renewing = undefined));
      }
      await renewing;
      return;
    }
    // Time seeds the term, so that it grows even when Redis lost the stored token.
    const token = await lease.acquire(Math.max(clock.nowMs(), termFloor));
    if (token > 0) termHeldUntil = startedAt + electionTtlMs;
    if (token === 0) {
      knownLeader = (await lease.leader()) ?? undefined;
      // Campaign again the moment the leader's key runs out, not up to a tick later: a
      // killed leader is followed within E (+ the acquire), and the tick's slack is left
      // for a busy machine's timers.
      const ttlMs = await lease.leaderTtlMs();
      if (ttlMs > 0 && ttlMs < campaignTickMs(electionTtlMs)) {
        setTimeout(() => void tick('campaign', campaign)(), ttlMs + 1).unref();
      }
      return;
    }
    knownLeader = `${token}:${o.id}`;
    const saved = await lease.readState();
    const state = saved === null ? undefined : (JSON.parse(saved) as ControllerState);
    controller = new QuotaController(o, token, state);
    service.lead(controller);
    log({
      event: 'leader',
      id: o.id,
      token,
      atMs: clock.nowMs(),
      records: state?.records.length ?? 0,
    });
  };
  const tick = (name: keyof typeof inFlight, f: () => Promise<void>) => async () => {
    if (inFlight[name] || closed) return;
    inFlight[name] = true;
    try {
      await f();
    } catch (e) {
      stepDown(`redis: ${(e as Error).message}`);
    } finally {
      inFlight[name] = false;
    }
  };
  const electionTimer = setInterval(tick('campaign', campaign), campaignTickMs(electionTtlMs));
  const roundTimer = setInterval(tick('round', round), config.refreshMs);
  // A Redis that answers at once is led from before this resolves (as when the connection
  // was awaited); one that does not gets a second, then the ports serve regardless.
  let graceTimer: NodeJS.Timeout | undefined;
  await Promise.race([
    connecting,
    new Promise<void>((resolve) => (graceTimer = setTimeout(resolve, REDIS_CONNECT_GRACE_MS))),
  ]);
  clearTimeout(graceTimer);
  await tick('campaign', campaign)();

  return {
    port,
    token: () => controller?.fencingToken ?? 0,
    ready: async (options = {}) => {
      if (redis.status === 'ready' && stateRedis.status === 'ready') return;
      const onError = options.onError;
      if (onError !== undefined) errorListeners.add(onError);
      try {
        const ready = (r: Redis) =>
          r.status === 'ready' ? undefined : new Promise((resolve) => r.once('ready', resolve));
        await Promise.all([ready(redis), ready(stateRedis)]);
      } finally {
        if (onError !== undefined) errorListeners.delete(onError);
      }
    },
    status: () => {
      const c = controller;
      const nowMs = clock.nowMs();
      const connected = redis.status === 'ready' && stateRedis.status === 'ready';
      return {
        connected,
        leading: c !== undefined,
        term: c?.fencingToken ?? Number(knownLeader?.split(':')[0] ?? 0),
        leader: connected || c !== undefined ? knownLeader : undefined,
        agents: { streaming: service.streams(), recorded: c?.state().records.length ?? 0 },
        buckets: [...config.budgets].map(([bucket, budget]) => ({
          bucket,
          committed: c?.committed(bucket, nowMs) ?? 0,
          budget,
        })),
      };
    },
    async close() {
      closed = true;
      clearInterval(electionTimer);
      clearInterval(roundTimer);
      loopDelay.disable();
      stepDown('closing');
      await lease.resign().catch(() => {});
      await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
      redis.disconnect();
      stateRedis.disconnect();
    },
  };
}
