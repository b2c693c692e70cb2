/**
 * Units each descriptor adds to its counter (utils/utilities.go, `GetHitsAddends`): a
 * descriptor's own `hits_addend`, when present, is used as given, 0 included (0 checks
 * without counting); otherwise the request's `hits_addend`, where 0 or absent means 1.
 *
 * @param requestHitsAddend `RateLimitRequest.hits_addend` (uint32; absent reads as 0)
 * @param descriptorHitsAddends `RateLimitDescriptor.hits_addend` per descriptor
 *   (a wrapped uint64, so "absent" and 0 differ)
 */
export function hitsAddends(
  requestHitsAddend: number | undefined,
  descriptorHitsAddends: readonly (number | undefined)[],
): number[] {
  const fallback = Math.max(1, requestHitsAddend ?? 0);
  return descriptorHitsAddends.map((own) => own ?? fallback);
}
