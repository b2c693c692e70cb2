import { allocate, type Claim } from './allocation.js';
import {
  controllerConfig,
  type ControllerConfig,
  type ControllerOptions,
} from './controller-config.js';
import type { Lease, UsageReport } from './lease.js';

/**
 * The quota controller's core (docs/design.md, "Quota leases"): pure state plus the two events
 * that change it, a usage report and a refresh round, each given its `nowMs`. It does no
 * I/O: the process (`controller-process.ts`) and the simulation feed it and carry its
 * leases.
 *
 * The invariant is a ledger, as in Doorman: every lease counts against its budget from
 * its issue until issue + TTL + margin, because nothing proves the agent received a
 * later, smaller one. An agent's report names the lease it enforces (`heldVersion`);
 * only then are its older leases forgotten. A round computes weighted max-min targets
 * from demand, sends cuts at once, and raises only from what the ledger leaves free, so
 * the leases that can be in force at any instant never sum above the budget.
 */

// Raises come from a hair under the budget, so rounding never lifts the ledger above it.
const SAFE = 1 - 1e-9;

/** A lease the ledger still counts. */
export interface Grant {
  readonly rate: number;
  readonly version: number;
  readonly deadlineMs: number;
}

/** What the controller knows of one agent on one bucket (persisted by the process). */
export interface AgentRecord {
  readonly agent: string;
  readonly bucket: string;
  /** Units per second, from the last report. */
  demand: number;
  weight: number;
  priority: number;
  lastReportMs: number;
  /** Last report with any usage; for abandonment. */
  lastActiveMs: number;
  /** Last lease version issued to it. */
  version: number;
  /** Leases still counted, oldest first. */
  grants: Grant[];
  /** Set once abandoned; the record goes when its grants have run out. */
  abandoned: boolean;
}

/** The controller's whole state: what a leader persists and a successor loads. */
export interface ControllerState {
  readonly records: readonly AgentRecord[];
  /**
   * The last lease version issued, to anyone. Versions come from this one counter, so an
   * agent forgotten and met again never gets a version it has already seen.
   */
  readonly lastVersion: number;
}

/** What a round produced. */
export interface RoundResult {
  /** One lease per live agent and bucket, to send now. */
  readonly leases: readonly Lease[];
  /** Agents told to drop a bucket (idle for `abandonAfterMs`). */
  readonly abandoned: readonly { readonly agent: string; readonly bucket: string }[];
}

/** See the module comment. Not safe to share between leaders: each owns one instance. */
export class QuotaController {
  readonly config: ControllerConfig;
  readonly fencingToken: number;
  readonly #buckets = new Map<string, Map<string, AgentRecord>>();
  #lastVersion: number;

  /**
   * @param fencingToken the leadership term this instance acts under; every lease carries it.
   * @param state a predecessor's state (from the store), so a failover loses no commitment.
   */
  constructor(options: ControllerOptions, fencingToken: number, state?: ControllerState) {
    this.config = controllerConfig(options);
    this.fencingToken = fencingToken;
    for (const bucket of this.config.budgets.keys()) this.#buckets.set(bucket, new Map());
    this.#lastVersion = state?.lastVersion ?? 0;
    for (const r of state?.records ?? []) {
      this.#buckets.get(r.bucket)?.set(r.agent, { ...r, grants: [...r.grants] });
    }
  }

  /** A copy of the state, for persisting. */
  state(): ControllerState {
    const records: AgentRecord[] = [];
    for (const m of this.#buckets.values()) {
      for (const r of m.values()) records.push({ ...r, grants: [...r.grants] });
    }
    return { records, lastVersion: this.#lastVersion };
  }

  /** The agents the ledger knows, on any bucket (for the agents cap; O(records)). */
  agents(): Set<string> {
    const names = new Set<string>();
    for (const m of this.#buckets.values()) for (const agent of m.keys()) names.add(agent);
    return names;
  }

  /** Whether `bucket` has a budget here. */
  has(bucket: string): boolean {
    return this.#buckets.has(bucket);
  }

  /** The record of `agent` on `bucket`, if known (read-only view). */
  record(bucket: string, agent: string): Readonly<AgentRecord> | undefined {
    return this.#buckets.get(bucket)?.get(agent);
  }

  /** Units per second the ledger counts on `bucket` at `nowMs`. */
  committed(bucket: string, nowMs: number): number {
    let sum = 0;
    for (const r of this.#buckets.get(bucket)?.values() ?? []) sum += commitment(r, nowMs);
    return sum;
  }

  /**
   * Takes one report. An agent seen for the first time (or again after abandonment) gets a
   * conservative lease at once, from what the ledger leaves free; otherwise `undefined`,
   * and its next lease comes with the next round. Reports for unknown buckets are ignored
   * (`undefined`); the caller decides whether that is an error.
   */
  report(r: UsageReport, nowMs: number): Lease | undefined {
    const records = this.#buckets.get(r.bucket);
    if (records === undefined) return undefined;
    let rec = records.get(r.agent);
    const fresh = rec === undefined || rec.abandoned;
    if (rec === undefined) {
      rec = {
        agent: r.agent,
        bucket: r.bucket,
        demand: 0,
        weight: 1,
        priority: 0,
        lastReportMs: nowMs,
        lastActiveMs: nowMs,
        version: 0,
        grants: [],
        abandoned: false,
      };
      records.set(r.agent, rec);
    }
    rec.abandoned = false;
    rec.weight = r.weight !== undefined && r.weight > 0 ? r.weight : 1;
    rec.priority = r.priority ?? 0;
    rec.lastReportMs = nowMs;
    const used = r.allowed + r.denied;
    if (used > 0 || fresh) rec.lastActiveMs = nowMs;
    if (r.elapsedMs > 0) rec.demand = (used * 1000) / r.elapsedMs;
    if (r.heldVersion !== undefined) {
      const held = r.heldVersion;
      rec.grants = rec.grants.filter((g) => g.version >= held);
    }
    if (!fresh) return undefined;
    const budget = this.config.budgets.get(r.bucket)!;
    let live = 0;
    for (const other of records.values()) if (!other.abandoned) live++;
    const free = Math.max(0, budget * SAFE - this.committed(r.bucket, nowMs));
    // An agent back while a lease it left still counts (a new stream after `leave`) gets
    // that rate again: the ledger holds it already, so nothing is over-committed, where the
    // newcomer's share of what is free can be 0 under a fully committed budget.
    const share = Math.max(
      Math.min(free, (this.config.newcomerShare * budget) / Math.max(1, live)),
      commitment(rec, nowMs),
    );
    return this.#issue(rec, share, nowMs);
  }

  /**
   * Re-sends an agent its newest lease (same rate, fresh TTL), e.g. when it reconnects on
   * a new stream. The ledger's commitment does not grow: the newest lease is never above
   * it. `undefined` when the agent holds nothing live.
   */
  renew(bucket: string, agent: string, nowMs: number): Lease | undefined {
    const rec = this.#buckets.get(bucket)?.get(agent);
    const newest = rec?.grants.filter((g) => g.deadlineMs > nowMs).at(-1);
    if (rec === undefined || rec.abandoned || newest === undefined) return undefined;
    return this.#issue(rec, newest.rate, nowMs);
  }

  /**
   * Takes the leave of `agent` on `bucket` at `nowMs`: it stopped enforcing every lease it
   * was sent before it said so (a Sluice agent's last report, then the end of its
   * stream). Its leases then count only until the end of the window it left in, plus the
   * margin (`nowMs + windowMs + marginMs`), not until their deadlines: the units it
   * admitted in that window stay counted, so a raise from them never lands in the same
   * window. It gets no more leases; a later report makes it a newcomer. Only for an agent
   * that cannot still hold a lease: an RLQS client that merely lost its stream may go on
   * enforcing until the TTL. Returns whether it was known.
   */
  leave(bucket: string, agent: string, nowMs: number): boolean {
    const rec = this.#buckets.get(bucket)?.get(agent);
    if (rec === undefined) return false;
    const until = nowMs + this.config.windowMs + this.config.marginMs;
    rec.grants = rec.grants.map((g) => (g.deadlineMs > until ? { ...g, deadlineMs: until } : g));
    rec.abandoned = true;
    return true;
  }

  /** One refresh round at `nowMs`: new targets, cuts, raises from free budget, renewals. */
  round(nowMs: number): RoundResult {
    const leases: Lease[] = [];
    const abandoned: { agent: string; bucket: string }[] = [];
    for (const [bucket, records] of this.#buckets) {
      const budget = this.config.budgets.get(bucket)!;
      const live: AgentRecord[] = [];
      for (const rec of records.values()) {
        rec.grants = rec.grants.filter((g) => g.deadlineMs > nowMs);
        if (rec.abandoned || nowMs - rec.lastReportMs >= this.config.idleAfterMs) {
          if (rec.grants.length === 0) records.delete(rec.agent);
          continue;
        }
        if (nowMs - rec.lastActiveMs >= this.config.abandonAfterMs) {
          rec.abandoned = true;
          abandoned.push({ agent: rec.agent, bucket });
          continue;
        }
        live.push(rec);
      }
      const claims: Claim[] = live.map((r) => ({
        demand: Math.min(r.demand, budget),
        weight: r.weight,
        priority: r.priority,
      }));
      const targets = allocate(budget * (1 - this.config.newcomerReserve), claims);
      let committed = 0;
      for (const rec of records.values()) committed += commitment(rec, nowMs);
      const grants = raiseFromFree(live, targets, Math.max(0, budget * SAFE - committed), nowMs);
      for (let i = 0; i < live.length; i++) leases.push(this.#issue(live[i]!, grants[i]!, nowMs));
    }
    return { leases, abandoned };
  }

  #issue(rec: AgentRecord, rate: number, nowMs: number): Lease {
    const { leaseTtlMs, marginMs, windowMs } = this.config;
    rec.version = ++this.#lastVersion;
    rec.grants.push({ rate, version: rec.version, deadlineMs: nowMs + leaseTtlMs + marginMs });
    return {
      agent: rec.agent,
      bucket: rec.bucket,
      rate,
      burst: (rate * windowMs) / 1000,
      windowMs,
      ttlMs: leaseTtlMs,
      version: rec.version,
      fencingToken: this.fencingToken,
      issuedAtMs: nowMs,
    };
  }
}

/** The most an agent may be enforcing: the largest lease it may still hold. */
function commitment(rec: AgentRecord, nowMs: number): number {
  let max = 0;
  for (const g of rec.grants) if (g.deadlineMs > nowMs && g.rate > max) max = g.rate;
  return max;
}

/**
 * Cuts are granted as targeted (the old lease stays counted until acknowledged); raises
 * share `free` by priority band, then in proportion to the raise wanted.
 */
function raiseFromFree(
  live: readonly AgentRecord[],
  targets: readonly number[],
  free: number,
  nowMs: number,
): number[] {
  const grants = live.map((r, i) => Math.min(targets[i]!, commitment(r, nowMs)));
  const wants = live.map((r, i) => Math.max(0, targets[i]! - commitment(r, nowMs)));
  const bands = [...new Set(live.map((r) => r.priority))].sort((a, b) => b - a);
  let left = free;
  for (const p of bands) {
    if (left <= 0) break;
    let wanted = 0;
    for (let i = 0; i < live.length; i++) if (live[i]!.priority === p) wanted += wants[i]!;
    if (wanted <= 0) continue;
    const scale = Math.min(1, left / wanted) * (1 - 1e-12);
    for (let i = 0; i < live.length; i++) {
      if (live[i]!.priority !== p || wants[i]! <= 0) continue;
      grants[i]! += wants[i]! * scale;
    }
    left -= wanted * scale;
  }
  return grants;
}
