/** Reading the service's Prometheus text in tests. */

/** `sluice_decisions_total` by `path`, summed over policies and statuses. */
export function decisionsByPath(metrics: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of metrics.split('\n')) {
    const m = /^sluice_decisions_total\{.*path="([^"]+)".*\} (\d+)$/.exec(line);
    if (m !== null) out[m[1]!] = (out[m[1]!] ?? 0) + Number(m[2]);
  }
  return out;
}
