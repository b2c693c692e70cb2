import type { AlgorithmDecision } from '../../core/decision.js';
import { StoreError } from '../../core/errors.js';
import type { StoreRequest } from '../store.js';

const STATUS = ['OK', 'OVER_LIMIT', 'INVALID_POLICY'] as const;
/** One item of applyOne.lua's packed reply: struct '<Bdddd'. */
const ITEM_BYTES = 1 + 4 * 8;

/**
 * Decodes one batch's reply from applyBatches.lua into decisions, in request order: a
 * binary string of packed items (see lua/includes/applyOne.lua). Domain failures come
 * back as `[-code, item]` and become a `StoreError`; this is the one place that knows
 * those codes. `keys` are the full Redis keys, for the error message.
 */
export function decodeApplyBatch(
  reply: unknown,
  batch: readonly StoreRequest[],
  keys: readonly string[],
): AlgorithmDecision[] {
  if (Array.isArray(reply) && typeof reply[0] === 'number' && reply[0] < 0) {
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
  if (!Buffer.isBuffer(reply) || reply.length !== batch.length * ITEM_BYTES) throw malformed(reply);
  return batch.map((r, i): AlgorithmDecision => {
    const at = i * ITEM_BYTES;
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
}

function fail(e: StoreError): never {
  throw e;
}

function malformed(reply: unknown): StoreError {
  const shown = Buffer.isBuffer(reply) ? reply.toString('hex') : JSON.stringify(reply);
  return new StoreError(
    'SLUICE_ERR_STORE_UNAVAILABLE',
    `unexpected reply from applyBatches.lua: ${shown?.slice(0, 200)}`,
  );
}
