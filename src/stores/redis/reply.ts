import type { AlgorithmDecision } from '../../core/decision.js';
import { StoreError } from '../../core/errors.js';
import type { StoreRequest } from '../store.js';

// The scripts share these (lua/includes/constants.lua; test/stores/redis/lua-constants.test.ts).
/** Decision statuses by their code in a reply. */
export const STATUS = ['OK', 'OVER_LIMIT', 'INVALID_POLICY'] as const;
/** Fields per item of refundBatch.lua's text reply. */
export const REFUND_REPLY_FIELDS = 5;
/** One item of applyOne.lua's packed reply: struct '<Bdddd'. */
export const DECISION_BYTES = 1 + 4 * 8;
/** The packed reply's last field: the instant the batch was decided at, a double. */
export const DECIDED_AT_BYTES = 8;
/** First field of a domain failure reply `[code, item]`: the item's key is not Sluice state. */
export const NOT_SLUICE_STATE = -1;

/** One batch's reply from applyBatches.lua, decoded. */
export interface AppliedBatch {
  readonly decisions: AlgorithmDecision[];
  /** The instant (server or client clock, ms) the batch was decided at. */
  readonly decidedAtMs: number;
}

/**
 * Decodes one batch's reply from applyBatches.lua: a binary string of packed items (see
 * lua/includes/applyOne.lua) and the instant the batch was decided at (what
 * refundBatch.lua needs to find the window or log entry of the consumption). Domain
 * failures come back as `[-code, item]` and become a `StoreError`. `keys` are the full
 * Redis keys, for the error message.
 */
export function decodeApplyBatch(
  reply: unknown,
  batch: readonly StoreRequest[],
  keys: readonly string[],
): AppliedBatch {
  if (Array.isArray(reply)) return fail(domainFailure(reply, batch, keys));
  if (!Buffer.isBuffer(reply) || reply.length !== batch.length * DECISION_BYTES + DECIDED_AT_BYTES)
    throw malformed(reply);
  const decisions = batch.map((r, i): AlgorithmDecision => {
    const at = i * DECISION_BYTES;
    const status = STATUS[reply.readUInt8(at)];
    if (status === undefined) throw malformed(reply);
    const delay = reply.readDoubleLE(at + 25);
    const d: AlgorithmDecision = {
      status,
      allowed: status === 'OK',
      limit: r.algorithm.capacity(r.params),
      remaining: reply.readDoubleLE(at + 1),
      retryAfterMs: reply.readDoubleLE(at + 9),
      resetAfterMs: reply.readDoubleLE(at + 17),
    };
    return Number.isNaN(delay) ? d : { ...d, delayMs: delay };
  });
  const decidedAtMs = reply.readDoubleLE(batch.length * DECISION_BYTES);
  if (!Number.isFinite(decidedAtMs)) throw malformed(reply);
  return { decisions, decidedAtMs };
}

/**
 * Decodes refundBatch.lua's text reply, 5 fields per request (status, then remaining,
 * retry-after, reset-after and delay as `%.17g` strings, '' for no delay), into
 * decisions, in request order.
 */
export function decodeDecisions(
  reply: unknown,
  batch: readonly StoreRequest[],
  keys: readonly string[],
): AlgorithmDecision[] {
  if (!Array.isArray(reply)) throw malformed(reply);
  if (typeof reply[0] === 'number' && reply[0] < 0) return fail(domainFailure(reply, batch, keys));
  if (reply.length !== batch.length * REFUND_REPLY_FIELDS) throw malformed(reply);
  return batch.map((r, i): AlgorithmDecision => {
    const j = i * REFUND_REPLY_FIELDS;
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

/** `[-code, item]`, the one place that knows the scripts' domain failure codes. */
function domainFailure(
  reply: readonly unknown[],
  batch: readonly StoreRequest[],
  keys: readonly string[],
): StoreError {
  if (reply[0] === NOT_SLUICE_STATE) {
    const item = Number(reply[1]) - 1;
    return new StoreError(
      'SLUICE_ERR_STORE_STATE_CORRUPT',
      `Redis key ${JSON.stringify(keys[item] ?? '?')} holds a value that is not ${batch[item]?.algorithm.kind ?? 'Sluice'} state; it was left untouched`,
    );
  }
  return malformed(reply);
}

function fail(e: StoreError): never {
  throw e;
}

function malformed(reply: unknown): StoreError {
  const shown = Buffer.isBuffer(reply) ? reply.toString('hex') : JSON.stringify(reply);
  return new StoreError(
    'SLUICE_ERR_STORE_UNAVAILABLE',
    `unexpected reply from a Sluice script: ${shown?.slice(0, 200)}`,
  );
}
