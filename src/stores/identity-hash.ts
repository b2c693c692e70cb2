import { createHash } from 'node:crypto';

/**
 * The name an identity goes by outside the process: the first 16 hex digits of the
 * SHA-256 of a bucket key's hash tag (`hashTagOf`). Hot keys, the status page and
 * decision logs all use it, so one identity has the same hash in each. It is a
 * pseudonym, not anonymity: a small id space (tenant-1 … tenant-9999) can be enumerated
 * against it.
 */
export function identityHash(tag: string): string {
  return createHash('sha256').update(tag).digest('hex').slice(0, 16);
}
