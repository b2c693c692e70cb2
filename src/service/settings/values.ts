import { goDurationMs, settingValue, wholeNumber } from '../../config/env-values.js';
import type { LeaseFallback } from '../../quota/lease.js';

/** Log levels `LOG_LEVEL` accepts (upstream's logrus names, any case), as pino names them. */
export const LOG_LEVELS: Readonly<Record<string, string>> = Object.freeze({
  trace: 'trace',
  debug: 'debug',
  info: 'info',
  warn: 'warn',
  warning: 'warn',
  error: 'error',
  fatal: 'fatal',
  panic: 'fatal',
});

/** The largest over-limit cache accepted, in bytes (1 GiB): it holds small entries only. */
export const MAX_LOCAL_CACHE_BYTES = 1_073_741_824;

/** A Go duration a Node timer can hold: at most 2^31 − 1 ms (about 24.8 days). */
export const timerDuration = settingValue('a duration such as 10s or 24h, at most 596h', (t) => {
  const ms = goDurationMs(t);
  return ms !== undefined && ms <= 2 ** 31 - 1 ? ms : undefined;
});

/** The largest descriptor limit accepted (count or length). */
export const MAX_DESCRIPTOR_LIMIT = 1_000_000;

/** The longest HTTP server timeout accepted, in ms (an hour). */
export const MAX_HTTP_TIMEOUT_MS = 3_600_000;

export const descriptorLimit = wholeNumber(1, MAX_DESCRIPTOR_LIMIT);
export const httpTimeout = wholeNumber(1, MAX_HTTP_TIMEOUT_MS, ' of milliseconds');

/** The longest lease refresh period accepted, in ms. */
export const MAX_LEASE_REFRESH_MS = 60_000;

/** Controllers: `host:port` items, comma-separated, tried in turn. */
export const controllerList = settingValue(
  'comma-separated host:port addresses (port 1-65535)',
  (t): readonly string[] | undefined => {
    const items = t.split(',').map((i) => i.trim());
    return items.every((i) => {
      const m = /^(\[[0-9A-Fa-f:.]+\]|[^\s:[\]]+):([0-9]{1,5})$/.exec(i);
      return m !== null && Number(m[2]) >= 1 && Number(m[2]) <= 65_535;
    })
      ? Object.freeze(items)
      : undefined;
  },
);

/** Policy or rule names, comma-separated, each non-empty. */
export const nameList = settingValue(
  'comma-separated policy or rule names',
  (t): readonly string[] | undefined => {
    const items = t.split(',').map((i) => i.trim());
    return items.every((i) => i !== '') ? Object.freeze([...new Set(items)]) : undefined;
  },
);

/** A lease agent's fallback: `deny`, `store`, or a static rate in units per second. */
export const leaseFallback = settingValue(
  'deny, store, or a static rate in units per second (a number ≥ 0)',
  (t): LeaseFallback | undefined => {
    const lower = t.toLowerCase();
    if (lower === 'deny' || lower === 'store') return Object.freeze({ kind: lower });
    const n = /^[0-9]+(\.[0-9]+)?$/.test(t) ? Number(t) : NaN;
    return Number.isFinite(n) ? Object.freeze({ kind: 'static', rate: n }) : undefined;
  },
);
