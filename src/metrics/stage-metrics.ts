import { Counter, Registry } from 'prom-client';
import { boundedLabelValue, DEFAULT_MAX_SERIES_PER_METRIC, SeriesCap } from './series-cap.js';

/** The stages that hold units outside the store (`StagePath` less `cache`). */
export type UnitStage = 'local' | 'batch' | 'lease';

/**
 * What a stage that holds units outside the store (a local reserve, a token batch, a
 * quota lease) tells the metrics. `policy` is the policy's name; units are the policy's.
 * Calls are synchronous and cheap; `StageMetrics` is the Prometheus one.
 *
 * Utilization is `spent / granted`; what was granted and neither spent nor returned
 * expired with its lease. Overshoot is admission beyond what the policy permits, as the
 * stage learns it when it reconciles with the store (limitador's `counter_overshoot`).
 */
export interface StageRecorder {
  /** `units` were taken from the store into the stage (a refill, a lease grant). */
  granted(stage: UnitStage, policy: string, units: number): void;
  /** `units` of what the stage holds were spent on admitted requests. */
  spent(stage: UnitStage, policy: string, units: number): void;
  /** `units` unspent were given back to the store (or released on close). */
  returned(stage: UnitStage, policy: string, units: number): void;
  /** `units` were admitted beyond what the policy permits, found at reconciliation. */
  overshoot(stage: UnitStage, policy: string, units: number): void;
}

const FAMILIES = {
  granted: [
    'sluice_stage_granted_units_total',
    'Units taken from the store into a local reserve, batch or lease, by stage and policy.',
  ],
  spent: [
    'sluice_stage_spent_units_total',
    'Units of a local reserve, batch or lease spent on admitted requests, by stage and policy.',
  ],
  returned: [
    'sluice_stage_returned_units_total',
    'Unspent units given back to the store, by stage and policy.',
  ],
  overshoot: [
    'sluice_stage_overshoot_units_total',
    'Units admitted beyond what the policy permits, found when a stage reconciled with the store, by stage and policy.',
  ],
} as const;

type Family = keyof typeof FAMILIES;

/** Options of {@link StageMetrics}. */
export interface StageMetricsOptions {
  /** @default a new `Registry` of its own */
  readonly registry?: Registry;
  /** Most series per metric family (see `SeriesCap`). @default 2000 */
  readonly maxSeriesPerMetric?: number;
  /** The `policy` label of a policy name. @default the name itself */
  readonly policyLabel?: (policy: string) => string;
}

/**
 * The stages' Prometheus families, `sluice_stage_{granted,spent,returned,overshoot}_units_total{stage, policy}`.
 * Lease utilization is `rate(spent) / rate(granted)`.
 */
export class StageMetrics implements StageRecorder {
  readonly registry: Registry;
  readonly #cap: SeriesCap;
  readonly #label: (policy: string) => string;
  readonly #counters: Record<Family, Counter<'stage' | 'policy'>>;

  constructor(options: StageMetricsOptions = {}) {
    const registry = (this.registry = options.registry ?? new Registry());
    this.#cap = new SeriesCap(
      options.maxSeriesPerMetric ?? DEFAULT_MAX_SERIES_PER_METRIC,
      registry,
    );
    this.#label = options.policyLabel ?? ((p) => p);
    const make = (f: Family): Counter<'stage' | 'policy'> =>
      new Counter({
        name: FAMILIES[f][0],
        help: FAMILIES[f][1],
        labelNames: ['stage', 'policy'] as const,
        registers: [registry],
      });
    this.#counters = {
      granted: make('granted'),
      spent: make('spent'),
      returned: make('returned'),
      overshoot: make('overshoot'),
    };
  }

  granted(stage: UnitStage, policy: string, units: number): void {
    this.#add('granted', stage, policy, units);
  }

  spent(stage: UnitStage, policy: string, units: number): void {
    this.#add('spent', stage, policy, units);
  }

  returned(stage: UnitStage, policy: string, units: number): void {
    this.#add('returned', stage, policy, units);
  }

  overshoot(stage: UnitStage, policy: string, units: number): void {
    this.#add('overshoot', stage, policy, units);
  }

  #add(family: Family, stage: UnitStage, policy: string, units: number): void {
    if (!(units >= 0) || !Number.isFinite(units)) return; // a recorder never throws
    const label = boundedLabelValue(this.#label(policy));
    if (!this.#cap.admit(FAMILIES[family][0], `${stage}\u0000${label}`)) return;
    this.#counters[family].inc({ stage, policy: label }, units);
  }
}
