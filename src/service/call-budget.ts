import type { CallContext } from './grpc/handlers.js';

/**
 * Time kept from the caller's deadline for the answer's way back, in ms: the store is
 * given up this long before the caller would give up on Sluice.
 */
const DEADLINE_MARGIN_MS = 5;

/**
 * The limiter options that carry a call's deadline (less the margin) and cancellation,
 * made afresh for each store call from what is left of the caller's time.
 */
export function callBudget(
  context: CallContext | undefined,
): () => { timeoutMs?: number; signal?: AbortSignal } {
  if (context === undefined) return () => ({});
  const { signal, timeoutMs } = context;
  if (timeoutMs === undefined) return () => ({ signal });
  const endsAt = performance.now() + timeoutMs - DEADLINE_MARGIN_MS;
  // Whole ms: the limiter keeps one deadline queue per distinct length.
  return () => ({ signal, timeoutMs: Math.max(1, Math.floor(endsAt - performance.now())) });
}
