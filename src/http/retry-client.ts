import { PolicyError } from '../core/errors.js';
import { ClientThrottle, type ClientThrottleOptions } from '../overload/client-throttle.js';
import { OverloadError } from '../overload/overload-error.js';
import { RetryBudget, type RetryBudgetOptions } from '../overload/retry-budget.js';

/** Options of {@link createRetryingFetch}. */
export interface RetryingFetchOptions {
  /** Retries after the first attempt; 0 never retries. @default 3 */
  readonly maxRetries?: number;
  /**
   * The jitter window of retry `n` (0-based) is `min(maxJitterMs, baseDelayMs * 2^n)`.
   * @default 100
   */
  readonly baseDelayMs?: number;
  /** Cap of the jitter window, in ms. @default 10_000 */
  readonly maxJitterMs?: number;
  /**
   * Longest `Retry-After` worth waiting for, in ms: a response that asks for more is
   * returned to the caller instead of sleeping on it. @default 60_000
   */
  readonly maxRetryAfterMs?: number;
  /** Statuses that are retried. @default [429, 503] */
  readonly retryOn?: readonly number[];
  /** Uniform in [0, 1). @default Math.random */
  readonly random?: () => number;
  /** Waits `ms`; rejects when `signal` aborts. @default a timer */
  readonly sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** The fetch to wrap. @default globalThis.fetch */
  readonly fetch?: typeof fetch;
  /**
   * Wall time for HTTP-date `Retry-After` values, in ms since the epoch; also the clock of
   * the throttle's and the budget's windows when they are given as options. @default Date.now
   */
  readonly nowMs?: () => number;
  /**
   * Client-side adaptive throttling (Google SRE): once the backend refuses most requests
   * (429 or 503), refuse a share of new ones locally, before sending, with an
   * `OverloadError` (`SLUICE_ERR_OVERLOAD_THROTTLED`). Share one `ClientThrottle` between
   * the fetch functions that call one backend. @default off
   */
  readonly adaptiveThrottle?: ClientThrottle | ClientThrottleOptions;
  /**
   * Caps retries to a share of first attempts over a window, so that when everything
   * fails the client adds at most that share of load. A retry the budget refuses
   * returns the last answer. @default off
   */
  readonly retryBudget?: RetryBudget | RetryBudgetOptions;
}

/** Answers that mean the backend refused the request for load, not that it handled it. */
const REFUSALS: ReadonlySet<number> = new Set([429, 503]);

/**
 * `Retry-After` in ms: delay-seconds (`"3"`) or an HTTP-date, relative to `nowMs`.
 * `undefined` when absent or malformed; a date in the past is 0.
 */
export function parseRetryAfter(value: string | null, nowMs: number): number | undefined {
  if (value === null) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  if (Number.isNaN(at) || !/[a-z]/i.test(v)) return undefined;
  return Math.max(0, at - nowMs);
}

function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Bodies that can be sent again unchanged; a stream is consumed by the first attempt. */
function replayable(init: RequestInit | undefined): boolean {
  const body = init?.body;
  return body === undefined || body === null || !(body instanceof ReadableStream);
}

/**
 * Wraps `fetch` so that 429 and 503 answers are retried the way a rate-limited client
 * should: never before the server's `Retry-After`, plus full jitter so that clients
 * told the same delay do not all come back at the same instant, and at most
 * `maxRetries` times.
 *
 * The wait before retry `n` (0-based) is `retryAfter + random() * min(maxJitterMs,
 * baseDelayMs * 2^n)`, where `retryAfter` is 0 when the response has none (plain full
 * jitter). The last response is returned as it is (a 429 after the retries run out, or
 * one whose `Retry-After` exceeds `maxRetryAfterMs`); network errors are not retried. A
 * request whose body is a stream is not retried. A 429 or a Sluice 503 means the request
 * was not processed, so retrying a POST is safe for them; other 503s may not be.
 *
 * With `adaptiveThrottle`, every attempt (retries included) first asks the throttle; a
 * first attempt it refuses rejects with an `OverloadError`, a retry it refuses returns
 * the last answer. With `retryBudget`, a retry beyond the budget returns the last answer.
 *
 * @example
 * const fetchWithRetry = createRetryingFetch({ maxRetries: 4 });
 * const res = await fetchWithRetry('http://127.0.0.1:3000/transfers/1', { method: 'POST' });
 */
export function createRetryingFetch(options: RetryingFetchOptions = {}): typeof fetch {
  const maxRetries = options.maxRetries ?? 3;
  const base = options.baseDelayMs ?? 100;
  const cap = options.maxJitterMs ?? 10_000;
  const maxRetryAfterMs = options.maxRetryAfterMs ?? 60_000;
  const retryOn = new Set(options.retryOn ?? [429, 503]);
  const random = options.random ?? Math.random;
  const sleep = options.sleep ?? defaultSleep;
  const nowMs = options.nowMs ?? Date.now;
  const clock = { nowMs };
  const throttle =
    options.adaptiveThrottle === undefined || options.adaptiveThrottle instanceof ClientThrottle
      ? options.adaptiveThrottle
      : new ClientThrottle({ clock, ...options.adaptiveThrottle });
  const budget =
    options.retryBudget === undefined || options.retryBudget instanceof RetryBudget
      ? options.retryBudget
      : new RetryBudget({ clock, ...options.retryBudget });
  for (const [name, v] of Object.entries({ maxRetries, base, cap, maxRetryAfterMs })) {
    if (!(Number.isFinite(v) && v >= 0)) {
      throw new PolicyError(
        'SLUICE_ERR_HTTP_CONFIG_INVALID',
        `${name} must be a finite number >= 0, got ${String(v)}`,
      );
    }
  }

  return async (input, init) => {
    const doFetch = options.fetch ?? globalThis.fetch;
    const canRetry = replayable(init) && !(input instanceof Request && input.body !== null);
    if (throttle !== undefined && !throttle.allow(random())) {
      throw new OverloadError(
        'SLUICE_ERR_OVERLOAD_THROTTLED',
        `refused locally: the backend refused most recent requests (reject probability ${throttle.rejectProbability().toFixed(2)})`,
        0,
      );
    }
    budget?.request();
    for (let attempt = 0; ; attempt++) {
      const res = await doFetch(input, init);
      if (throttle !== undefined && !REFUSALS.has(res.status)) throttle.accepted();
      if (!canRetry || attempt >= maxRetries || !retryOn.has(res.status)) return res;
      const retryAfterMs = parseRetryAfter(res.headers.get('retry-after'), nowMs()) ?? 0;
      if (retryAfterMs > maxRetryAfterMs) return res;
      if (budget !== undefined && !budget.tryRetry()) return res;
      // The retry is an attempt too: the throttle decides it now, while `res` can still be returned.
      if (throttle !== undefined && !throttle.allow(random())) return res;
      const window = Math.min(cap, base * 2 ** attempt);
      // Free the connection: the body of an answer we retry is never read.
      await res.body?.cancel().catch(() => undefined);
      await sleep(retryAfterMs + random() * window, init?.signal ?? undefined);
    }
  };
}
