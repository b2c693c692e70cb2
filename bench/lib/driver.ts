/**
 * Closed-loop load driver: `concurrency` callers, each issuing its next decision as soon
 * as the previous one settles, for a bounded time. Latency per decision is measured with
 * performance.now() into a node:perf_hooks histogram (ns); CPU with process.cpuUsage().
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
}

export interface DriveResult {
  readonly decisions: number;
  readonly allowed: number;
  /** Operations that threw or rejected (not counted as decisions). */
  readonly errors: number;
  readonly firstError?: string;
  readonly seconds: number;
  readonly decisionsPerSecond: number;
  /** Latency percentiles in µs. */
  readonly latencyUs: { readonly p50: number; readonly p99: number; readonly p999: number };
  /** Client (this process's) CPU per decision, µs (user + system). */
  readonly clientCpuUsPerDecision: number;
  /** Client CPU over the window in cores (1 = one core busy all the time). */
  readonly clientCpuCores: number;
}

export async function drive<T>(op: Operation<T>, options: DriveOptions<T>): Promise<DriveResult> {
  const histogram = createHistogram({ lowest: 1, highest: 600_000_000_000, figures: 3 });
  const isAllowed = options.allowed;
  let seq = 0;
  let decisions = 0;
  let allowed = 0;
  let errors = 0;
  let firstError: string | undefined;
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  const end = start + options.durationMs;

  const caller = async (): Promise<void> => {
    let t0 = performance.now();
    while (t0 < end) {
      try {
        const value = await op(seq++);
        if (isAllowed(value)) allowed++;
        decisions++;
        const t1 = performance.now();
        histogram.record(Math.max(1, Math.round((t1 - t0) * 1e6)));
        t0 = t1;
      } catch (error) {
        errors++;
        firstError ??= error instanceof Error ? error.message : String(error);
        t0 = performance.now();
      }
    }
  };
  const syncCaller = (): void => {
    let t0 = performance.now();
    while (t0 < end) {
      try {
        if (isAllowed(op(seq++) as T)) allowed++;
        decisions++;
        const t1 = performance.now();
        histogram.record(Math.max(1, Math.round((t1 - t0) * 1e6)));
        t0 = t1;
      } catch (error) {
        errors++;
        firstError ??= error instanceof Error ? error.message : String(error);
        t0 = performance.now();
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
