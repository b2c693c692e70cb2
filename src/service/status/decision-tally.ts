import type { Decision } from '../../core/decision.js';
import type { DecisionCounts, PolicyTally } from './status-snapshot.js';

/** Seconds kept for the last-minute counts: one slot per second. */
const WINDOW_SECONDS = 60;

/** Options of {@link DecisionTally}. */
export interface DecisionTallyOptions {
  /** Most policies tallied; decisions of further ones are counted in `overflow`. @default 1000 */
  readonly maxPolicies?: number;
  /** A monotonic clock in ms. @default performance.now */
  readonly nowMs?: () => number;
}

interface Counts {
  decisions: number;
  denied: number;
  wouldDeny: number;
}

interface Row {
  readonly total: Counts;
  /** Per-second counts; `second[i]` says which second slot `i` holds. */
  readonly slots: Counts[];
  readonly second: number[];
}

const zero = (): Counts => ({ decisions: 0, denied: 0, wouldDeny: 0 });

/**
 * Decisions per policy, since start and over the last 60 s, for the status page. A
 * decision is `denied` when it was not allowed and was enforced, `wouldDeny` when a
 * shadow policy would have denied it. Memory is bounded: at most `maxPolicies` rows of
 * 60 one-second slots; policy names come from the configuration, so the bound is only
 * reached by a very large config.
 */
export class DecisionTally {
  readonly #rows = new Map<string, Row>();
  readonly #max: number;
  readonly #nowMs: () => number;
  /** Decisions of policies beyond `maxPolicies`. */
  overflow = 0;

  constructor(options: DecisionTallyOptions = {}) {
    this.#max = options.maxPolicies ?? 1000;
    this.#nowMs = options.nowMs ?? (() => performance.now());
  }

  /** Counts one decision under its policy's name, in the second `nowMs()` falls in. */
  record(decision: Decision): void {
    let row = this.#rows.get(decision.policy);
    if (row === undefined) {
      if (this.#rows.size >= this.#max) {
        this.overflow++;
        return;
      }
      row = {
        total: zero(),
        slots: Array.from({ length: WINDOW_SECONDS }, zero),
        second: new Array<number>(WINDOW_SECONDS).fill(-1),
      };
      this.#rows.set(decision.policy, row);
    }
    const second = Math.floor(this.#nowMs() / 1000);
    const i = second % WINDOW_SECONDS;
    if (row.second[i] !== second) {
      row.second[i] = second;
      row.slots[i] = zero();
    }
    for (const c of [row.total, row.slots[i]!]) {
      c.decisions++;
      if (!decision.allowed) {
        if (decision.path === 'shadow') c.wouldDeny++;
        else c.denied++;
      }
    }
  }

  /** Every policy's counts, most decisions first (then by name). */
  snapshot(): PolicyTally[] {
    const second = Math.floor(this.#nowMs() / 1000);
    const rows = [...this.#rows].map(([policy, row]) => {
      const lastMinute = zero();
      row.slots.forEach((c, i) => {
        // A slot counts while its second is one of the last 60, this one included.
        if (second - row.second[i]! < WINDOW_SECONDS) add(lastMinute, c);
      });
      return { policy, total: { ...row.total }, lastMinute } satisfies PolicyTally;
    });
    return rows.sort(
      (a, b) => b.total.decisions - a.total.decisions || (a.policy < b.policy ? -1 : 1),
    );
  }
}

function add(to: Counts, c: DecisionCounts): void {
  to.decisions += c.decisions;
  to.denied += c.denied;
  to.wouldDeny += c.wouldDeny;
}
