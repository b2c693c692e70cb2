import type * as http from 'node:http';

const DEFAULT_HEADERS_TIMEOUT_MS = 10_000;
const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;
const DEFAULT_KEEP_ALIVE_TIMEOUT_MS = 5_000;

/** The timeouts of {@link serverTimeouts}, in ms; absent: the defaults (10 s, 30 s, 5 s). */
export interface HttpTimeoutOptions {
  readonly headersTimeoutMs?: number;
  readonly requestTimeoutMs?: number;
  readonly keepAliveTimeoutMs?: number;
}

function positiveMs(v: number, name: string): number {
  if (!Number.isSafeInteger(v) || v <= 0) {
    throw new RangeError(`${name} must be a positive whole number of ms, got ${v}`);
  }
  return v;
}

/** Node's server timeouts from the options; Node's own defaults (300 s) are far too long. */
export function serverTimeouts(options: HttpTimeoutOptions): http.ServerOptions {
  const headersTimeout = positiveMs(
    options.headersTimeoutMs ?? DEFAULT_HEADERS_TIMEOUT_MS,
    'headersTimeoutMs',
  );
  const requestTimeout = positiveMs(
    options.requestTimeoutMs ?? Math.max(DEFAULT_REQUEST_TIMEOUT_MS, headersTimeout),
    'requestTimeoutMs',
  );
  if (headersTimeout > requestTimeout) {
    throw new RangeError(
      `headersTimeoutMs (${headersTimeout}) must not exceed requestTimeoutMs (${requestTimeout})`,
    );
  }
  return {
    headersTimeout,
    requestTimeout,
    keepAliveTimeout: positiveMs(
      options.keepAliveTimeoutMs ?? DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
      'keepAliveTimeoutMs',
    ),
    // Node looks for expired requests on this period (30 s by default), so a short
    // timeout needs a shorter period to take effect on time.
    connectionsCheckingInterval: Math.max(10, Math.min(1_000, Math.floor(headersTimeout / 2))),
  };
}
