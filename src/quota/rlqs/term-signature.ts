import { createHmac, timingSafeEqual } from 'node:crypto';
import { PolicyError } from '../../core/errors.js';

/** The shortest term secret accepted, in bytes. */
export const MIN_TERM_SECRET_BYTES = 16;

/**
 * Signs the fencing terms a controller hands out, and checks a term an agent says it has
 * seen (`sluice-seen-token`): an HMAC-SHA256 of the term under a secret every controller
 * of the domain shares (`--term-secret-file`). A leader steps down for a higher seen
 * term only when its signature holds, so a peer that may stream (it authenticated) but
 * forges a term cannot make the leader give up its term. The secret is a file, not a
 * Redis key: a term must stay verifiable when the controllers' Redis comes back empty,
 * which is when an agent's seen term matters.
 */
export class TermSigner {
  readonly #secret: Buffer;

  constructor(secret: Buffer) {
    if (secret.length < MIN_TERM_SECRET_BYTES)
      throw new PolicyError(
        'SLUICE_ERR_QUOTA_CONFIG_INVALID',
        `--term-secret-file must hold at least ${MIN_TERM_SECRET_BYTES} bytes, got ${secret.length}`,
        { issues: [{ path: 'termSecret', message: `at least ${MIN_TERM_SECRET_BYTES} bytes` }] },
      );
    this.#secret = secret;
  }

  /** The signature of `term`, hex. */
  sign(term: number): string {
    return createHmac('sha256', this.#secret).update(`sluice-term:${term}`).digest('hex');
  }

  /** Whether `signature` is this secret's signature of `term` (compared in constant time). */
  verify(term: number, signature: string | undefined): boolean {
    if (signature === undefined) return false;
    const want = Buffer.from(this.sign(term), 'hex');
    const got = Buffer.from(signature, 'hex');
    return got.length === want.length && timingSafeEqual(got, want);
  }
}
