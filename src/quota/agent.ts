import { PolicyError } from '../core/errors.js';
import type { Lease, LeaseFallback, UsageReport } from './lease.js';

/**
 * How far back an agent keeps its units per window of R, at least: the longest fill RLQS
 * sends (60 s), so that a lease over a longer window counts what its window already holds.
 */
const HISTORY_MS = 60_000;

/** Options of a {@link QuotaAgent}. */
export interface AgentOptions {
  /** This agent's stable id (unique among the controller's agents). */
  readonly agent: string;
  readonly bucket: string;
  /** What to do once a lease has expired (and before the first, unless `initial` is set). */
  readonly fallback: LeaseFallback;
  /**
   * What to do before the first lease arrives. A controller that is up answers an agent's
   * first report with a lease at once, so this covers only a start while it is
   * unreachable. @default fallback
   */
  readonly initial?: LeaseFallback;
  /**
   * The window of the fallback's static share (the controller's refresh R). Unset, the
   * last lease's window, or 1000 before any lease.
   */
  readonly windowMs?: number;
  /** Sent with every report. @default 0 */
  readonly priority?: number;
  /** Sent with every report. @default 1 */
  readonly weight?: number;
}

/** Why {@link QuotaAgent.apply} refused a lease (or `applied`). */
export type ApplyOutcome = 'applied' | 'stale-leader' | 'stale-version' | 'not-mine';

/** Which rule the agent enforces at an instant. */
export type AgentMode = 'lease' | 'fallback';

/** A decision of {@link QuotaAgent.take}: `store` when the fallback says to ask the global store. */
export type TakeResult = 'allowed' | 'denied' | 'store';

/**
 * The agent's core (docs/design.md, "Quota leases"): it enforces its lease in process, with no
 * remote call per request, and counts usage for its next report. Pure apart from its own
 * fields; every method takes `nowMs`.
 *
 * A lease admits at most `burst` units in each window of `windowMs` aligned to multiples
 * of `windowMs`. When a lease replaces another mid-window, units already admitted in that
 * window still count, so a window never admits more than the larger of the two. Leases
 * are ordered by (fencing token, version): one from a leader older than any seen, or not
 * newer than the one held, is refused, so a deposed leader cannot undo its successor.
 */
export class QuotaAgent {
  readonly options: AgentOptions;
  #lease: Lease | undefined;
  #expiresAtMs = 0;
  #highestToken = -Infinity;
  /** The window units are counted in: its start and length (ms). */
  #windowStart = Number.NaN;
  #windowLength = Number.NaN;
  #usedInWindow = 0;
  /** The window of R (`options.windowMs`) a lease over a longer fill is paced in. */
  #paceIndex = Number.NaN;
  #usedInPace = 0;
  /** Earlier windows of R with units used in them, oldest first, back to {@link #horizonMs}. */
  #pastPaces: { index: number; used: number }[] = [];
  /** How far back units are kept per window of R: the longest window seen, at least 60 s. */
  #horizonMs = HISTORY_MS;
  #allowed = 0;
  #denied = 0;
  #lastReportMs: number;
  #refused = 0;

  constructor(options: AgentOptions, nowMs: number) {
    for (const [path, f] of [
      ['fallback', options.fallback],
      ['initial', options.initial],
    ] as const) {
      if (f?.kind === 'static' && !(Number.isFinite(f.rate) && f.rate >= 0)) {
        throw new PolicyError(
          'SLUICE_ERR_QUOTA_CONFIG_INVALID',
          `agent ${options.agent}: ${path}.rate must be a number ≥ 0, got ${String(f.rate)}`,
          { issues: [{ path: `${path}.rate`, message: 'must be a number ≥ 0' }] },
        );
      }
    }
    this.options = options;
    this.#lastReportMs = nowMs;
  }

  /** Leases refused so far (stale leader or version). */
  get refused(): number {
    return this.#refused;
  }

  /** The highest fencing token seen. */
  get highestToken(): number {
    return this.#highestToken;
  }

  /** The lease in force at `nowMs`, if any. */
  lease(nowMs: number): Lease | undefined {
    return this.#lease !== undefined && nowMs < this.#expiresAtMs ? this.#lease : undefined;
  }

  /** When the held lease stops holding (ms); 0 with none. */
  get expiresAtMs(): number {
    return this.#expiresAtMs;
  }

  mode(nowMs: number): AgentMode {
    return this.lease(nowMs) === undefined ? 'fallback' : 'lease';
  }

  /** Applies a lease received at `nowMs`, unless it is stale or for someone else. */
  apply(lease: Lease, nowMs: number): ApplyOutcome {
    if (lease.agent !== this.options.agent || lease.bucket !== this.options.bucket)
      return 'not-mine';
    if (lease.fencingToken < this.#highestToken) {
      this.#refused++;
      return 'stale-leader';
    }
    const held = this.#lease;
    if (
      held !== undefined &&
      lease.fencingToken === held.fencingToken &&
      lease.version <= held.version
    ) {
      this.#refused++;
      return 'stale-version';
    }
    this.#highestToken = lease.fencingToken;
    this.#lease = lease;
    this.#horizonMs = Math.max(this.#horizonMs, lease.windowMs);
    this.#expiresAtMs = nowMs + lease.ttlMs;
    return 'applied';
  }

  /** Units the rule in force lets through in the current window, in all. */
  #allowance(nowMs: number): number | undefined {
    const lease = this.lease(nowMs);
    if (lease !== undefined) return lease.burst;
    const f =
      this.#lease === undefined
        ? (this.options.initial ?? this.options.fallback)
        : this.options.fallback;
    if (f.kind === 'deny') return 0;
    if (f.kind === 'store') return undefined;
    return (f.rate * this.#windowMs(nowMs)) / 1000;
  }

  /**
   * A lease's own window while it holds. On the fallback, the agent's window (the
   * controller's R) when set: a small share is sent as whole tokens per a longer fill
   * (5 per 11 s), and a static fallback over that window would admit 11 s of its rate
   * at once, not the per-R amount `sluice explain` bounds.
   */
  #windowMs(nowMs: number): number {
    const held = this.lease(nowMs);
    if (held !== undefined) return held.windowMs;
    return this.options.windowMs ?? this.#lease?.windowMs ?? 1000;
  }

  #roll(nowMs: number): void {
    const r = this.#paceMs();
    const pace = Math.floor(nowMs / r);
    if (pace !== this.#paceIndex) {
      if (this.#usedInPace > 0)
        this.#pastPaces.push({ index: this.#paceIndex, used: this.#usedInPace });
      const oldest = Math.floor((nowMs - this.#horizonMs) / r);
      while ((this.#pastPaces[0]?.index ?? oldest) < oldest) this.#pastPaces.shift();
      this.#paceIndex = pace;
      this.#usedInPace = 0;
    }
    const length = this.#windowMs(nowMs);
    const start = Math.floor(nowMs / length) * length;
    if (start === this.#windowStart && length === this.#windowLength) return;
    // A rule over another window (a lease over a longer fill, the fallback's R) starts
    // a window that may begin before the last one did, and units used in it still count
    // (else 50 on the fallback, then 5 of a 5-per-11-s lease, in one second): every unit
    // of each window of R that meets it, a few more than it holds if one straddles its
    // start, never fewer. A window of the same length starts empty.
    this.#usedInWindow = length === this.#windowLength ? 0 : this.#usedSince(start);
    this.#windowStart = start;
    this.#windowLength = length;
  }

  /** Units used in the windows of R that end after `startMs`, this one included. */
  #usedSince(startMs: number): number {
    const r = this.#paceMs();
    let used = this.#usedInPace;
    for (const p of this.#pastPaces) if ((p.index + 1) * r > startMs) used += p.used;
    return used;
  }

  /** The agent's own window (the controller's R), which a longer lease is paced in. */
  #paceMs(): number {
    return this.options.windowMs ?? 1000;
  }

  /**
   * Units the rule allows in the current window of R beyond those used in it: a lease
   * over a fill longer than R (9 per 5 s) spreads its units, at most ⌈rate × R⌉ per R, so
   * that it never admits 5 s of its rate in one window of R beside agents that spend
   * their whole share in it (4 × 99 + 9 = 405 of 400). `Infinity` otherwise.
   */
  #paceLeft(nowMs: number): number {
    const lease = this.lease(nowMs);
    const r = this.#paceMs();
    if (lease === undefined || lease.windowMs <= r) return Infinity;
    return Math.ceil((lease.rate * r) / 1000 - 1e-9) - this.#usedInPace;
  }

  /** Decides one request of `cost` units at `nowMs`. */
  take(nowMs: number, cost: number): TakeResult {
    this.#roll(nowMs);
    const allowance = this.#allowance(nowMs);
    if (allowance === undefined) return 'store';
    if (this.#usedInWindow + cost <= allowance + 1e-9 && cost <= this.#paceLeft(nowMs) + 1e-9) {
      this.#usedInWindow += cost;
      this.#usedInPace += cost;
      this.#allowed += cost;
      return 'allowed';
    }
    this.#denied += cost;
    return 'denied';
  }

  /**
   * Admits as much of `units` (a divisible amount, for fluid simulation) as the rule in
   * force allows in the current window; returns the amount admitted, or `undefined` when
   * the fallback says to ask the global store.
   */
  admit(nowMs: number, units: number): number | undefined {
    this.#roll(nowMs);
    const allowance = this.#allowance(nowMs);
    if (allowance === undefined) return undefined;
    const left = Math.min(allowance - this.#usedInWindow, this.#paceLeft(nowMs));
    const admitted = Math.max(0, Math.min(units, left));
    this.#usedInWindow += admitted;
    this.#usedInPace += admitted;
    this.#allowed += admitted;
    this.#denied += units - admitted;
    return admitted;
  }

  /**
   * Gives back `cost` units taken by {@link take} at `nowMs` (the check they were for was
   * denied by another policy); units of a window already past stay spent.
   */
  refund(nowMs: number, cost: number): void {
    this.#roll(nowMs);
    const back = Math.min(cost, this.#usedInWindow);
    this.#usedInWindow -= back;
    this.#usedInPace -= Math.min(back, this.#usedInPace);
    this.#allowed = Math.max(0, this.#allowed - cost);
  }

  /**
   * The current window at `nowMs`: the units the rule in force allows in it (`undefined`
   * under the `store` fallback), those used, and ms until it ends. A paced lease (a fill
   * longer than R) ends the window a decision is counted in at the end of the window of
   * R: more may be admitted from then on, while its fill lasts.
   */
  window(nowMs: number): { allowance: number | undefined; used: number; resetAfterMs: number } {
    this.#roll(nowMs);
    const w = this.#windowMs(nowMs);
    const r = this.#paceMs();
    const paced = Number.isFinite(this.#paceLeft(nowMs));
    return {
      allowance: this.#allowance(nowMs),
      used: this.#usedInWindow,
      resetAfterMs: paced ? (this.#paceIndex + 1) * r - nowMs : this.#windowStart + w - nowMs,
    };
  }

  /** Records a decision made elsewhere (the global store, under the `store` fallback). */
  count(allowed: number, denied: number): void {
    this.#allowed += allowed;
    this.#denied += denied;
  }

  /** The usage since the previous report, and resets it. */
  report(nowMs: number): UsageReport {
    const lease = this.lease(nowMs);
    const r: UsageReport = {
      agent: this.options.agent,
      bucket: this.options.bucket,
      allowed: this.#allowed,
      denied: this.#denied,
      elapsedMs: Math.max(0, nowMs - this.#lastReportMs),
      priority: this.options.priority ?? 0,
      weight: this.options.weight ?? 1,
      ...(lease === undefined ? {} : { heldVersion: lease.version }),
    };
    this.#allowed = 0;
    this.#denied = 0;
    this.#lastReportMs = nowMs;
    return r;
  }
}
