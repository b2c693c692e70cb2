import * as grpc from '@grpc/grpc-js';
import type { Clock } from '../../core/clock.js';
import { ProtocolError, StoreError } from '../../core/errors.js';
import { toCallError } from '../../protocol/call-error.js';
import {
  AGENT_METADATA,
  REFRESH_METADATA,
  SEEN_TOKEN_METADATA,
  TOKEN_METADATA,
} from '../../protocol/metadata.js';
import type { QuotaController } from '../controller.js';
import type { Lease } from '../lease.js';
import {
  bucketIdProblem,
  bucketKey,
  duration,
  leaseStrategy,
  type RlqsStrategyKind,
} from './mapping.js';
import type {
  WireBucketAction,
  WireBucketId,
  WireQuotaResponse,
  WireUsageReports,
} from '../../protocol/rlqs-protos.js';

type Stream = grpc.ServerDuplexStream<WireUsageReports, WireQuotaResponse>;

const notLeader = (message: string) =>
  new StoreError('SLUICE_ERR_QUOTA_NOT_LEADER', message, { reason: 'connection' });

/** Ends a stream with the error's status, message and `sluice-error-code` metadata. */
function fail(call: Stream, error: ProtocolError | StoreError): void {
  call.emit('error', toCallError(error).status);
}

/** One subscribed bucket of a stream. */
interface BucketState {
  readonly id: WireBucketId;
  /** When its last report arrived (server clock). */
  lastMs: number | undefined;
  /** Leases sent on this stream and not yet known to be held: version and send time. */
  sent: { version: number; atMs: number }[];
}

interface StreamState {
  readonly call: Stream;
  readonly agent: string;
  domain: string | undefined;
  /** Canonical bucket text → its state. */
  readonly buckets: Map<string, BucketState>;
}

/**
 * The newest lease a report arriving at `nowMs` proves the client holds: RLQS reports
 * carry no acknowledgement, but a stream delivers in order, and the ledger already
 * assumes a one-way delay of at most δ (`marginMs`). A report that arrives 2δ or more
 * after a lease was sent on the same stream was sent after that lease arrived, so the
 * client holds it or a newer one. Forgets the older entries.
 */
function impliedHeld(b: BucketState, nowMs: number, marginMs: number): number | undefined {
  let held = -1;
  for (let i = 0; i < b.sent.length; i++) if (b.sent[i]!.atMs <= nowMs - 2 * marginMs) held = i;
  if (held < 0) return undefined;
  const version = b.sent[held]!.version;
  b.sent = b.sent.slice(held);
  return version;
}

/** Options of {@link RlqsQuotaService}. */
export interface RlqsQuotaServiceOptions {
  /** The one domain served; streams naming another are refused. */
  readonly domain: string;
  /** @default 'token_bucket' */
  readonly strategy?: RlqsStrategyKind;
  readonly clock: Clock;
  /** Reports and problems worth a log line. @default ignore */
  readonly log?: (event: Record<string, unknown>) => void;
  /** A stream or message refused, by reason (`bad-request`, `not-leader`, …). @default ignore */
  onRefusal?(reason: string): void;
  /** An agent that could not be authenticated, by reason. @default ignore */
  onAuthFailure?(reason: string): void;
  /** A second live stream under an agent name already streaming. @default ignore */
  onDuplicateAgent?(agent: string): void;
  /** An agent configured with another setting than the controller's (`refresh-ms`). @default ignore */
  onSettingsMismatch?(setting: string): void;
  /**
   * An agent has seen the fencing token `seen`, above this leader's: the leader must step
   * down and lead again under a token above `seen` (the stream was refused with
   * UNAVAILABLE, so the agent comes back). @default ignore
   */
  readonly onHigherTerm?: (seen: number) => void;
}

/**
 * `envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas` in front
 * of a {@link QuotaController}: one stream is one agent (named by `sluice-agent`
 * metadata when given), a BucketId is a bucket by its canonical text, and a bucket's
 * first report subscribes it and gets an assignment at once. Rounds (`pushRound`) send
 * every stream its assignments, renewing with the same strategy, and `abandon_action` for
 * idle buckets. Elapsed time comes from the server's own receive times, because Envoy
 * truncates `time_elapsed` to whole seconds. Reports acknowledge leases by timing (see
 * `impliedHeld`). While no controller leads here, streams are refused with UNAVAILABLE so
 * that clients go to the leader.
 */
export class RlqsQuotaService {
  readonly #o: RlqsQuotaServiceOptions;
  readonly #streams = new Map<string, StreamState>();
  #controller: QuotaController | undefined;
  #nextStream = 0;

  constructor(options: RlqsQuotaServiceOptions) {
    this.#o = options;
  }

  /** Starts serving under `controller` (after winning the election), or stops (`undefined`). */
  lead(controller: QuotaController | undefined): void {
    this.#controller = controller;
    if (controller === undefined) {
      for (const s of this.#streams.values()) {
        fail(s.call, notLeader('this controller no longer leads'));
      }
      this.#streams.clear();
    }
  }

  /** Streams open now (agents connected to this leader). */
  streams(): number {
    return this.#streams.size;
  }

  /** The handler map for `server.addService(RLQS_SERVICE, …)`. */
  handlers(): grpc.UntypedServiceImplementation {
    return { StreamRateLimitQuotas: (call: Stream) => this.#open(call) };
  }

  /** Sends a round's leases and abandonments to the streams that hold those agents. */
  pushRound(
    leases: readonly Lease[],
    abandoned: readonly { agent: string; bucket: string }[],
  ): void {
    const actions = new Map<string, WireBucketAction[]>();
    const add = (agent: string, a: WireBucketAction) => {
      let list = actions.get(agent);
      if (list === undefined) actions.set(agent, (list = []));
      list.push(a);
    };
    // The send time, not the issue time: the process saves its state between the two.
    const sentAtMs = this.#o.clock.nowMs();
    for (const l of leases) {
      const b = this.#streams.get(l.agent)?.buckets.get(l.bucket);
      if (b === undefined) continue;
      add(l.agent, this.#assignment(b.id, l));
      b.sent.push({ version: l.version, atMs: sentAtMs });
    }
    for (const a of abandoned) {
      const s = this.#streams.get(a.agent);
      const id = s?.buckets.get(a.bucket)?.id;
      if (s === undefined || id === undefined) continue;
      s.buckets.delete(a.bucket);
      add(a.agent, { bucketId: id, abandonAction: {} });
    }
    for (const [agent, list] of actions)
      this.#streams.get(agent)?.call.write({ bucketAction: list });
  }

  #assignment(id: WireBucketId, l: Lease): WireBucketAction {
    return {
      bucketId: id,
      quotaAssignmentAction: {
        assignmentTimeToLive: duration(l.ttlMs),
        rateLimitStrategy: leaseStrategy(l, this.#o.strategy ?? 'token_bucket'),
      },
    };
  }

  #open(call: Stream): void {
    const controller = this.#controller;
    if (controller === undefined) {
      this.#o.onRefusal?.('not-leader');
      fail(call, notLeader('this controller does not lead'));
      return;
    }
    const seen = Number(call.metadata.get(SEEN_TOKEN_METADATA)[0] ?? 0);
    if (Number.isSafeInteger(seen) && seen > controller.fencingToken) {
      this.#o.log?.({ event: 'higher_term_seen', seen, token: controller.fencingToken });
      fail(
        call,
        notLeader(
          `this controller's term ${controller.fencingToken} is below term ${seen} the agent has seen; it takes a higher one`,
        ),
      );
      this.#o.onHigherTerm?.(seen);
      return;
    }
    const named = call.metadata.get(AGENT_METADATA)[0];
    const agent =
      typeof named === 'string' && named !== ''
        ? named
        : `stream-${++this.#nextStream}@${call.getPeer()}`;
    // A reconnecting agent replaces its older stream.
    this.#streams.get(agent)?.call.end();
    const state: StreamState = { call, agent, domain: undefined, buckets: new Map() };
    this.#streams.set(agent, state);
    const md = new grpc.Metadata();
    md.set(TOKEN_METADATA, String(controller.fencingToken));
    md.set(REFRESH_METADATA, String(controller.config.refreshMs));
    const agentRefresh = Number(call.metadata.get(REFRESH_METADATA)[0]);
    if (agentRefresh > 0 && agentRefresh !== controller.config.refreshMs) {
      // The agent follows the period sent above; said here so an operator fixes the setting.
      this.#o.onSettingsMismatch?.('refresh-ms');
      this.#o.log?.({
        event: 'settings_mismatch',
        agent,
        setting: 'refresh-ms',
        agentMs: agentRefresh,
        controllerMs: controller.config.refreshMs,
      });
    }
    call.sendMetadata(md);
    const forget = () => {
      if (this.#streams.get(agent) === state) this.#streams.delete(agent);
    };
    call.on('data', (msg: WireUsageReports) => this.#reports(state, msg));
    call.on('end', () => {
      // A Sluice agent (named) half-closes only when it leaves, after its last report
      // and once it has stopped deciding: its leases leave the ledger after the current
      // window. An unnamed client's half-close proves nothing about the leases it holds.
      if (named === agent && this.#streams.get(agent) === state) {
        const nowMs = this.#o.clock.nowMs();
        const buckets = [...state.buckets.keys()].filter((b) => controller.leave(b, agent, nowMs));
        if (buckets.length > 0) this.#o.log?.({ event: 'left', agent, buckets });
      }
      forget();
      call.end();
    });
    call.on('error', forget);
    call.on('cancelled', forget);
  }

  #reports(s: StreamState, msg: WireUsageReports): void {
    const controller = this.#controller;
    if (controller === undefined) return;
    const refuse = (details: string) => {
      this.#o.onRefusal?.('bad-request');
      this.#streams.delete(s.agent);
      fail(s.call, new ProtocolError('SLUICE_ERR_PROTOCOL_BAD_REQUEST', details));
    };
    if (s.domain === undefined) {
      if (msg.domain !== this.#o.domain) {
        refuse(`domain must be "${this.#o.domain}", got "${msg.domain}"`);
        return;
      }
      s.domain = msg.domain;
    }
    const nowMs = this.#o.clock.nowMs();
    const out: WireBucketAction[] = [];
    for (const [i, u] of msg.bucketQuotaUsages.entries()) {
      const problem = bucketIdProblem(u.bucketId);
      if (problem !== undefined) {
        refuse(`bucket_quota_usages[${i}]: ${problem}`);
        return;
      }
      const id = u.bucketId!;
      const key = bucketKey(id);
      if (!controller.has(key)) {
        this.#o.log?.({ event: 'unknown_bucket', agent: s.agent, bucket: key });
        continue;
      }
      const seen = s.buckets.get(key);
      const b: BucketState = seen ?? { id, lastMs: undefined, sent: [] };
      if (seen === undefined) s.buckets.set(key, b);
      const elapsedMs = b.lastMs === undefined ? 0 : nowMs - b.lastMs;
      b.lastMs = nowMs;
      const heldVersion = impliedHeld(b, nowMs, controller.config.marginMs);
      const report = {
        agent: s.agent,
        bucket: key,
        allowed: Number(u.numRequestsAllowed),
        denied: Number(u.numRequestsDenied),
        elapsedMs,
        ...(heldVersion === undefined ? {} : { heldVersion }),
      };
      // A bucket new to this stream is a subscription: it gets an assignment at once, a
      // newcomer's share or, after a reconnect, its newest lease again.
      const lease =
        controller.report(report, nowMs) ??
        (seen === undefined ? controller.renew(key, s.agent, nowMs) : undefined);
      if (lease !== undefined) {
        out.push(this.#assignment(id, lease));
        b.sent.push({ version: lease.version, atMs: nowMs });
      }
    }
    if (out.length > 0) s.call.write({ bucketAction: out });
  }
}
