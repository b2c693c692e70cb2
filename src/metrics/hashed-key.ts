import { createHash } from 'node:crypto';

/**
 * How metrics and the status page show a bucket key: the first 16 hex digits of its
 * SHA-256, never the key (which holds the identity). Pseudonymous, not anonymous: a
 * low-entropy identity space can be enumerated against it.
 */
export function hashedKey(key: string): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 16);
}
