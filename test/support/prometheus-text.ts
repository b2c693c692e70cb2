/** Reading figures out of a Prometheus text exposition (what `GET /metrics` serves). */

/** One sample line: `name{a="x",b="y"} 3`. */
export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** Every sample line of `text`, comments skipped. */
export function samplesOf(text: string): Sample[] {
  return text
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
      if (m === null) throw new Error(`not a sample line: ${line}`);
      const labels: Record<string, string> = {};
      for (const [, k, v] of (m[2] ?? '').matchAll(
        /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g,
      )) {
        labels[k!] = v!.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
      }
      return { name: m[1]!, labels, value: Number(m[3]) };
    });
}

/** The sum of the samples named `name` whose labels include `labels` (0 when there are none). */
export function sumOf(
  text: string,
  name: string,
  labels: Readonly<Record<string, string>> = {},
): number {
  return samplesOf(text)
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

/** `sluice_decisions_total` by `path`, summed over policies and statuses. */
export function decisionsByPath(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of samplesOf(text)) {
    const path = s.labels['path'];
    if (s.name === 'sluice_decisions_total' && path !== undefined)
      out[path] = (out[path] ?? 0) + s.value;
  }
  return out;
}
