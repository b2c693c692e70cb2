import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { PermitOutcome } from './concurrency-limiter.js';
import type { Criticality } from '../core/criticality.js';
import type { AdmissionStats } from './admission-boundary.js';
import type { AdmissionOutcome, OverloadRecorder } from './recorder.js';

const BREAKER_VALUE = { closed: 0, 'half-open': 1, open: 2, none: -1 } as const;

/** The boundaries observed per registry: one gauge serves every boundary label. */
const SOURCES = new WeakMap<Registry, Map<string, () => AdmissionStats>>();

/**
 * The admission boundary's Prometheus metrics, registered in the registry given (the
 * service's `ServiceMetrics.registry`, or your own):
 *
 * - `sluice_overload_admissions_total{boundary, outcome, criticality}`: one per decision;
 *   `outcome` is `admitted`, `shed`, `queue-full`, `queue-timeout`, `deadline` or `breaker-open`;
 * - `sluice_overload_completions_total{boundary, outcome, criticality}`: released permits
 *   by `success`, `failure`, `dropped`, `ignore`;
 * - `sluice_overload_queue_wait_seconds{boundary}`: time admitted requests waited;
 * - gauges read at scrape time from `observe(boundary)`: `sluice_overload_limit`,
 *   `sluice_overload_inflight`, `sluice_overload_queued`, `sluice_overload_breaker_state`
 *   (0 closed, 1 half-open, 2 open).
 */
export class OverloadMetrics implements OverloadRecorder {
  readonly #name: string;
  readonly #admissions: Counter<'boundary' | 'outcome' | 'criticality'>;
  readonly #completions: Counter<'boundary' | 'outcome' | 'criticality'>;
  readonly #wait: Histogram<'boundary'>;
  readonly #sources: Map<string, () => AdmissionStats>;

  /** @param boundary the `boundary` label, e.g. the service or route group name */
  constructor(registry: Registry, boundary = 'default') {
    this.#name = boundary;
    const registers = [registry];
    const existing = <T>(name: string): T | undefined =>
      registry.getSingleMetric(name) as T | undefined;
    this.#admissions =
      existing('sluice_overload_admissions_total') ??
      new Counter({
        name: 'sluice_overload_admissions_total',
        help: 'Admission decisions of the overload boundary, by outcome and criticality.',
        labelNames: ['boundary', 'outcome', 'criticality'] as const,
        registers,
      });
    this.#completions =
      existing('sluice_overload_completions_total') ??
      new Counter({
        name: 'sluice_overload_completions_total',
        help: 'Admitted requests by how they ended (success, failure, dropped, ignore).',
        labelNames: ['boundary', 'outcome', 'criticality'] as const,
        registers,
      });
    this.#wait =
      existing('sluice_overload_queue_wait_seconds') ??
      new Histogram({
        name: 'sluice_overload_queue_wait_seconds',
        help: 'Time admitted requests waited in the overload queue.',
        labelNames: ['boundary'] as const,
        buckets: [0, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
        registers,
      });
    let sources = SOURCES.get(registry);
    if (sources === undefined) SOURCES.set(registry, (sources = new Map()));
    this.#sources = sources;
    const all = sources;
    const gauge = (metric: string, help: string, read: (s: AdmissionStats) => number): void => {
      if (existing(metric) !== undefined) return;
      new Gauge({
        name: metric,
        help,
        labelNames: ['boundary'] as const,
        registers,
        collect() {
          for (const [boundary, source] of all) this.set({ boundary }, read(source()));
        },
      });
    };
    gauge('sluice_overload_limit', 'Current concurrency limit.', (s) => s.limit);
    gauge('sluice_overload_inflight', 'Requests holding a permit.', (s) => s.inflight);
    gauge('sluice_overload_queued', 'Requests waiting in the queue.', (s) => s.queued);
    gauge(
      'sluice_overload_breaker_state',
      'Circuit breaker state: 0 closed, 1 half-open, 2 open, -1 none.',
      (s) => BREAKER_VALUE[s.breaker],
    );
  }

  /** Reads the gauges from `boundary` at each scrape, under this recorder's label. */
  observe(boundary: { stats(): AdmissionStats }): void {
    this.#sources.set(this.#name, () => boundary.stats());
  }

  admission(outcome: AdmissionOutcome, criticality: Criticality, waitedMs: number): void {
    this.#admissions.inc({ boundary: this.#name, outcome, criticality });
    if (outcome === 'admitted') this.#wait.observe({ boundary: this.#name }, waitedMs / 1000);
  }

  completion(outcome: PermitOutcome, criticality: Criticality): void {
    this.#completions.inc({ boundary: this.#name, outcome, criticality });
  }
}
