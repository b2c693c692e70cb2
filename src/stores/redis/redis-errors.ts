import { ReplyError } from 'ioredis';
import { StoreError, type StoreFailureReason } from '../../core/errors.js';

/** An outcome of failure, for any outcome type with the `{ ok: false, error }` shape. */
export const failed = (error: StoreError): { ok: false; error: StoreError } => ({
  ok: false,
  error,
});

/** A StoreError for what ioredis threw, with the reason its reply (or its absence) gives. */
export function asRedisError(cause: unknown): StoreError {
  return cause instanceof StoreError
    ? cause
    : new StoreError('SLUICE_ERR_STORE_UNAVAILABLE', `Redis: ${(cause as Error).message}`, {
        cause,
        reason: reasonOf(cause),
      });
}

/** Error replies by their first word; anything that is not a reply is the connection's. */
const REPLY_REASONS: Readonly<Record<string, StoreFailureReason>> = {
  OOM: 'oom',
  WRONGTYPE: 'wrongtype',
  NOAUTH: 'auth',
  WRONGPASS: 'auth',
  NOPERM: 'auth',
  READONLY: 'readonly',
  LOADING: 'busy',
  BUSY: 'busy',
  CLUSTERDOWN: 'cluster',
  MASTERDOWN: 'cluster',
  TRYAGAIN: 'cluster',
};

function reasonOf(cause: unknown): StoreFailureReason {
  if (!(cause instanceof ReplyError)) return 'connection';
  const first = /^[A-Z]+/.exec((cause as Error).message)?.[0] ?? '';
  return REPLY_REASONS[first] ?? 'script';
}
