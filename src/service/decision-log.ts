import type { Logger } from 'pino';
import { identityHash } from '../stores/identity-hash.js';
import type { DecisionEvent } from './decision-event.js';

/** Share of decisions logged by default: one in a thousand. */
export const DEFAULT_DECISION_LOG_SAMPLE_RATE = 0.001;

/** Options of {@link DecisionLog}. */
export interface DecisionLogOptions {
  readonly log: Logger;
  /** Share of decisions logged, 0 (none) to 1 (every one). @default 0.001 */
  readonly sampleRate?: number;
  /** Uniform in [0, 1). @default Math.random */
  readonly random?: () => number;
}

/**
 * Sampled decision logs: each decision is logged with probability `sampleRate`, as one
 * `decision` line (info) with the policy, status, path, remaining capacity, retry-after,
 * the request id when the caller sent one, and the identity as its hash
 * (`identityHash`, the hash hot keys use), never the identity itself.
 */
export class DecisionLog {
  readonly #log: Logger;
  readonly #rate: number;
  readonly #random: () => number;

  /** Throws `RangeError` for a `sampleRate` outside [0, 1]. */
  constructor(options: DecisionLogOptions) {
    const rate = options.sampleRate ?? DEFAULT_DECISION_LOG_SAMPLE_RATE;
    if (!(rate >= 0 && rate <= 1)) {
      throw new RangeError(`sampleRate must be a number from 0 to 1, got ${rate}`);
    }
    this.#log = options.log;
    this.#rate = rate;
    this.#random = options.random ?? Math.random;
  }

  /** Logs the decision if it is sampled; pass as (part of) the service's decision observer. */
  readonly record = (event: DecisionEvent): void => {
    if (this.#rate === 0 || (this.#rate < 1 && this.#random() >= this.#rate)) return;
    const d = event.decision;
    this.#log.info(
      {
        policy: d.policy,
        status: d.status,
        allowed: d.allowed,
        path: d.path,
        remaining: d.remaining,
        retryAfterMs: d.retryAfterMs,
        identity: identityHash(event.identityTag),
        ...(event.requestId === undefined ? {} : { requestId: event.requestId }),
      },
      'decision',
    );
  };
}
