import { randomUUID } from 'node:crypto';
import { algorithmOf } from '../algorithms/index.js';
import { maxDebtOf } from '../config/settle-settings.js';
import type { Decision } from '../core/decision.js';
import type { DescriptorInput } from '../core/descriptor.js';
import { PolicyError } from '../core/errors.js';
import type { Policy } from '../core/policy.js';
import type { Status } from '../core/status.js';
import type { Store, StoreSettleRequest } from '../stores/store.js';
import type { Stage } from './stage.js';
import { validateCost, validateRequestId, validateTimeout } from './check-input.js';
import type { CheckResult } from './check-result.js';
import type { CheckOptions } from './limiter-options.js';
import { readReservationId, reservationId, type ReservationTicket } from './reservation-id.js';
import { settleThrough, type StoreGateway } from './store-gateway.js';

/** Options of `Limiter.reserve`. */
export interface ReserveOptions {
  /** The estimate: units reserved in every matched policy, as `check`'s `cost`. Required. */
  readonly cost: number;
  /**
   * How long the reservation may be settled, in ms; after that it stays charged at its
   * estimate. A positive number up to one day. @default 60_000
   */
  readonly ttlMs?: number;
  /**
   * Makes the reserve idempotent (as `check`'s `requestId`) and is the id its settle is
   * deduplicated under: a retried reserve gets a reservation that settles once. Up to 128
   * characters. @default a random UUID (the reserve itself is then not retried)
   */
  readonly requestId?: string;
  /** As `check`'s `timeoutMs`. */
  readonly timeoutMs?: number;
  /** As `check`'s `signal`. */
  readonly signal?: AbortSignal;
}

/** Options of `Limiter.settle`. */
export interface SettleOptions {
  /** The longest wait for the store, in ms. @default the longest `timeout` of the reservation's policies */
  readonly timeoutMs?: number;
  /** Stops waiting for the store (the settle may still be applied: settle again with the id). */
  readonly signal?: AbortSignal;
}

/** What a settle did. */
export interface SettleResult {
  /** False when a settle of this reservation had already been applied: nothing was done again. */
  readonly applied: boolean;
  /**
   * Units of the excess that were not charged because a policy's `settle.maxDebt` was
   * reached: the largest over the reservation's buckets. 0 when all was charged.
   */
  readonly cappedUnits: number;
  /** Each settled bucket as left (a cost-0 read), path `store`, in reservation order. */
  readonly decisions: readonly Decision[];
}

/**
 * A reserve's answer: the decision of a check at the estimate, and the handle to settle
 * it. Not allowed: nothing was charged, and settling does nothing.
 */
export interface Reservation {
  /** Whether the call may proceed: the estimate was taken (as `CheckResult.allowed`). */
  readonly allowed: boolean;
  /** As `CheckResult.status`. */
  readonly status: Status;
  /** When denied, how long until the estimate would fit (as `CheckResult.retryAfterMs`); else 0. */
  readonly retryAfterMs: number;
  /** As `CheckResult.decision`. */
  readonly decision: Decision | undefined;
  /** As `CheckResult.decisions`. */
  readonly decisions: readonly Decision[];
  /**
   * Settles from any process (`Limiter.settle(id, actual)`): it carries the buckets, the
   * estimate and the reservation's times.
   */
  readonly id: string;
  /** `Limiter.settle(id, actual)`: charge what the call actually used. */
  settle(actual: number, options?: SettleOptions): Promise<SettleResult>;
  /** `settle(0)`: the call did not happen; the whole estimate comes back. */
  cancel(options?: SettleOptions): Promise<SettleResult>;
}

/** What reservations need of the limiter they belong to. */
export interface ReservationHost {
  readonly store: Store;
  readonly gateway: StoreGateway;
  /** The pipeline's stages: told of each applied settle (`Stage.reservationSettled`). */
  readonly stages: readonly Stage[];
  /** The policies in force, by name. */
  policy(name: string): Policy | undefined;
  checkAt(nowMs: number, descriptor: DescriptorInput, options: CheckOptions): Promise<CheckResult>;
  nowMs(): number;
}

/** @default ttlMs of a reservation. */
export const DEFAULT_RESERVATION_TTL_MS = 60_000;
const MAX_RESERVATION_TTL_MS = 86_400_000;
/**
 * How long after a reservation's ttl its settle's once-only marker is still kept: the
 * settling processes' clocks (which judge the ttl) may run behind the store's.
 */
const SETTLE_MARKER_MARGIN_MS = 60_000;

/**
 * Reserve and settle (docs/costs.md): a reserve is a check at the estimate, through the
 * same pipeline; a settle is one store call per bucket slot through `Store.settle`, once
 * per reservation id.
 */
export class Reservations {
  readonly #host: ReservationHost;

  constructor(host: ReservationHost) {
    this.#host = host;
  }

  async reserveAt(
    nowMs: number,
    descriptor: DescriptorInput,
    options: ReserveOptions,
  ): Promise<Reservation> {
    this.#supported();
    validateCost(options.cost);
    const ttlMs = options.ttlMs ?? DEFAULT_RESERVATION_TTL_MS;
    if (!(ttlMs > 0 && ttlMs <= MAX_RESERVATION_TTL_MS)) {
      throw new PolicyError(
        'SLUICE_ERR_RESERVATION_INVALID',
        `ttlMs must be a positive number of ms up to ${MAX_RESERVATION_TTL_MS}, got ${String(ttlMs)}`,
      );
    }
    const nonce =
      options.requestId === undefined ? randomUUID() : validateRequestId(options.requestId);
    const buckets: [string, string][] = [];
    const shadows: [string, string][] = [];
    const result = await this.#host.checkAt(nowMs, descriptor, {
      cost: options.cost,
      ...(options.requestId === undefined ? {} : { requestId: options.requestId }),
      ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      // Only what a store charged is settled: a fail-open or stale admission took nothing
      // there, and a lease's units are not the store's.
      onDecision: (d, key) => {
        if (!d.allowed) return;
        if (d.path === 'store' || d.path === 'batch') buckets.push([d.policy, key]);
        else if (d.path === 'shadow') shadows.push([d.policy, key]);
      },
    });
    // A shadow policy's admission was charged too, unless the store failed: a batch fails
    // as a whole, so then every decision came by a failure mode.
    const failed = result.decisions.some(
      (d) => d.path === 'fail-open' || d.path === 'fail-closed' || d.path === 'stale',
    );
    if (!failed) buckets.push(...shadows);
    const ticket: ReservationTicket = {
      nonce,
      reservedAtMs: nowMs,
      expiresAtMs: nowMs + ttlMs,
      estimate: options.cost,
      // A denied check charged nothing (all-or-nothing).
      buckets: result.allowed ? buckets : [],
    };
    const id = reservationId(ticket);
    const settle = (actual: number, o?: SettleOptions) =>
      this.settleAt(this.#host.nowMs(), id, actual, o);
    return {
      allowed: result.allowed,
      status: result.status,
      retryAfterMs: result.retryAfterMs,
      decision: result.decision,
      decisions: result.decisions,
      id,
      settle,
      cancel: (o?: SettleOptions) => settle(0, o),
    };
  }

  /**
   * Settles reservation `id` at `actual` units, at `nowMs`. Rejects with a `PolicyError`
   * for a bad id or actual, or one past its ttl (`SLUICE_ERR_RESERVATION_EXPIRED`), and
   * with the `StoreError` of a store that failed or was late: its outcome is then
   * unknown, and settling again with the same id applies it at most once.
   */
  async settleAt(
    nowMs: number,
    id: string,
    actual: number,
    options: SettleOptions = {},
  ): Promise<SettleResult> {
    this.#supported();
    const ticket = readReservationId(id);
    validateCost(actual);
    validateTimeout(options.timeoutMs);
    if (nowMs > ticket.expiresAtMs) {
      throw new PolicyError(
        'SLUICE_ERR_RESERVATION_EXPIRED',
        `the reservation expired ${nowMs - ticket.expiresAtMs}ms ago: it stays charged at its estimate of ${ticket.estimate}`,
      );
    }
    if (ticket.buckets.length === 0) return { applied: false, cappedUnits: 0, decisions: [] };
    const policies = ticket.buckets.map(([name]) => {
      const p = this.#host.policy(name);
      if (p === undefined) {
        throw new PolicyError(
          'SLUICE_ERR_RESERVATION_INVALID',
          `the reservation names policy "${name}", which is no longer loaded`,
        );
      }
      return p;
    });
    const batch: StoreSettleRequest[] = ticket.buckets.map(([, key], i) => {
      const p = policies[i]!;
      return {
        key,
        algorithm: algorithmOf(p.algorithm),
        params: p.params,
        cost: ticket.estimate,
        enforce: !p.shadow,
        actual,
        maxDebt: maxDebtOf(p),
      };
    });
    const timeoutMs = options.timeoutMs ?? Math.max(...policies.map((p) => p.timeoutMs));
    const results = await settleThrough(
      this.#host.gateway,
      this.#host.store,
      batch,
      {
        nowMs,
        reservedAtMs: ticket.reservedAtMs,
        requestId: ticket.nonce,
        keepMs: ticket.expiresAtMs - nowMs + SETTLE_MARKER_MARGIN_MS,
        ...(options.signal === undefined ? {} : { signal: options.signal }),
      },
      timeoutMs,
    )!;
    let applied = false;
    let cappedUnits = 0;
    const decisions: Decision[] = [];
    for (let i = 0; i < results.length; i++) {
      const r = results[i]!;
      if (!r.ok) throw r.error;
      if (!r.repeated) {
        applied = true;
        this.#tellStages(policies[i]!, ticket.buckets[i]![1], ticket.estimate - actual, nowMs);
      }
      cappedUnits = Math.max(cappedUnits, r.cappedUnits);
      decisions.push({ ...r.decision, policy: ticket.buckets[i]![0], path: 'store' });
    }
    return { applied, cappedUnits, decisions };
  }

  /** Tells the stages that apply to `policy` what a settle did to its bucket `key`. */
  #tellStages(policy: Policy, key: string, units: number, nowMs: number): void {
    if (units === 0) return;
    for (const stage of this.#host.stages) {
      if (stage.reservationSettled === undefined || !stage.appliesTo(policy)) continue;
      try {
        stage.reservationSettled(policy, key, units, nowMs);
      } catch {
        // A stage's bookkeeping never fails a settle that the store applied.
      }
    }
  }

  #supported(): void {
    if (this.#host.store.settle === undefined) {
      throw new PolicyError(
        'SLUICE_ERR_RESERVE_UNSUPPORTED',
        "the limiter's store cannot settle (it has no settle method); reserve needs one that can (MemoryStore, RedisStore)",
      );
    }
  }
}
