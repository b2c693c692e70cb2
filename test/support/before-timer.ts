/**
 * Checking that a call answered at its deadline without a wall-clock bound that a loaded
 * machine breaks.
 */

/**
 * Awaits `pending` (a call just started) beside a reference timer of `refMs` started right
 * after it, and says whether the call answered first. A call cut off by its own deadline
 * timer (shorter than `refMs`) always does, however late the event loop runs: due timers
 * run in order of expiry, and the call answers in the microtasks after its deadline's
 * timer. A call that waited for anything else (a reconnect, the store, a later timer) can
 * lose.
 */
export async function beforeTimer<T>(
  pending: Promise<T>,
  refMs: number,
): Promise<{ r: T; ok: boolean }> {
  let fired = false;
  const timer = setTimeout(() => (fired = true), refMs);
  const r = await pending;
  clearTimeout(timer);
  return { r, ok: !fired };
}
