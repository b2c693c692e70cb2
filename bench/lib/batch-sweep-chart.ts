/** The SVG chart of bench/local-and-batching.ts: per batch size, three panels on log scales. */

/** One batch size's measured figures. */
export interface SweepPoint {
  readonly size: number;
  readonly callsPerDecision: number;
  readonly decisionsPerSecond: number;
  /** Units, over the whole run. */
  readonly underUse: number;
  /** Units, the largest over any window of the run. */
  readonly overshoot: number;
  /** explain's bound for the same setup: N × size. */
  readonly bound: number;
}

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');

function panel(
  out: string[],
  x0: number,
  title: string,
  points: readonly SweepPoint[],
  series: readonly { label: string; color: string; value: (p: SweepPoint) => number }[],
): void {
  const w = 260;
  const h = 220;
  const top = 60;
  const values = points.flatMap((p) => series.map((s) => s.value(p))).filter((v) => v > 0);
  const lo = 10 ** Math.floor(Math.log10(Math.min(...values)));
  const hi = 10 ** Math.ceil(Math.log10(Math.max(...values)));
  const y = (v: number): number =>
    top +
    h -
    ((Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * h;
  const x = (i: number): number => x0 + 30 + (i * (w - 60)) / Math.max(1, points.length - 1);
  out.push(`<text x="${x0}" y="${top - 25}" font-weight="bold">${esc(title)}</text>`);
  out.push(`<rect x="${x0}" y="${top}" width="${w}" height="${h}" fill="none" stroke="#999"/>`);
  for (let d = lo; d <= hi; d *= 10) {
    out.push(
      `<line x1="${x0}" x2="${x0 + w}" y1="${y(d)}" y2="${y(d)}" stroke="#eee"/>`,
      `<text x="${x0 - 4}" y="${y(d) + 4}" text-anchor="end">${esc(d >= 1 ? d.toLocaleString('en-US') : String(d))}</text>`,
    );
  }
  points.forEach((p, i) => {
    out.push(`<text x="${x(i)}" y="${top + h + 16}" text-anchor="middle">${p.size}</text>`);
  });
  out.push(`<text x="${x0 + w / 2}" y="${top + h + 32}" text-anchor="middle">batch size</text>`);
  series.forEach((s, k) => {
    const pts = points
      .map((p, i) => [x(i), y(s.value(p))] as const)
      .filter((_, i) => s.value(points[i]!) > 0);
    out.push(
      `<polyline fill="none" stroke="${s.color}" stroke-width="2" points="${pts.map(([a, b]) => `${a},${b}`).join(' ')}"/>`,
      ...pts.map(([a, b]) => `<circle cx="${a}" cy="${b}" r="3" fill="${s.color}"/>`),
      `<rect x="${x0 + k * 130}" y="${top - 16}" width="10" height="10" fill="${s.color}"/>`,
      `<text x="${x0 + k * 130 + 14}" y="${top - 7}">${esc(s.label)}</text>`,
    );
  });
}

/** The chart: remote calls per decision, decisions/s, and measured vs bound units. */
export function sweepChart(points: readonly SweepPoint[], caption: string): string {
  const out: string[] = [];
  const width = 3 * 330 + 40;
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="340" viewBox="0 0 ${width} 340" font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="50" y="18" font-size="13" font-weight="bold">${esc(caption)}</text>`,
  );
  panel(out, 50, 'remote calls per decision (log)', points, [
    { label: 'calls/decision', color: '#1f77b4', value: (p) => p.callsPerDecision },
  ]);
  panel(out, 380, 'decisions/s (log)', points, [
    { label: 'decisions/s', color: '#2ca02c', value: (p) => p.decisionsPerSecond },
  ]);
  panel(out, 710, 'units (log): measured vs bound', points, [
    { label: 'bound N×size', color: '#999', value: (p) => p.bound },
    { label: 'under-use', color: '#d62728', value: (p) => p.underUse },
  ]);
  out.push(
    `<text x="710" y="330" fill="#ff7f0e">${esc(`overshoot (max over windows): ${points.map((p) => p.overshoot.toFixed(0)).join(', ')}`)}</text>`,
  );
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
