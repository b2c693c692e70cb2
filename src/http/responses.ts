/**
 * The bodies and statuses the HTTP edge answers with when it does not let a request
 * through. Bodies carry only the stable policy name and a delay: never a storage key, a
 * descriptor value, a classification or an internal error.
 */

/** Content type of every response the middleware writes itself. */
export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/** A response the middleware writes instead of calling the route handler. */
export interface EdgeResponse {
  readonly statusCode: 429 | 503 | 500;
  /** Lower-case header names; `content-type` included. */
  readonly headers: Readonly<Record<string, string>>;
  /** JSON text. */
  readonly body: string;
}

/** The 429 body: `{"error":"rate limit exceeded","policy":"<name>","retry_after_seconds":N}`. */
export function overLimitBody(policy: string, retryAfterSeconds: number): string {
  return JSON.stringify({
    error: 'rate limit exceeded',
    policy,
    retry_after_seconds: retryAfterSeconds,
  });
}

/**
 * The 503 body when the limiter could not decide and a `closed` policy denied. Distinct
 * from the 429 body so that clients and dashboards never mistake an outage for a limit.
 */
export const UNAVAILABLE_BODY = JSON.stringify({ error: 'rate limiter unavailable' });

/** The 500 body for a descriptor builder that threw or an invalid policy/descriptor. */
export const INTERNAL_ERROR_BODY = JSON.stringify({ error: 'internal error' });

/** 429 Too Many Requests with `Retry-After` and the given rate-limit headers. */
export function overLimitResponse(
  policy: string,
  retryAfterSeconds: number,
  rateLimitHeaders: Readonly<Record<string, string>>,
): EdgeResponse {
  return {
    statusCode: 429,
    headers: {
      ...rateLimitHeaders,
      'retry-after': String(retryAfterSeconds),
      'content-type': JSON_CONTENT_TYPE,
    },
    body: overLimitBody(policy, retryAfterSeconds),
  };
}

/** 503 Service Unavailable: the limiter could not decide (fail-closed). */
export function unavailableResponse(): EdgeResponse {
  return {
    statusCode: 503,
    headers: { 'content-type': JSON_CONTENT_TYPE },
    body: UNAVAILABLE_BODY,
  };
}

/**
 * 503 from the admission boundary: `{"error":"overloaded","reason":"queue-full",
 * "code":"SLUICE_ERR_OVERLOAD_QUEUE_FULL","retry_after_seconds":1}`. The reason says which
 * control refused (`shed`, `queue-full`, `queue-timeout`, `deadline`, `breaker-open`).
 */
export function overloadedResponse(
  reason: string,
  code: string,
  retryAfterSeconds: number,
): EdgeResponse {
  return {
    statusCode: 503,
    headers: { 'retry-after': String(retryAfterSeconds), 'content-type': JSON_CONTENT_TYPE },
    body: JSON.stringify({
      error: 'overloaded',
      reason,
      code,
      retry_after_seconds: retryAfterSeconds,
    }),
  };
}

/** 500 with a generic body; the error itself goes to the `onError` hook only. */
export function internalErrorResponse(): EdgeResponse {
  return {
    statusCode: 500,
    headers: { 'content-type': JSON_CONTENT_TYPE },
    body: INTERNAL_ERROR_BODY,
  };
}
