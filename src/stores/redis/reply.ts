import type { AlgorithmDecision } from '../../core/decision.js';
import { StoreError } from '../../core/errors.js';
import type { StoreRequest } from '../store.js';

const STATUS = ['OK', 'OVER_LIMIT', 'INVALID_POLICY'] as const;
const FIELDS = 5;

/** applyBatch.lua's reply, decoded. */
export interface AppliedBatch {
  readonly decisions: AlgorithmDecision[];
  /** The instant (server or client clock, ms) the batch was decided at. */
  readonly decidedAtMs: number;
}

/**
 * Decodes applyBatch.lua's reply into decisions, in request order, plus the instant it
 * decided at (its last field). Domain failures come back as `[-code, item]` and become a
 * `StoreError`; this is the one place that knows those codes. `keys` are the full Redis
 * keys, for the error message.
 */
export function decodeApplyBatch(
  reply: unknown,
  batch: readonly StoreRequest[],
  keys: readonly string[],
): AppliedBatch {
  if (Array.isArray(reply) && reply.length === batch.length * FIELDS + 1) {
    const decidedAtMs = Number(reply.at(-1));
    if (!Number.isFinite(decidedAtMs)) throw malformed(reply);
    return { decisions: decodeDecisions(reply.slice(0, -1), batch, keys), decidedAtMs };
  }
  // A domain failure ([-code, item]) throws its StoreError here; anything else is malformed.
  decodeDecisions(reply, batch, keys);
  throw malformed(reply);
}

/**
 * Decodes a reply of 5 fields per request (refundBatch.lua's, or applyBatch.lua's without
 * its last field) into decisions, in request order.
 */
export function decodeDecisions(
  reply: unknown,
  batch: readonly StoreRequest[],
  keys: readonly string[],
): AlgorithmDecision[] {
  if (!Array.isArray(reply)) throw malformed(reply);
  if (typeof reply[0] === 'number' && reply[0] < 0) {
    const item = Number(reply[1]) - 1;
    if (reply[0] === -1) {
      return fail(
        new StoreError(
          'SLUICE_ERR_STORE_STATE_CORRUPT',
          `Redis key ${JSON.stringify(keys[item] ?? '?')} holds a value that is not ${batch[item]?.algorithm.kind ?? 'Sluice'} state; it was left untouched`,
        ),
      );
    }
    throw malformed(reply);
  }
  if (reply.length !== batch.length * FIELDS) throw malformed(reply);
  return batch.map((r, i): AlgorithmDecision => {
    const j = i * FIELDS;
    const status = STATUS[reply[j] as number];
    if (status === undefined) throw malformed(reply);
    const delay = reply[j + 4] as string;
    const d: AlgorithmDecision = {
      status,
      allowed: status === 'OK',
      limit: r.algorithm.capacity(r.params),
      remaining: Number(reply[j + 1]),
      retryAfterMs: Number(reply[j + 2]),
      resetAfterMs: Number(reply[j + 3]),
    };
    return delay === '' ? d : { ...d, delayMs: Number(delay) };
  });
}

function fail(e: StoreError): never {
  throw e;
}

function malformed(reply: unknown): StoreError {
  return new StoreError(
    'SLUICE_ERR_STORE_UNAVAILABLE',
    `unexpected reply from a Sluice script: ${JSON.stringify(reply)?.slice(0, 200)}`,
  );
}
