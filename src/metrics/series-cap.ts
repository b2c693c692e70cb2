import { createHash } from 'node:crypto';
import { Counter, type Registry } from 'prom-client';

/** Label sets (series) one metric family may hold unless configured otherwise. */
export const DEFAULT_MAX_SERIES_PER_METRIC = 2_000;

/**
 * Longest label value written, in UTF-16 code units. A longer one (a `detailed_metric`
 * rule over long values) is cut to its start plus a hash of the whole, so distinct
 * values stay distinct series while a series' size stays bounded.
 */
export const MAX_LABEL_VALUE_LENGTH = 512;

const HASH_CHARS = 16;
const DROPPED = 'sluice_metric_series_dropped_total';
const KEEP = MAX_LABEL_VALUE_LENGTH - HASH_CHARS - 1;

/** `value`, or for one longer than {@link MAX_LABEL_VALUE_LENGTH}: its start, `…`, a hash. */
export function boundedLabelValue(value: string): string {
  if (value.length <= MAX_LABEL_VALUE_LENGTH) return value;
  const hash = createHash('sha256').update(value).digest('hex').slice(0, HASH_CHARS);
  return `${value.slice(0, KEEP)}…${hash}`;
}

/**
 * A bound on the number of series per metric family. Labels carry configured names
 * only, but some configurations name request values (`detailed_metric`,
 * `value_to_metric`) and request-supplied limits name request keys; without a bound,
 * a client sending new values creates series, and memory and `/metrics` grow, without
 * limit. Updates that would create a series beyond the bound are not recorded and are
 * counted in `sluice_metric_series_dropped_total{metric}`, whose own series are one per
 * capped family.
 */
export class SeriesCap {
  readonly #max: number;
  /** Per family: the label sets admitted, and how many series they stand for. */
  readonly #families = new Map<string, { keys: Set<string>; series: number }>();
  readonly #dropped: Counter<'metric'>;

  /** Throws `RangeError` for a `max` that is not a positive whole number. */
  constructor(max: number, registry: Registry) {
    if (!Number.isSafeInteger(max) || max <= 0) {
      throw new RangeError(`maxSeriesPerMetric must be a positive whole number, got ${max}`);
    }
    this.#max = max;
    // One counter per registry: the service's components each have a cap of their own.
    this.#dropped =
      (registry.getSingleMetric(DROPPED) as Counter<'metric'> | undefined) ??
      new Counter({
        name: DROPPED,
        help: 'Metric updates not recorded because they would have created more series than the per-metric cap allows, by metric.',
        labelNames: ['metric'] as const,
        registers: [registry],
      });
  }

  /** The bound on series per metric family. */
  get max(): number {
    return this.#max;
  }

  /** Counts one update of `metric` dropped for a reason of the caller's (a full table). */
  drop(metric: string): void {
    this.#dropped.inc({ metric });
  }

  /**
   * Whether an update of `metric` under the label set `key` may be recorded: yes for a
   * label set already admitted, or a new one whose `series` (how many series it
   * creates, e.g. five rule outcomes at once) still fit under the bound; otherwise
   * the update is counted as dropped.
   */
  admit(metric: string, key: string, series = 1): boolean {
    let family = this.#families.get(metric);
    if (family === undefined) {
      family = { keys: new Set(), series: 0 };
      this.#families.set(metric, family);
    }
    if (family.keys.has(key)) return true;
    if (family.series + series > this.#max) {
      this.#dropped.inc({ metric });
      return false;
    }
    family.keys.add(key);
    family.series += series;
    return true;
  }
}
