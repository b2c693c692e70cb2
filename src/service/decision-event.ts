import type { Decision } from '../core/decision.js';

/**
 * One policy decision as the service reports it to its observers (status page, decision
 * log): the decision under the policy's public name, the identity it was charged to, and
 * the caller's request id.
 */
export interface DecisionEvent {
  readonly decision: Decision;
  /**
   * The bucket key's hash tag (the identity's values, or `@<policy>` for a global policy).
   * Raw request data: observers must pass it through `identityHash` before it leaves the
   * process.
   */
  readonly identityTag: string;
  /** The request id the caller sent (`requestId`, or an `x-request-id` header), if any. */
  readonly requestId?: string;
}

/** Told about every decision the service makes; must not throw and must be cheap. */
export type DecisionObserver = (event: DecisionEvent) => void;
