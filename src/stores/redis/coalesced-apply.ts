import { StoreError } from '../../core/errors.js';
import { ScriptCoalescer } from './coalescer.js';
import type { SafeConnection } from './connection.js';
import type { GroupOutcome } from './cross-slot.js';
import { decodeApplyBatch } from './reply.js';
import { applyBatchScript, type ScriptCall } from './scripts.js';
import { encodeBatches, splitReplies, type WireBatch } from './wire.js';

/**
 * applyBatches on `connection`, coalesced: the batches given within one turn of the event
 * loop go as one script call per slot (see ScriptCoalescer), each answered on its own.
 */
export function coalescedApply(
  connection: SafeConnection,
  maxBatchesPerCall: number | undefined,
): ScriptCoalescer<WireBatch, GroupOutcome> {
  const script = applyBatchScript(connection.client);
  return new ScriptCoalescer<WireBatch, GroupOutcome>(
    (batches) => applyCall(connection, script, batches),
    maxBatchesPerCall,
  );
}

/**
 * One applyBatches call carrying `batches` (coalesced checks of one slot), decoded into
 * one outcome per batch as its reply arrives. Never rejects: a failed call fails each of
 * its batches.
 */
function applyCall(
  connection: SafeConnection,
  script: ScriptCall,
  batches: readonly WireBatch[],
): Promise<GroupOutcome[]> {
  const { keys, packed } = encodeBatches(batches);
  return connection.script(
    () => script(keys, [packed]),
    (reply) => decodeReplies(reply, batches),
    (error) => batches.map(() => ({ ok: false as const, error })),
    'applyBatches',
    keys[0],
  );
}

function decodeReplies(reply: unknown, batches: readonly WireBatch[]): GroupOutcome[] {
  let replies: unknown[];
  try {
    replies = splitReplies(reply, batches.length);
  } catch (cause) {
    const error = new StoreError(
      'SLUICE_ERR_STORE_UNAVAILABLE',
      `Redis: ${(cause as Error).message}`,
      { cause },
    );
    return batches.map(() => ({ ok: false as const, error }));
  }
  return batches.map((b, i): GroupOutcome => {
    try {
      const decided = decodeApplyBatch(replies[i], b.items, b.keys);
      const decisions = b.dryRun ? decided.decisions.slice(0, -1) : decided.decisions;
      return { ok: true, decisions, decidedAtMs: decided.decidedAtMs };
    } catch (error) {
      return { ok: false, error: error as StoreError };
    }
  });
}
