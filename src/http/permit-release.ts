import type { ServerResponse } from 'node:http';
import type { AdmissionPermit } from '../overload/admission-boundary.js';
import type { PermitOutcome } from '../overload/concurrency-limiter.js';

/**
 * How a response ended, for the admission boundary: 503 and 504 say the dependency is
 * overloaded or slow (`dropped`), other 5xx are failures, a response the client went
 * away from says nothing about capacity (`ignore`).
 */
export function permitOutcomeOf(res: ServerResponse): PermitOutcome {
  if (!res.writableFinished) return 'ignore';
  const s = res.statusCode;
  if (s === 503 || s === 504) return 'dropped';
  return s >= 500 ? 'failure' : 'success';
}

/** Releases `permit` when the response closes (finished, or its connection dropped). */
export function releaseOnClose(res: ServerResponse, permit: AdmissionPermit): void {
  res.once('close', () => permit.release(permitOutcomeOf(res)));
}
