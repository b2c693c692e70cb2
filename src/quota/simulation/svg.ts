import type { SimulationReport, SimulationSeries } from './simulate.js';

const W = 960;
const TOP_H = 300;
const BOTTOM_H = 180;
const PAD = { left: 56, right: 16, top: 28, gap: 44, bottom: 36 };

/**
 * The simulation's chart: above, admitted ÷ budget per refresh window for leases, static
 * division and one global owner, with demand ÷ budget; below, the lease fleet's overshoot
 * (admitted ÷ budget − 1, in percent) against the partition bound. Partition and
 * failover are shaded.
 */
export function simulationSvg(report: SimulationReport, series: SimulationSeries): string {
  const n = series.leases.length;
  const plotW = W - PAD.left - PAD.right;
  const x = (k: number) => PAD.left + (k / Math.max(1, n - 1)) * plotW;
  const topY0 = PAD.top;
  const yTop = (v: number) => topY0 + TOP_H - (Math.min(v, 2) / 2) * TOP_H;
  const botY0 = PAD.top + TOP_H + PAD.gap;
  const overMax = Math.max(2, Math.ceil((report.partitionBound.peakRatio - 1) * 100 + 1));
  const overMin = -6;
  const yBot = (pct: number) =>
    botY0 +
    BOTTOM_H -
    ((Math.max(overMin, Math.min(overMax, pct)) - overMin) / (overMax - overMin)) * BOTTOM_H;
  const line = (values: Float64Array, y: (v: number) => number, color: string, extra = '') =>
    `<polyline fill="none" stroke="${color}" stroke-width="1.4" ${extra} points="${Array.from(values, (v, k) => `${x(k).toFixed(1)},${y(v).toFixed(1)}`).join(' ')}"/>`;
  const band = (fromMs: number, toMs: number, color: string, label: string) => {
    const a = x(fromMs / report.refreshMs);
    const b = x(toMs / report.refreshMs);
    return `<rect x="${a.toFixed(1)}" y="${topY0}" width="${Math.max(1, b - a).toFixed(1)}" height="${botY0 + BOTTOM_H - topY0}" fill="${color}" opacity="0.18"/><text x="${a.toFixed(1)}" y="${topY0 - 4}" font-size="10">${label}</text>`;
  };
  const over = series.leases.map((v) => (v - 1) * 100);
  const H = botY0 + BOTTOM_H + PAD.bottom;
  const pct = (v: number) => `${(v * 100).toFixed(2)}%`;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    band(report.flashCrowd.fromMs, report.flashCrowd.toMs, '#f4a261', 'flash crowd'),
    band(report.partition.fromMs, report.partition.toMs, '#e63946', 'partition'),
    band(report.failover.fromMs, report.failover.toMs, '#6a4c93', 'failover'),
    `<line x1="${PAD.left}" x2="${W - PAD.right}" y1="${yTop(1)}" y2="${yTop(1)}" stroke="#999" stroke-dasharray="4 3"/>`,
    line(series.demand, yTop, '#222', 'stroke-dasharray="2 2"'),
    line(series.staticDivision, yTop, '#8d99ae'),
    line(series.globalOwner, yTop, '#f77f00'),
    line(series.leases, yTop, '#1d3557'),
    `<text x="${PAD.left}" y="14" font-size="12">admitted ÷ budget per ${report.refreshMs} ms window (0–200%) — ${report.regions} regions, ${report.agents} agents, ${report.seconds} s, seed ${report.seed}</text>`,
    `<text x="${PAD.left + 4}" y="${yTop(1) - 4}" font-size="10">100%</text>`,
    `<text x="${PAD.left + 8}" y="${yTop(0.42)}" font-size="11" fill="#1d3557">leases: utilization ${pct(report.utilization)}, peak ${pct(report.peakOverBudget)}</text>`,
    `<text x="${PAD.left + 8}" y="${yTop(0.42) + 14}" font-size="11" fill="#f77f00">one global owner: ${pct(report.baselines.globalOwner.utilization)}</text>`,
    `<text x="${PAD.left + 8}" y="${yTop(0.42) + 28}" font-size="11" fill="#8d99ae">static division: ${pct(report.baselines.staticDivision.utilization)}</text>`,
    `<text x="${PAD.left + 8}" y="${yTop(0.42) + 42}" font-size="11" fill="#222">demand (dotted)</text>`,
    `<text x="${PAD.left}" y="${botY0 - 6}" font-size="12">lease fleet overshoot, admitted ÷ budget − 1 (${overMin}% to +${overMax}%); red dashes: partition bound ${pct(report.partitionBound.peakRatio - 1)}</text>`,
    `<line x1="${PAD.left}" x2="${W - PAD.right}" y1="${yBot(0)}" y2="${yBot(0)}" stroke="#999"/>`,
    `<line x1="${PAD.left}" x2="${W - PAD.right}" y1="${yBot((report.partitionBound.peakRatio - 1) * 100)}" y2="${yBot((report.partitionBound.peakRatio - 1) * 100)}" stroke="#e63946" stroke-dasharray="5 3"/>`,
    line(over, yBot, '#1d3557'),
    `<text x="${PAD.left}" y="${H - 12}" font-size="11">0 s</text>`,
    `<text x="${W - PAD.right - 40}" y="${H - 12}" font-size="11">${report.seconds} s</text>`,
    `</svg>`,
    '',
  ].join('\n');
}
