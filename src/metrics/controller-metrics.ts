import { Counter, Gauge, Registry } from 'prom-client';

/** What {@link ControllerMetrics} reads at each scrape: a controller process's status. */
export interface ControllerMetricsSource {
  status(): {
    readonly connected: boolean;
    readonly leading: boolean;
    readonly term: number;
    readonly agents: Readonly<Record<string, number>>;
    readonly buckets: readonly {
      readonly bucket: string;
      readonly committed: number;
      readonly budget: number;
    }[];
  };
}

/**
 * The quota controller's Prometheus metrics (docs/metrics.md, "Quota controller"), in a
 * registry of its own. Gauges are read from the process at each scrape; counters are fed
 * by the controller's callbacks. Labels are bounded: `bucket` by the `--budget` flags,
 * `reason` by the controller's own reasons, `state` by the agent states; never an agent
 * name (duplicates are counted, not labelled).
 */
export class ControllerMetrics {
  readonly registry = new Registry();
  readonly #refusals: Counter<'reason'>;
  readonly #authFailures: Counter<'reason'>;
  readonly #duplicates: Counter;
  readonly #mismatches: Counter<'setting'>;

  constructor(source: ControllerMetricsSource) {
    const registers = [this.registry];
    const read = () => source.status();
    new Gauge({
      name: 'sluice_controller_redis_connected',
      help: '1 while the controller is connected to its Redis',
      registers,
      collect() {
        this.set(read().connected ? 1 : 0);
      },
    });
    new Gauge({
      name: 'sluice_controller_leader',
      help: '1 while this controller leads, 0 while it follows or waits',
      registers,
      collect() {
        this.set(read().leading ? 1 : 0);
      },
    });
    new Gauge({
      name: 'sluice_controller_term',
      help: 'the fencing token of the term this controller leads, or of the leader it last saw (0: none)',
      registers,
      collect() {
        this.set(read().term);
      },
    });
    new Gauge({
      name: 'sluice_controller_agents',
      help: 'agents by state while this controller leads: streaming (a stream open now), recorded (in the ledger)',
      labelNames: ['state'],
      registers,
      collect() {
        for (const [state, n] of Object.entries(read().agents)) this.set({ state }, n);
      },
    });
    new Gauge({
      name: 'sluice_controller_committed_units_per_second',
      help: 'units per second the ledger counts as assigned for the bucket now (leader only; 0 otherwise)',
      labelNames: ['bucket'],
      registers,
      collect() {
        for (const b of read().buckets) this.set({ bucket: b.bucket }, b.committed);
      },
    });
    new Gauge({
      name: 'sluice_controller_budget_units_per_second',
      help: "the bucket's budget (--budget)",
      labelNames: ['bucket'],
      registers,
      collect() {
        for (const b of read().buckets) this.set({ bucket: b.bucket }, b.budget);
      },
    });
    this.#refusals = new Counter({
      name: 'sluice_controller_refusals_total',
      help: 'streams and messages refused, by reason',
      labelNames: ['reason'],
      registers,
    });
    this.#authFailures = new Counter({
      name: 'sluice_controller_auth_failures_total',
      help: 'agents that could not be authenticated, by reason',
      labelNames: ['reason'],
      registers,
    });
    this.#duplicates = new Counter({
      name: 'sluice_controller_duplicate_agents_total',
      help: 'streams opened under an agent name that already had a live stream',
      registers,
    });
    this.#mismatches = new Counter({
      name: 'sluice_controller_settings_mismatches_total',
      help: "agents whose settings disagree with the controller's, by setting",
      labelNames: ['setting'],
      registers,
    });
  }

  refusal(reason: string, count = 1): void {
    this.#refusals.inc({ reason }, count);
  }

  authFailure(reason: string): void {
    this.#authFailures.inc({ reason });
  }

  duplicateAgent(): void {
    this.#duplicates.inc();
  }

  settingsMismatch(setting: string): void {
    this.#mismatches.inc({ setting });
  }

  /** The Prometheus text exposition. */
  async text(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
