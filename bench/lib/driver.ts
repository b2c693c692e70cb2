/**
 * Closed-loop load driver: `concurrency` callers, each issuing its next decision as soon
 * as the previous one settles, for a bounded time. Latency is measured with
 * performance.now() around a call, into a node:perf_hooks histogram (ns); CPU with
 * process.cpuUsage().
 *
 * By default every decision is timed (Redis scenarios: exact percentiles). With
 * `sampleEvery: n` only one decision in n is timed, with its own start read just before
 * the call, and the others run with no clock read: two clock reads and a histogram record
 * cost about 0.5 us, as much as a whole in-process decision, so timing each one would
 * dilute the throughput of in-process (memory store) scenarios. Their percentiles then
 * come from the sampled decisions; the window's end is checked at each sample.
 */
import { createHistogram, performance } from 'node:perf_hooks';

/** One decision: `i` is the global sequence number (used to pick the key). */
export type Operation<T> = (i: number) => Promise<T> | T;

export interface DriveOptions<T> {
  readonly concurrency: number;
  readonly durationMs: number;
  /** Whether a settled operation's value means "allowed". */
  readonly allowed: (value: T) => boolean;
  /**
   * The operation returns its value directly (never a promise): one caller calls it in a
   * plain loop, with no await per call (concurrency does not apply).
   */
  readonly sync?: boolean;
  /** Time one decision in this many (see the module comment). @default 1 */
  readonly sampleEvery?: number;
}

export interface DriveResult {
  readonly decisions: number;
  readonly allowed: number;
  /** Operations that threw or rejected (not counted as decisions). */
  readonly errors: number;
  readonly firstError?: string;
  readonly seconds: number;
  readonly decisionsPerSecond: number;
  /** Latency percentiles in µs (of the sampled decisions, see `sampleEvery`). */
  readonly latencyUs: { readonly p50: number; readonly p99: number; readonly p999: number };
  /** Client (this process's) CPU per decision, µs (user + system). */
  readonly clientCpuUsPerDecision: number;
  /** Client CPU over the window in cores (1 = one core busy all the time). */
  readonly clientCpuCores: number;
}

export async function drive<T>(op: Operation<T>, options: DriveOptions<T>): Promise<DriveResult> {
  const histogram = createHistogram({ lowest: 1, highest: 600_000_000_000, figures: 3 });
  const isAllowed = options.allowed;
  const every = options.sampleEvery ?? 1;
  if (!Number.isSafeInteger(every) || every < 1) throw new RangeError('sampleEvery must be >= 1');
  let seq = 0;
  let decisions = 0;
  let allowed = 0;
  let errors = 0;
  let firstError: string | undefined;
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  const end = start + options.durationMs;
  const failed = (error: unknown): void => {
    errors++;
    firstError ??= error instanceof Error ? error.message : String(error);
  };
  const record = (t0: number): void => {
    histogram.record(Math.max(1, Math.round((performance.now() - t0) * 1e6)));
  };

  // Each loop times its first decision of every `every` and checks the end there.
  const caller = async (): Promise<void> => {
    for (let n = 0; ; n++) {
      const timed = n % every === 0;
      const t0 = timed ? performance.now() : 0;
      if (timed && t0 >= end) return;
      try {
        const value = await op(seq++);
        if (isAllowed(value)) allowed++;
        decisions++;
        if (timed) record(t0);
      } catch (error) {
        failed(error);
      }
    }
  };
  const syncCaller = (): void => {
    for (let n = 0; ; n++) {
      const timed = n % every === 0;
      const t0 = timed ? performance.now() : 0;
      if (timed && t0 >= end) return;
      try {
        if (isAllowed(op(seq++) as T)) allowed++;
        decisions++;
        if (timed) record(t0);
      } catch (error) {
        failed(error);
      }
    }
  };
  if (options.sync === true) {
    syncCaller();
  } else {
    const callers: Promise<void>[] = [];
    for (let c = 0; c < options.concurrency; c++) callers.push(caller());
    await Promise.all(callers);
  }

  const seconds = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const cpuUs = cpu.user + cpu.system;
  const pct = (p: number): number => histogram.percentile(p) / 1000;
  return {
    decisions,
    allowed,
    errors,
    ...(firstError === undefined ? {} : { firstError }),
    seconds,
    decisionsPerSecond: decisions / seconds,
    latencyUs: { p50: pct(50), p99: pct(99), p999: pct(99.9) },
    clientCpuUsPerDecision: decisions === 0 ? 0 : cpuUs / decisions,
    clientCpuCores: cpuUs / 1e6 / seconds,
  };
}

/** The median of numbers (mean of the middle two for an even count); NaN when empty. */
export function median(xs: readonly number[]): number {
  const finite = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (finite.length === 0) return NaN;
  const mid = finite.length >> 1;
  return finite.length % 2 === 1 ? finite[mid]! : (finite[mid - 1]! + finite[mid]!) / 2;
}
