import { algorithmOf } from '../algorithms/index.js';
import type { FailureMode, Policy } from '../core/policy.js';

/**
 * What the local stages permit for one policy across a fleet, from the settings the
 * stages run with (`policy.local`, `policy.batch`) and the algorithm's own rate. This is
 * what `sluice explain` prints; the accuracy test measures against the same numbers.
 *
 * Terms, per bucket key, for N instances:
 * - global: B units at once (burst; 2 × limit across a fixed window's boundary) and G
 *   units per second;
 * - local: each instance lb at once and lr per second;
 * - batch: each instance holds at most S units reserved, spent within ttl.
 *
 * Overshoot is what the fleet admits above what the global policy alone would admit over
 * the same interval; under-use is what the global policy would admit that the fleet
 * refuses or leaves unspent.
 */
export interface PolicyBounds {
  readonly policy: string;
  /** The settings in one line: algorithm, rate, local, batch, failure mode. */
  readonly summary: string;
  readonly instances: number;
  /** Requests per second to one key across the fleet, when given. */
  readonly rps?: number;
  readonly global: { readonly atOnce: number; readonly perSecond: number };
  readonly local?: { readonly atOnce: number; readonly perSecond: number };
  readonly batch?: { readonly size: number; readonly ttlMs: number };
  readonly fleetBurst: {
    /** Units the local stages let through at one instant: N × lb. */
    readonly localStage?: number;
    /** Units admitted at one instant with the store up: B, plus N × S held in batches. */
    readonly storeUp: number;
  };
  /** Most units held outside the global owner: N × S. */
  readonly heldOutside: number;
  /** Overshoot over any interval, store up, in units. */
  readonly overshootUnits: number;
  /**
   * Under-use with the store up and the load spread evenly over the instances: `atOnce`
   * plus `perSecond` × the interval in seconds, plus `batchUnits` held unspent, plus
   * `perRoundTripMs` × the store's round trip in ms (a local stage's units taken for checks
   * still in flight: the global bucket refills meanwhile).
   */
  readonly underUse: {
    readonly atOnce: number;
    readonly perSecond: number;
    readonly batchUnits: number;
    readonly perRoundTripMs: number;
  };
  /** What each failure mode lets through with the store down; `null` is unlimited. */
  readonly storeDown: Readonly<
    Record<FailureMode, { readonly atOnce: number | null; readonly perSecond: number | null }>
  >;
  /** Remote (store) calls per second at `rps`, when given. */
  readonly remoteCallsPerSecond?: number;
  /** The report, as sections of lines (a section may be added by another stage). */
  readonly sections: readonly BoundsSection[];
  /** For a policy with a `settle` block: what its reservations hold and let through. */
  readonly settle?: {
    readonly heldByReservations: number;
    readonly debtBound: number;
  };
}

/** One section of an explanation: a title and its lines. */
export interface BoundsSection {
  readonly title: string;
  readonly lines: readonly BoundsLine[];
}

/** One line: what, how much, and why or for how long. */
export interface BoundsLine {
  readonly label: string;
  readonly value: string;
  readonly note?: string;
}

/** Thousands separated, at most 2 decimals: `2,000`, `0.5`. */
export function units(n: number | null): string {
  if (n === null) return 'unlimited';
  return n.toLocaleString('en-US', { maximumFractionDigits: 2 });
}

function ms(n: number): string {
  return n % 1_000 === 0 ? `${units(n / 1_000)}s` : `${units(n)}ms`;
}

/** The bounds of `policy` on `instances` instances, at `rps` requests per second to one key. */
export function policyBounds(policy: Policy, instances: number, rps?: number): PolicyBounds {
  const n = instances;
  const g = algorithmOf(policy.algorithm).sustainedRate(policy.params);
  const B = g.atOnce;
  const G = g.perSecond;
  const local =
    policy.local === undefined
      ? undefined
      : {
          atOnce: policy.local.burst,
          perSecond: (policy.local.rate * 1_000) / policy.local.periodMs,
        };
  const batch = policy.batch;
  const S = batch?.size ?? 0;
  const localStage = local === undefined ? undefined : n * local.atOnce;
  const storeUp = Math.min(localStage ?? Infinity, B + n * S);
  const heldOutside = n * S;
  const overshootUnits = n * S;
  const underUse = {
    atOnce: local === undefined ? 0 : Math.max(0, B - n * local.atOnce),
    perSecond: local === undefined ? 0 : Math.max(0, G - n * local.perSecond),
    batchUnits: n * S,
    perRoundTripMs: local === undefined ? 0 : G / 1_000,
  };
  const openAtOnce = localStage ?? null;
  const openPerSecond = local === undefined ? null : n * local.perSecond;
  const staleAtOnce = Math.min(localStage ?? Infinity, n * B);
  const storeDown = {
    open: { atOnce: openAtOnce, perSecond: openPerSecond },
    closed: { atOnce: 0, perSecond: 0 },
    stale: {
      atOnce: staleAtOnce,
      perSecond: Math.min(openPerSecond ?? Infinity, n * G),
    },
  };
  const remote = rps === undefined ? undefined : remoteCalls(rps, n, G, local?.perSecond, S);

  const sections: BoundsSection[] = [];
  const burst: BoundsLine[] = [];
  if (local !== undefined) {
    burst.push({
      label: 'local stages let through at once',
      value: units(localStage!),
      note: `${units(n)} × local burst ${units(local.atOnce)}`,
    });
  }
  burst.push({
    label: 'admitted at once, store up',
    value: units(storeUp),
    note:
      (S > 0
        ? `global burst ${units(B)} + ${units(n)} × batch ${units(S)} held; they stack`
        : `global burst ${units(B)}`) +
      (localStage !== undefined && localStage < B + n * S ? `, capped by the local stages` : ''),
  });
  sections.push({ title: 'fleet burst', lines: burst });
  sections.push({
    title: 'held outside the global owner',
    lines: [
      {
        label: 'reserved units, at most',
        value: units(heldOutside),
        note:
          batch === undefined
            ? 'no batching'
            : `${units(n)} × batch size ${units(S)}; a killed instance loses at most its ${units(S)}`,
      },
    ],
  });
  sections.push({
    title: 'overshoot (above the global policy alone), store up',
    lines: [
      { label: 'global store', value: '0', note: 'the store decides atomically' },
      ...(local === undefined
        ? []
        : [{ label: 'local stage', value: '0', note: 'it only refuses, never admits' }]),
      { label: 'over-limit cache (when on)', value: '0', note: 'it only refuses, never admits' },
      ...(batch === undefined
        ? []
        : [
            {
              label: 'batching',
              value: units(overshootUnits),
              note: `in any interval: units reserved before it and spent in it; each unit within ${ms(batch.ttlMs)} of its reservation`,
            },
          ]),
    ],
  });
  const under: BoundsLine[] = [];
  if (local !== undefined) {
    under.push({
      label: 'local stage, load spread evenly',
      value: `${units(underUse.atOnce)} + ${units(underUse.perSecond)}/s + ${units(underUse.perRoundTripMs)} per ms of store round trip`,
      note: `global ${units(B)} + ${units(G)}/s vs ${units(n)} × (${units(local.atOnce)} + ${units(local.perSecond)}/s); the round-trip term: checks in flight hold local units while the global bucket refills; load on k instances: ${units(B)} + ${units(G)}/s − k × (${units(local.atOnce)} + ${units(local.perSecond)}/s)`,
    });
  }
  under.push({
    label: 'over-limit cache (when on)',
    value: '0',
    note: 'denies only what the store would deny, until its retry time',
  });
  if (batch !== undefined) {
    under.push({
      label: 'batching',
      value: units(underUse.batchUnits),
      note: `reserved, not yet spent: spent later, or dropped ${ms(batch.ttlMs)} after reservation`,
    });
  }
  sections.push({ title: 'under-use, store up', lines: under });
  if (rps !== undefined) {
    sections.push({
      title: `remote calls at ${units(rps)} req/s to one key`,
      lines: [
        { label: 'every check to the store', value: `${units(rps)}/s` },
        {
          label: 'with these stages',
          value: `${units(remote!)}/s`,
          note: remoteNote(local?.perSecond, S, G, n),
        },
      ],
    });
  }
  const down: BoundsLine[] = (['open', 'closed', 'stale'] as const).map((mode) => {
    const d = storeDown[mode];
    const mine = mode === policy.failureMode ? ' (this policy)' : '';
    const value = mode === 'closed' ? '0' : `${units(d.atOnce)} at once, ${units(d.perSecond)}/s`;
    const note =
      mode === 'open'
        ? local === undefined
          ? 'everything is admitted'
          : 'the local stages still limit'
        : mode === 'closed'
          ? 'everything is refused, status UNAVAILABLE'
          : `each instance spends the store's last budget for ${ms(policy.stale?.ttlMs ?? 10_000)}, then falls back to ${policy.stale?.fallback ?? 'closed'}`;
    return { label: `failure mode ${mode}${mine}`, value, note };
  });
  sections.push({ title: 'store down', lines: down });

  const summary = [
    `${policy.algorithm} ${units(G)}/s, ${units(B)} at once`,
    local === undefined
      ? 'no local stage'
      : `local ${units(local.perSecond)}/s, burst ${units(local.atOnce)}`,
    batch === undefined ? 'no batching' : `batch ${units(S)}, ttl ${ms(batch.ttlMs)}`,
    `failure mode ${policy.failureMode}`,
  ].join('; ');
  return {
    policy: policy.name,
    summary,
    instances: n,
    ...(rps === undefined ? {} : { rps }),
    global: { atOnce: B, perSecond: G },
    ...(local === undefined ? {} : { local }),
    ...(batch === undefined ? {} : { batch: { size: batch.size, ttlMs: batch.ttlMs } }),
    fleetBurst: { ...(localStage === undefined ? {} : { localStage }), storeUp },
    heldOutside,
    overshootUnits,
    underUse,
    storeDown,
    ...(remote === undefined ? {} : { remoteCallsPerSecond: remote }),
    sections,
  };
}

/**
 * Store calls per second at `rps` to one key, steady state. The local stages give units
 * back when the store denies, so they cut calls only when they bind before the global
 * limit (N × lr below G); then one reservation per S admitted units, and over the limit
 * at most two calls per instance per S units refilled (a denial waits for a whole batch
 * to refill; then one call asks for it and, when another instance took some, one more
 * asks for what the store holds).
 */
function remoteCalls(
  rps: number,
  n: number,
  G: number,
  localPerSecond: number | undefined,
  S: number,
): number {
  const passed =
    localPerSecond !== undefined && n * localPerSecond < G
      ? Math.min(rps, n * localPerSecond)
      : rps;
  if (S === 0) return passed;
  const admitted = Math.min(passed, G);
  return admitted / S + Math.min(passed - admitted, (2 * n * G) / S);
}

function remoteNote(localPerSecond: number | undefined, S: number, G: number, n: number): string {
  const parts: string[] = [];
  if (localPerSecond !== undefined) {
    parts.push(
      n * localPerSecond < G
        ? `local stages pass ≤ ${units(n * localPerSecond)}/s`
        : `local stages bind only above ${units(n * localPerSecond)}/s admitted, and give units back on denials`,
    );
  }
  if (S > 0) {
    parts.push(`1 reservation per ${units(S)} admitted units (a cold key: per unit)`);
    parts.push(`over ${units(G)}/s: ≤ 2 calls per instance per ${units(S)} units refilled`);
  }
  return parts.length === 0 ? 'no local stage' : parts.join('; ');
}

/** The report as text: a header per policy, then its sections. */
export function formatBounds(all: readonly PolicyBounds[]): string {
  const out: string[] = [];
  for (const b of all) {
    out.push(`${b.policy}: ${b.summary}`);
    out.push(
      `  on ${units(b.instances)} instances${b.rps === undefined ? '' : `, ${units(b.rps)} req/s to one key`}`,
    );
    for (const s of b.sections) {
      out.push(`  ${s.title}`);
      const width = Math.max(...s.lines.map((l) => l.label.length));
      for (const l of s.lines) {
        out.push(
          `    ${l.label.padEnd(width)}  ${l.value}${l.note === undefined ? '' : `  (${l.note})`}`,
        );
      }
    }
    out.push('');
  }
  return out.join('\n');
}
