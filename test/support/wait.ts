/**
 * Bounded polling for the redis harness. Every wait has a deadline and says what it was
 * waiting for, so a hung cluster fails with a reason instead of a vitest hook timeout.
 */

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Options for {@link waitFor}. */
export interface WaitForOptions {
  /** What is being waited for, used in the timeout error ("cluster_state:ok on every node"). */
  what: string;
  /** Deadline from the first attempt. @default 30000 */
  timeoutMs?: number;
  /** Pause between attempts. @default 100 */
  intervalMs?: number;
  /** A probe error for which this returns true is rethrown at once instead of retried. */
  fatal?: (error: unknown) => boolean;
}

/**
 * Calls `probe` until it returns a value other than `undefined`, and resolves with that value.
 *
 * A probe that throws counts as "not yet" (unless `fatal` says otherwise); its last error and its
 * last `detail` (when the probe reports one through its argument) are included in the timeout
 * error.
 *
 * @throws Error after `timeoutMs`, naming `what`, the last detail and the last probe error.
 */
export async function waitFor<T>(
  probe: (report: (detail: string) => void) => Promise<T | undefined> | T | undefined,
  options: WaitForOptions,
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const intervalMs = options.intervalMs ?? 100;
  const deadline = Date.now() + timeoutMs;
  let lastDetail = '';
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe((detail) => {
        lastDetail = detail;
      });
      if (value !== undefined) return value;
      lastError = undefined;
    } catch (error) {
      if (options.fatal?.(error)) throw error;
      lastError = error;
    }
    if (Date.now() >= deadline) {
      const parts = [`timed out after ${timeoutMs} ms waiting for ${options.what}`];
      if (lastDetail) parts.push(`last state: ${lastDetail}`);
      if (lastError !== undefined) {
        parts.push(
          `last error: ${lastError instanceof Error ? lastError.message : String(lastError)}`,
        );
      }
      throw new Error(parts.join('; '), lastError === undefined ? undefined : { cause: lastError });
    }
    await sleep(intervalMs);
  }
}
