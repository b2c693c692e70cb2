import * as grpc from '@grpc/grpc-js';
import { ProtocolError, StoreError } from '../../core/errors.js';
import { SampledLog } from '../../core/sampled-log.js';
import { toCallError } from '../../protocol/call-error.js';
import {
  REFRESH_METADATA,
  SEEN_SIGNATURE_METADATA,
  SEEN_TOKEN_METADATA,
  TOKEN_METADATA,
  TOKEN_SIGNATURE_METADATA,
} from '../../protocol/metadata.js';
import type { QuotaController } from '../controller.js';
import type { Lease } from '../lease.js';
import { duration, leaseStrategy } from './mapping.js';
import type { AgentGrant, AuthRefusal } from './agent-auth.js';
import { claimedAgent, duplicateAgentError } from './agent-identity.js';
import {
  agentsRefusal,
  checkMessage,
  peerCaps,
  ReportRate,
  type CapRefusal,
  type PeerCaps,
} from './peer-caps.js';
import { RLQS_SERVICE, type RlqsServiceDefinition } from '../../protocol/rlqs-protos.js';
import { scanReports, type OverCaps } from './wire-scan.js';
import type {
  WireBucketAction,
  WireBucketId,
  WireQuotaResponse,
  WireUsageReports,
} from '../../protocol/rlqs-protos.js';

import type { RlqsQuotaServiceOptions } from './quota-service-options.js';

export type { RlqsQuotaServiceOptions } from './quota-service-options.js';

type Stream = grpc.ServerDuplexStream<WireUsageReports | OverCaps, WireQuotaResponse>;

const notLeader = (message: string) =>
  new StoreError('SLUICE_ERR_QUOTA_NOT_LEADER', message, { reason: 'connection' });

/** At most one log line per reason per this long (refusals, unknown buckets, mismatches). */
export const PEER_LOG_INTERVAL_MS = 10_000;

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
  /** What its credentials may claim; `undefined` when agents are not authenticated. */
  readonly grants: readonly AgentGrant[] | undefined;
  domain: string | undefined;
  /** Canonical bucket text → its state. */
  readonly buckets: Map<string, BucketState>;
  /** Every bucket the stream has reported, with a budget or not (at most the cap). */
  readonly seen: Set<string>;
  readonly rate: ReportRate;
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
  readonly #caps: PeerCaps;
  // A peer can cause these at any rate: sampled, never one line per bucket or message.
  readonly #sampled: SampledLog;
  readonly #streams = new Map<string, StreamState>();
  #controller: QuotaController | undefined;
  #nextStream = 0;

  constructor(options: RlqsQuotaServiceOptions) {
    this.#o = options;
    this.#caps = peerCaps(options.caps);
    this.#sampled = new SampledLog(
      (e) => options.log?.(e),
      options.logSampleMs ?? PEER_LOG_INTERVAL_MS,
      options.clock,
    );
  }

  /** Counts and logs (sampled) a refusal, then ends the stream with its status. */
  #refuse(call: Stream, agent: string, r: CapRefusal): void {
    this.#o.onRefusal?.(r.reason);
    this.#sampled.note(r.reason, {
      event: 'refused',
      reason: r.reason,
      agent: agent.slice(0, 256),
      details: r.error.message,
    });
    fail(call, r.error);
  }

  /** Distinct agents of the domain now: streams open, and `known` (the ledger's agents). */
  #agents(known: ReadonlySet<string>): number {
    let n = known.size;
    for (const a of this.#streams.keys()) if (!known.has(a)) n++;
    return n;
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

  /**
   * The RLQS service definition to serve with `handlers()`: the official one, with a
   * deserializer that refuses a message over the caps from its bytes, before decoding.
   */
  definition(): grpc.ServiceDefinition {
    const method = RLQS_SERVICE.StreamRateLimitQuotas;
    const decode = method.requestDeserialize;
    const caps = this.#caps;
    const wrapped: RlqsServiceDefinition = {
      ...RLQS_SERVICE,
      StreamRateLimitQuotas: {
        ...method,
        requestDeserialize: ((buf: Buffer) =>
          scanReports(buf, caps) ?? decode(buf)) as typeof decode,
      },
    };
    return wrapped;
  }

  /** The handler map for `server.addService(definition(), …)`. */
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

  /** Counts, logs (sampled) and refuses a stream whose credentials do not hold. */
  #authFailure(call: Stream, r: AuthRefusal, agent: string | undefined): void {
    this.#o.onAuthFailure?.(r.reason);
    this.#sampled.note(`auth_failure:${r.reason}`, {
      event: 'auth_failure',
      reason: r.reason,
      agent: agent ?? null,
      peer: call.getPeer(),
      message: r.error.message,
    });
    fail(call, r.error);
  }

  /** Whether the term may have lapsed; if so the process is told (it renews at once). */
  #lapsed(): boolean {
    if (this.#o.termHeld === undefined || this.#o.termHeld()) return false;
    this.#o.onTermLapsed?.();
    return true;
  }

  #open(call: Stream): void {
    const named = claimedAgent(call.metadata);
    // First: nothing an unknown peer sends (a seen term, a name) may act on this leader.
    const auth = this.#o.auth?.authenticate(call, named);
    if (auth !== undefined && 'reason' in auth) {
      this.#authFailure(call, auth, named);
      return;
    }
    const lapsed = this.#controller !== undefined && this.#lapsed();
    const controller = this.#controller;
    if (controller === undefined || lapsed) {
      this.#o.onRefusal?.('not-leader');
      fail(
        call,
        notLeader(
          lapsed ? 'this controller is renewing its term' : 'this controller does not lead',
        ),
      );
      return;
    }
    const seen = Number(call.metadata.get(SEEN_TOKEN_METADATA)[0] ?? 0);
    const signer = this.#o.termSigner;
    const higher = Number.isSafeInteger(seen) && seen > controller.fencingToken;
    const sig = call.metadata.get(SEEN_SIGNATURE_METADATA)[0];
    if (
      higher &&
      signer !== undefined &&
      !signer.verify(seen, typeof sig === 'string' ? sig : undefined)
    ) {
      // A term no controller of this domain signed: it moves nothing here.
      this.#o.onRefusal?.('forged-seen-token');
      this.#sampled.note('forged_seen_token', {
        event: 'forged_seen_token',
        agent: (named ?? '').slice(0, 256),
        peer: call.getPeer(),
        seen,
        token: controller.fencingToken,
      });
    } else if (higher) {
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
    const agent = named ?? `stream-${++this.#nextStream}@${call.getPeer()}`;
    // One live stream per name: a second is refused and the first keeps its lease. A
    // reconnecting agent's old stream has ended (or its connection failed keepalive).
    if (this.#streams.has(agent)) {
      this.#o.onDuplicateAgent?.(agent);
      this.#sampled.note('duplicate_agent', {
        event: 'duplicate_agent',
        agent: agent.slice(0, 256),
        peer: call.getPeer(),
      });
      fail(call, duplicateAgentError(agent));
      return;
    }
    // An agent already known (a reconnect) is never refused by the agents cap.
    const known = controller.agents();
    if (!known.has(agent)) {
      const refusal = agentsRefusal(this.#caps, this.#agents(known));
      if (refusal !== undefined) {
        this.#refuse(call, agent, refusal);
        return;
      }
    }
    const state: StreamState = {
      call,
      agent,
      grants: auth?.grants,
      domain: undefined,
      buckets: new Map(),
      seen: new Set(),
      rate: new ReportRate(this.#caps, this.#o.clock.nowMs()),
    };
    this.#streams.set(agent, state);
    const md = new grpc.Metadata();
    md.set(TOKEN_METADATA, String(controller.fencingToken));
    if (signer !== undefined)
      md.set(TOKEN_SIGNATURE_METADATA, signer.sign(controller.fencingToken));
    md.set(REFRESH_METADATA, String(controller.config.refreshMs));
    const agentRefresh = Number(call.metadata.get(REFRESH_METADATA)[0]);
    if (agentRefresh > 0 && agentRefresh !== controller.config.refreshMs) {
      // The agent follows the period sent above; said here so an operator fixes the setting.
      this.#o.onSettingsMismatch?.('refresh-ms');
      this.#sampled.note('settings_mismatch', {
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
    call.on('data', (msg: WireUsageReports | OverCaps) => this.#reports(state, msg));
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

  #send(s: StreamState, out: WireBucketAction[], controller: QuotaController): void {
    const save = this.#o.saveBeforeSend;
    if (save === undefined) {
      s.call.write({ bucketAction: out });
      return;
    }
    void save().then(
      (saved) => {
        // The save took time: the term must still hold when the lease goes (else it stays
        // counted, and the next round sends it).
        const held = this.#o.termHeld?.() ?? true;
        if (saved && held && this.#controller === controller && this.#streams.get(s.agent) === s) {
          s.call.write({ bucketAction: out });
        }
      },
      () => undefined,
    );
  }

  #reports(s: StreamState, msg: WireUsageReports | OverCaps): void {
    // While the term is being renewed at once, a report is dropped (as one lost on the
    // way): nothing it could earn may be sent under a term a successor may hold.
    if (this.#controller !== undefined && this.#lapsed()) return;
    const controller = this.#controller;
    if (controller === undefined) return;
    const refuse = (r: CapRefusal) => {
      if (this.#streams.get(s.agent) === s) this.#streams.delete(s.agent);
      this.#refuse(s.call, s.agent, r);
    };
    const nowMs = this.#o.clock.nowMs();
    // Every check before anything is applied: a message is taken whole or refused whole.
    const late = s.rate.take(nowMs);
    if (late !== undefined) return refuse(late);
    if ('overCaps' in msg) return refuse(msg.overCaps);
    if (s.domain === undefined && msg.domain !== this.#o.domain) {
      const got = msg.domain.slice(0, 256);
      return refuse({
        reason: 'bad-request',
        error: new ProtocolError(
          'SLUICE_ERR_PROTOCOL_BAD_REQUEST',
          `domain must be "${this.#o.domain}", got "${got}"`,
        ),
      });
    }
    const checked = checkMessage(this.#caps, msg, s.seen);
    if ('reason' in checked) return refuse(checked);
    if (s.domain === undefined) {
      const denied = s.grants && this.#o.auth?.checkDomain(s.grants, msg.domain);
      if (denied) {
        if (this.#streams.get(s.agent) === s) this.#streams.delete(s.agent);
        this.#authFailure(s.call, denied, s.agent);
        return;
      }
      s.domain = msg.domain;
    }
    const out: WireBucketAction[] = [];
    let unknown = 0;
    for (const [i, u] of msg.bucketQuotaUsages.entries()) {
      const id = u.bucketId!;
      const key = checked.keys[i]!;
      s.seen.add(key);
      if (!controller.has(key)) {
        if (unknown++ === 0)
          this.#sampled.note('unknown_bucket', {
            event: 'unknown_bucket',
            agent: s.agent,
            bucket: key,
          });
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
    if (unknown > 0) this.#o.onRefusal?.('unknown-bucket', unknown);
    if (out.length > 0) this.#send(s, out, controller);
  }
}
