/** The longest `x-request-id` kept, in characters (as the limiter's own `requestId`). */
const MAX_REQUEST_ID_LENGTH = 128;

/**
 * A caller's `x-request-id` as logged: kept when it is 1 to 128 printable ASCII
 * characters, dropped otherwise, so a request cannot write control characters or a
 * large blob into the logs.
 */
export function requestIdOf(value: unknown): string | undefined {
  const v = Array.isArray(value) ? (value[0] as unknown) : value;
  if (typeof v !== 'string' || v.length === 0 || v.length > MAX_REQUEST_ID_LENGTH) return undefined;
  return /^[\x21-\x7e]+$/.test(v) ? v : undefined;
}
