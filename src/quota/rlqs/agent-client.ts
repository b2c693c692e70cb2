import * as grpc from '@grpc/grpc-js';
import { systemClock, type Clock } from '../../core/clock.js';
import { QuotaAgent, type TakeResult } from '../agent.js';
import type { LeaseFallback } from '../lease.js';
import { silenceTimeoutMs } from '../bounds.js';
import { bucketKey, duration, durationMs, strategyRate } from './mapping.js';
import {
  RLQS_SERVICE,
  type WireBucketId,
  type WireQuotaResponse,
  type WireUsageReports,
} from '../../protocol/rlqs-protos.js';
import {
  AGENT_METADATA,
  REFRESH_METADATA,
  SEEN_SIGNATURE_METADATA,
  SEEN_TOKEN_METADATA,
  TOKEN_METADATA,
  TOKEN_SIGNATURE_METADATA,
} from '../../protocol/metadata.js';

/** Statuses a controller refuses a stream with that retrying at once will not change. */
const REFUSALS: ReadonlySet<number> = new Set([
  grpc.status.ALREADY_EXISTS,
  grpc.status.PERMISSION_DENIED,
  grpc.status.UNAUTHENTICATED,
]);

/** One stream to one controller, and the channel it runs on. */
interface Link {
  readonly call: grpc.ClientDuplexStream<WireUsageReports, WireQuotaResponse>;
  readonly client: grpc.Client;
  readonly target: string;
  /** The leader's fencing token, once it accepted the stream. */
  token: number | undefined;
  /** Ended, or dropped by this agent: its end changes nothing. */
  ended: boolean;
}

/** Options of {@link RlqsAgentClient}. */
export interface RlqsAgentClientOptions {
  /** Controller addresses (`host:port`), tried in turn until one leads. */
  readonly controllers: readonly string[];
  /** This agent's name, sent as `sluice-agent` metadata so a reconnect is the same agent. */
  readonly agent: string;
  readonly domain: string;
  readonly bucket: Record<string, string>;
  readonly fallback: LeaseFallback;
  /** @default fallback */
  readonly initial?: LeaseFallback;
  /**
   * How often usage is reported, until a controller's stream says its own period
   * (`sluice-refresh-ms`): then the agent reports at the controller's, logs
   * `settings_mismatch` if they differ, and windows its leases by it. @default 1000
   */
  readonly refreshMs?: number;
  /** The enforcement window. @default refreshMs */
  readonly windowMs?: number;
  /**
   * The longest a lease is held once received, in ms: an assignment's TTL above it is
   * cut to it (a shorter hold is always safe: the controller's ledger counts the full
   * TTL). @default the assignment's TTL
   */
  readonly maxTtlMs?: number;
  /**
   * The bearer token sent as `authorization: Bearer <token>` on each stream, read at each
   * connect (so a rotated token is used from the next stream on). @default none
   */
  readonly authToken?: () => string;
  /** How to reach the controllers. @default plaintext */
  readonly credentials?: grpc.ChannelCredentials;
  /** Channel options (e.g. `grpc.ssl_target_name_override`). @default none */
  readonly channelOptions?: grpc.ChannelOptions;
  /** Wait before trying the next controller. @default 200 */
  readonly reconnectMs?: number;
  readonly clock?: Clock;
  /** Lease applied or refused, stream changes. @default ignore */
  readonly log?: (event: Record<string, unknown>) => void;
}

/**
 * A Sluice agent on the RLQS stream: it keeps a {@link QuotaAgent} for one bucket, reports
 * its usage every refresh, and applies each assignment as a lease under the fencing token
 * its stream was opened with (`sluice-fencing-token` initial metadata). An assignment on a
 * stream whose token is below one already seen is refused. Decisions (`take`) never wait
 * for the network.
 */
export class RlqsAgentClient {
  readonly agent: QuotaAgent;
  readonly #o: RlqsAgentClientOptions;
  readonly #clock: Clock;
  readonly #id: WireBucketId;
  readonly #key: string;
  /** The stream reports go to: the controller that leads, or the one being tried. */
  #main: Link | undefined;
  /** A stream to another controller, opened while the main one is silent. */
  #probe: Link | undefined;
  /** When the main stream last said anything (its metadata, an assignment), or opened. */
  #heardAtMs = 0;
  #silence: NodeJS.Timeout | undefined;
  #target = 0;
  #version = 0;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  #connectedTo: string | undefined;
  #periodMs: number;
  #controllerRefreshMs: number | undefined;
  /** Signatures of the terms streams were accepted under (kept from the highest seen up). */
  readonly #signatures = new Map<number, string>();
  /** Streams refused in a row (duplicate name, credentials): the reconnect backs off. */
  #refusals = 0;

  constructor(options: RlqsAgentClientOptions) {
    this.#o = options;
    this.#clock = options.clock ?? systemClock;
    this.#id = { bucket: { ...options.bucket } };
    this.#key = bucketKey(this.#id);
    this.#periodMs = options.refreshMs ?? 1_000;
    this.agent = this.#newAgent();
  }

  #newAgent(): QuotaAgent {
    const o = this.#o;
    return new QuotaAgent(
      {
        agent: o.agent,
        bucket: this.#key,
        fallback: o.fallback,
        ...(o.initial === undefined ? {} : { initial: o.initial }),
        windowMs: o.windowMs ?? o.refreshMs ?? 1_000,
      },
      this.#clock.nowMs(),
    );
  }

  /** Connects and starts reporting. */
  start(): void {
    this.#open('main');
    this.#timer = setInterval(() => this.#report(), this.#periodMs);
  }

  /** The report period in use, in ms: the controller's once a stream said it. */
  get refreshMs(): number {
    return this.#periodMs;
  }

  /** The refresh period the controller said, when it differs from this agent's setting. */
  get refreshMismatch(): { agentMs: number; controllerMs: number } | undefined {
    const own = this.#o.refreshMs ?? 1_000;
    const c = this.#controllerRefreshMs;
    return c === undefined || c === own ? undefined : { agentMs: own, controllerMs: c };
  }

  /**
   * Follows the controller's period: its rounds and its idle rule (no leases after 2R
   * without a report) assume it, so an agent reporting less often would be idle between
   * reports and hold no lease.
   */
  #follow(controllerMs: number): void {
    if (!(controllerMs > 0) || controllerMs === this.#controllerRefreshMs) return;
    this.#controllerRefreshMs = controllerMs;
    const own = this.#o.refreshMs ?? 1_000;
    if (controllerMs !== own)
      this.#o.log?.({
        event: 'settings_mismatch',
        setting: 'refresh-ms',
        agentMs: own,
        controllerMs,
      });
    if (controllerMs === this.#periodMs) return;
    this.#periodMs = controllerMs;
    if (this.#timer !== undefined && !this.#closed) {
      clearInterval(this.#timer);
      this.#timer = setInterval(() => this.#report(), controllerMs);
    }
  }

  /** Decides one request locally; `denied` once closed (its leases were given back). */
  take(cost = 1): TakeResult {
    if (this.#closed) return 'denied';
    return this.agent.take(this.#clock.nowMs(), cost);
  }

  /** Whether {@link close} was called: the agent's leases are no longer its own. */
  get closed(): boolean {
    return this.#closed;
  }

  /** The controller whose stream is open (it sent its fencing token), if any. */
  get connectedTo(): string | undefined {
    return this.#connectedTo;
  }

  /**
   * How long the main stream may stay silent before the agent looks for another leader:
   * R + δ (δ = R / 2). A leader sends every subscribed bucket an assignment each round, R
   * apart; one silent longer is stopped or cut off (a SIGSTOP, a frozen VM: its socket
   * stays open, so the stream never fails), or skipped a round. See
   * `silenceTimeoutMs` in bounds.ts.
   */
  get silenceMs(): number {
    return silenceTimeoutMs(this.#periodMs);
  }

  /**
   * Stops reporting and leaves: the usage since the last report is sent, then the stream
   * is half-closed, and the channel closed once the controller ends it (or after
   * `graceMs`). A Sluice controller then counts this agent's leases only to the end of
   * the current window (`QuotaController.leave`), so nothing may decide from `agent` after
   * this call: {@link take} denies.
   */
  async close(graceMs = 1_000): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#timer);
    clearTimeout(this.#silence);
    if (this.#probe !== undefined) this.#drop(this.#probe);
    const main = this.#main;
    const call = main?.call;
    if (call !== undefined && this.#connectedTo !== undefined) {
      call.write(this.#usage(this.agent.report(this.#clock.nowMs())));
      call.end();
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, graceMs);
        timer.unref();
        call.once('status', () => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    if (main !== undefined) this.#drop(main);
    this.#connectedTo = undefined;
  }

  /**
   * Opens a stream to the next controller in turn: as the `main` one (reports go to it),
   * or as a `probe` while the main one is silent, skipping the main one's controller. A
   * probe that a leader accepts (it sends its token) becomes the main stream, and the
   * silent one is dropped; the agent keeps its lease throughout, and applies leases from
   * either by fencing token.
   */
  #open(role: 'main' | 'probe'): void {
    if (this.#closed) return;
    const n = this.#o.controllers.length;
    let index = this.#target++ % n;
    if (role === 'probe') {
      if (n < 2 || this.#main === undefined) return;
      if (this.#o.controllers[index] === this.#main.target) index = this.#target++ % n;
    }
    const target = this.#o.controllers[index]!;
    const Client = grpc.makeGenericClientConstructor(RLQS_SERVICE, 'RateLimitQuotaService');
    const client = new Client(
      target,
      this.#o.credentials ?? grpc.credentials.createInsecure(),
      this.#o.channelOptions ?? {},
    );
    const md = new grpc.Metadata();
    md.set(AGENT_METADATA, this.#o.agent);
    if (this.#o.authToken !== undefined) md.set('authorization', `Bearer ${this.#o.authToken()}`);
    md.set(REFRESH_METADATA, String(this.#o.refreshMs ?? 1_000));
    // A leader below this term (its Redis lost the counter) then takes a higher one,
    // rather than be refused as stale by this agent for as long as it runs.
    const seen = this.agent.highestToken;
    if (Number.isFinite(seen)) {
      md.set(SEEN_TOKEN_METADATA, String(seen));
      for (const t of this.#signatures.keys()) if (t < seen) this.#signatures.delete(t);
      const sig = this.#signatures.get(seen);
      if (sig !== undefined) md.set(SEEN_SIGNATURE_METADATA, sig);
    }
    const call = (
      client as unknown as {
        StreamRateLimitQuotas(
          m: grpc.Metadata,
        ): grpc.ClientDuplexStream<WireUsageReports, WireQuotaResponse>;
      }
    ).StreamRateLimitQuotas(md);
    const link: Link = { call, client, target, token: undefined, ended: false };
    if (role === 'main') {
      this.#main = link;
      this.#heard(link);
    } else this.#probe = link;
    call.on('metadata', (m: grpc.Metadata) => {
      // A refusal may come with (empty) initial metadata: only a leader's token is an accept.
      if (m.get(TOKEN_METADATA).length === 0) return;
      link.token = Number(m.get(TOKEN_METADATA)[0]);
      const sig = m.get(TOKEN_SIGNATURE_METADATA)[0];
      if (typeof sig === 'string') this.#signatures.set(link.token, sig);
      this.#follow(Number(m.get(REFRESH_METADATA)[0]));
      this.#refusals = 0;
      if (link.ended) return;
      if (this.#probe === link) this.#promote(link);
      if (this.#main === link) this.#connectedTo = target;
      this.#heard(link);
      this.#o.log?.({ event: 'stream', target, token: link.token });
    });
    call.on('data', (r: WireQuotaResponse) => {
      if (link.ended) return;
      this.#heard(link);
      if (link.token !== undefined) this.#apply(r, link.token);
    });
    const ended = (error?: grpc.ServiceError) => this.#ended(link, error);
    call.on('error', ended);
    call.on('end', () => ended());
    if (role === 'main') {
      // Subscribe at once: the first report of a bucket asks for its assignment.
      call.write(this.#usage(this.agent.report(this.#clock.nowMs())));
    } else {
      // A probe subscribes without usage: that stays for the stream that carries reports
      // (a controller takes demand from a stream's second report on).
      call.write(this.#usage({ allowed: 0, denied: 0, elapsedMs: 1 }));
    }
  }

  /** The probe was accepted by a leader: it carries the reports from now on. */
  #promote(link: Link): void {
    const old = this.#main;
    this.#probe = undefined;
    this.#main = link;
    if (old !== undefined) this.#drop(old);
    if (link.token !== undefined) this.#connectedTo = link.target;
    this.#heard(link);
  }

  /** Ends a stream this agent no longer wants; its end then changes nothing. */
  #drop(link: Link): void {
    link.ended = true;
    if (this.#main === link) {
      this.#main = undefined;
      this.#connectedTo = undefined;
    }
    if (this.#probe === link) this.#probe = undefined;
    link.call.cancel();
    link.client.close();
  }

  /**
   * The main stream said something: (re)arm the silence timer. When it fires, the agent
   * opens a probe to the next controller; a leader that is only slow loses nothing (the
   * main stream stays, and the probe, refused by a follower, stops once it speaks again).
   */
  #heard(link: Link): void {
    if (this.#main !== link || this.#closed) return;
    this.#heardAtMs = this.#clock.nowMs();
    if (this.#probe !== undefined) this.#drop(this.#probe);
    clearTimeout(this.#silence);
    this.#silence = setTimeout(() => this.#silent(), this.silenceMs);
    this.#silence.unref();
  }

  #silent(): void {
    if (this.#closed || this.#probe !== undefined || this.#main === undefined) return;
    // A timer may fire a little before the clock says it is due: wait the rest.
    const leftMs = this.#heardAtMs + this.silenceMs - this.#clock.nowMs();
    if (leftMs > 0) {
      clearTimeout(this.#silence);
      this.#silence = setTimeout(() => this.#silent(), leftMs + 1);
      this.#silence.unref();
      return;
    }
    this.#o.log?.({ event: 'silent', target: this.#main.target, silentMs: this.silenceMs });
    this.#open('probe');
  }

  #ended(link: Link, error?: grpc.ServiceError): void {
    if (link.ended || this.#closed) return;
    link.ended = true;
    link.client.close();
    const refused = error !== undefined && REFUSALS.has(error.code);
    if (error !== undefined)
      this.#o.log?.({
        event: refused ? 'stream_refused' : 'stream_error',
        target: link.target,
        code: grpc.status[error.code],
        details: error.details,
      });
    const waitMs = this.#o.reconnectMs ?? 200;
    if (this.#probe === link) {
      // Refused (a follower) or failed: try the next one while the main one stays silent.
      this.#probe = undefined;
      setTimeout(() => this.#silent(), waitMs).unref();
      return;
    }
    if (this.#main !== link) return;
    this.#main = undefined;
    this.#connectedTo = undefined;
    // A refusal (duplicate name, credentials) does not go away by retrying at once:
    // back off to 5 s, so a misconfigured agent costs the controller little.
    this.#refusals = refused ? this.#refusals + 1 : 0;
    const backoffMs = refused ? Math.min(5_000, waitMs * 2 ** this.#refusals) : waitMs;
    setTimeout(() => {
      // A probe open meanwhile (to another controller) becomes the main stream.
      if (this.#main !== undefined || this.#closed) return;
      const probe = this.#probe;
      if (probe !== undefined) return this.#promote(probe);
      this.#open('main');
    }, backoffMs).unref();
  }

  #usage(u: { allowed: number; denied: number; elapsedMs: number }): WireUsageReports {
    return {
      domain: this.#o.domain,
      bucketQuotaUsages: [
        {
          bucketId: this.#id,
          timeElapsed: duration(Math.max(1, u.elapsedMs)),
          numRequestsAllowed: Math.round(u.allowed),
          numRequestsDenied: Math.round(u.denied),
        },
      ],
    };
  }

  #report(): void {
    const usage = this.agent.report(this.#clock.nowMs());
    // Usage that cannot be sent is dropped, as Envoy does; the controller's estimate
    // starts again from the next report.
    this.#main?.call.write(this.#usage(usage));
  }

  #apply(r: WireQuotaResponse, token: number): void {
    const nowMs = this.#clock.nowMs();
    for (const action of r.bucketAction) {
      if (bucketKey(action.bucketId) !== this.#key) continue;
      if ('abandonAction' in action && action.abandonAction) {
        this.#o.log?.({ event: 'abandoned', token });
        continue;
      }
      if (!('quotaAssignmentAction' in action) || !action.quotaAssignmentAction) continue;
      const a = action.quotaAssignmentAction;
      const windowMs = this.#o.windowMs ?? this.#periodMs;
      const rate = strategyRate(a.rateLimitStrategy, windowMs);
      if (rate === undefined) {
        this.#o.log?.({ event: 'refused', reason: 'unbounded strategy', token });
        continue;
      }
      const outcome = this.agent.apply(
        {
          agent: this.#o.agent,
          bucket: this.#key,
          rate: rate.rate,
          burst: rate.burst,
          windowMs: rate.windowMs,
          ttlMs: Math.min(durationMs(a.assignmentTimeToLive), this.#o.maxTtlMs ?? Infinity),
          // Assignments on one stream arrive in order; the token orders streams.
          version: ++this.#version,
          fencingToken: token,
          issuedAtMs: nowMs,
        },
        nowMs,
      );
      this.#o.log?.({ event: 'lease', outcome, token, rate: rate.rate, atMs: nowMs });
    }
  }
}
