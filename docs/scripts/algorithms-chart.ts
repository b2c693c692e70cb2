/**
 * Generates docs/algorithms.svg and the table between the chart-table markers in
 * docs/algorithms.md: the same bursty traffic through each algorithm's pure transition.
 * Deterministic (seeded generator, fixed formatting): CI regenerates and expects no diff
 * (test/docs/algorithms-chart.test.ts). Run: `npm run docs:algorithms`.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Algorithm } from '../../src/algorithms/algorithm.js';
import { fixedWindow } from '../../src/algorithms/fixed-window.js';
import { gcra } from '../../src/algorithms/gcra.js';
import { leakyBucket } from '../../src/algorithms/leaky-bucket.js';
import { slidingLog } from '../../src/algorithms/sliding-log.js';
import { slidingWindowCounter } from '../../src/algorithms/sliding-window-counter.js';
import { tokenBucket } from '../../src/algorithms/token-bucket.js';

export const SVG_PATH = fileURLToPath(new URL('../algorithms.svg', import.meta.url));
export const MD_PATH = fileURLToPath(new URL('../algorithms.md', import.meta.url));
export const TABLE_START = '<!-- chart-table:start -->';
export const TABLE_END = '<!-- chart-table:end -->';

/** mulberry32: a tiny seeded PRNG, so the traffic is the same on every run. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** Request instants (whole ms, sorted): quiet, a 40-request burst across the 2 s boundary, 20/s for 2 s, quiet. */
export function traffic(): number[] {
  const rnd = prng(20_240_601);
  const at = (fromMs: number, toMs: number): number => Math.floor(fromMs + rnd() * (toMs - fromMs));
  const t: number[] = [];
  for (let ms = 100; ms < 1_000; ms += 180 + Math.floor(rnd() * 120)) t.push(ms); // quiet, ~4/s
  for (let i = 0; i < 20; i++) t.push(at(1_975, 2_000), at(2_000, 2_025)); // 40 within 50 ms
  for (let ms = 2_300; ms < 3_000; ms += 200 + Math.floor(rnd() * 150)) t.push(ms); // quiet
  for (let k = 0; k < 40; k++) t.push(3_000 + k * 50 + Math.floor(rnd() * 30)); // 20/s = 2x rate
  for (let ms = 5_150; ms < 6_000; ms += 200 + Math.floor(rnd() * 150)) t.push(ms); // quiet
  return t.sort((a, b) => a - b);
}

/** One request's fate; `goMs` is when it may proceed: arrival, plus `delayMs` in delay mode. */
type Outcome = { readonly tMs: number; readonly allowed: boolean; readonly goMs: number };
type Row = { readonly name: string; readonly fields: string; readonly outcomes: Outcome[] };

/** Feeds every request (cost 1) through one fresh bucket; params parsed from policy fields. */
function row<P, S>(name: string, alg: Algorithm<P, S>, fields: Record<string, unknown>): Row {
  const params = alg.paramsSchema.parse(fields);
  let state: S | undefined;
  const outcomes = traffic().map((tMs) => {
    const { state: next, decision: d } = alg.transition(state, tMs, 1, params);
    state = next;
    return { tMs, allowed: d.allowed, goMs: tMs + (d.delayMs ?? 0) };
  });
  const shown = Object.entries(fields).map(([k, v]) => `${k}: ${String(v)}`);
  return { name, fields: shown.join(', '), outcomes };
}

function rows(): Row[] {
  const bucket = { rate: 10, period: '1s', burst: 10 };
  const leaky = { rate: 10, period: '1s', capacity: 10 };
  const window = { limit: 10, window: '1s' };
  return [
    row('token-bucket', tokenBucket, bucket),
    row('gcra', gcra, bucket),
    row('leaky-bucket (reject)', leakyBucket, { ...leaky, mode: 'reject' }),
    row('leaky-bucket (delay)', leakyBucket, { ...leaky, mode: 'delay' }),
    row('fixed-window', fixedWindow, window),
    row('sliding-window-counter', slidingWindowCounter, window),
    row('sliding-log', slidingLog, window),
  ];
}

/** The most instants within any half-open interval [t, t + spanMs). */
function maxIn(instantsMs: readonly number[], spanMs: number): number {
  const s = [...instantsMs].sort((a, b) => a - b);
  let best = 0;
  for (let i = 0, j = 0; i < s.length; i++) {
    while (j < s.length && s[j]! < s[i]! + spanMs) j++;
    best = Math.max(best, j - i);
  }
  return best;
}

/** The markdown table, padded the way prettier pads it (so `prettier --check` passes). */
function table(all: readonly Row[]): string {
  const head = ['algorithm', 'policy fields', 'admitted', 'denied', 'max in 1 s', 'max in 100 ms'];
  const body = all.map((r) => {
    const go = r.outcomes.filter((o) => o.allowed).map((o) => o.goMs);
    const counts = [go.length, r.outcomes.length - go.length, maxIn(go, 1_000), maxIn(go, 100)];
    return [`\`${r.name}\``, r.fields, ...counts.map(String)];
  });
  const widths = head.map((h, c) => Math.max(h.length, ...body.map((b) => b[c]!.length)));
  const line = (cells: readonly string[]): string =>
    `| ${cells.map((x, c) => (c >= 2 ? x.padStart(widths[c]!) : x.padEnd(widths[c]!))).join(' | ')} |`;
  const rule = `| ${widths.map((w, c) => (c >= 2 ? '-'.repeat(w - 1) + ':' : '-'.repeat(w))).join(' | ')} |`;
  return [line(head), rule, ...body.map(line)].join('\n');
}

const [W, X0, X1, T_MAX_MS, TOP] = [1_220, 390, 1_190, 6_500, 104]; // labels left of X0
const x = (ms: number): string => (X0 + ((X1 - X0) * ms) / T_MAX_MS).toFixed(1);
const STYLE = `<style>
  text { font-family: Helvetica, Arial, sans-serif; font-size: 13px; fill: #222 } .mid { text-anchor: middle }
  .title { font-size: 18px; font-weight: bold } .name { font-weight: bold } .fields { font-size: 12px; fill: #555 }
  .ok { fill: #1f6fb4; text-anchor: end } .no { fill: #d4380d; text-anchor: end } .go { fill: #389e0d; text-anchor: end }
  .note { font-size: 11px; text-anchor: end } .phase { fill: #666; font-style: italic; text-anchor: middle }
  circle { fill: #1f6fb4; fill-opacity: 0.55 } .x { stroke: #d4380d; stroke-width: 1.4 } .row { fill: #f6f8fa }
  .d { fill: none; stroke: #389e0d; stroke-width: 1.2 } .path { stroke: #389e0d; stroke-opacity: 0.3 }
  .grid { stroke: #888; stroke-dasharray: 4 3 } .axis { stroke: #333 }
</style>`;
type Mark = (cx: string, cy: number) => string;
const circle: Mark = (cx, cy) => `<circle cx="${cx}" cy="${cy}" r="3.2"/>`;
const cross: Mark = (cx, cy) => `<path class="x" d="M${cx} ${cy} m-3 -3 l6 6 m0 -6 l-6 6"/>`;
const diamond: Mark = (cx, cy) => `<path class="d" d="M${cx} ${cy} m0 -4 l4 4 l-4 4 l-4 -4 z"/>`;
const text = (tx: number | string, ty: number, cls: string, body: string): string =>
  `<text x="${tx}" y="${ty}" class="${cls}">${body}</text>`;
const line = (cls: string, x1: number | string, y1: number, x2: number | string, y2: number) =>
  `<line class="${cls}" x1="${x1}" y1="${y1}" x2="${x2}" y2="${y2}"/>`;

/** The chart as an SVG document (ends with a newline). */
function svg(all: readonly Row[]): string {
  const out: string[] = [];
  let y = TOP;
  for (const r of all) {
    const delay = r.outcomes.some((o) => o.goMs !== o.tMs);
    const h = delay ? 66 : 48;
    const ok = r.outcomes.filter((o) => o.allowed);
    const n = (a: number, b: number): number => ok.filter((o) => o.tMs >= a && o.tMs < b).length;
    out.push(
      `<rect class="row" x="${X0}" y="${y}" width="${X1 - X0}" height="${h - 6}"/>`,
      text(12, y + 17, 'name', r.name),
      text(12, y + 33, 'fields', r.fields),
      text(X0 - 10, y + 17, 'ok', `${ok.length} admitted`),
      text(X0 - 10, y + 33, 'no', `${r.outcomes.length - ok.length} denied`),
      text(x(1_920), y + 17, 'note', `burst: ${n(1_950, 2_000)} + ${n(2_000, 2_050)}`),
    );
    if (delay) out.push(text(X0 - 10, y + 53, 'go', 'released'));
    for (const o of r.outcomes) {
      const [a, b] = [x(o.tMs), x(o.goMs)];
      if (!o.allowed) out.push(cross(a, y + 30));
      else if (!delay) out.push(circle(a, y + 13));
      else out.push(line('path', a, y + 13, b, y + 49), circle(a, y + 13), diamond(b, y + 49));
    }
    y += h;
  }
  for (let s = 0; s * 1_000 <= T_MAX_MS; s++) {
    const gx = x(s * 1_000);
    out.push(line('grid', gx, TOP - 6, gx, y), line('axis', gx, y, gx, y + 5));
    out.push(text(gx, y + 18, 'mid', `${s} s`));
  }
  const phases = 'quiet|40 requests in 50 ms across 2 s|sustained 20/s (2x the rate)|quiet';
  const boundary: Mark = (cx, cy) => line('grid', cx, cy, +cx + 28, cy);
  const legend: [number, number, Mark, string][] = [
    [18, 28, circle, 'admitted (at arrival)'],
    [188, 198, cross, 'denied'],
    [268, 278, diamond, 'released at arrival + delayMs (leaky-bucket delay mode)'],
    [690, 726, boundary, 'window boundary (1 s windows, epoch-aligned)'],
  ];
  const height = y + 52;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${height}" viewBox="0 0 ${W} ${height}">`,
    STYLE,
    `<rect width="${W}" height="${height}" fill="#fff"/>`,
    text(12, 28, 'title', `The same ${traffic().length} requests (cost 1) through each algorithm`),
    ...legend.flatMap(([mx, lx, mark, label]) => [mark(String(mx), 54), text(lx, 58, '', label)]),
    ...phases.split('|').map((p, i) => text(x([500, 2e3, 4e3, 5.5e3][i]!), TOP - 12, 'phase', p)),
    ...out,
    line('axis', X0, y, X1, y),
    text((X0 + X1) / 2, y + 42, 'mid', 'time (burst a + b: admitted before + after 2 s)'),
    '</svg>',
    '',
  ].join('\n');
}

/** `markdown` with only the block between the chart-table markers replaced by `tableText`. */
export function embedTable(markdown: string, tableText: string): string {
  const start = markdown.indexOf(TABLE_START);
  const end = markdown.indexOf(TABLE_END);
  if (start < 0 || end < start) throw new Error(`${MD_PATH}: chart-table markers not found`);
  return `${markdown.slice(0, start + TABLE_START.length)}\n\n${tableText}\n\n${markdown.slice(end)}`;
}

/** The SVG document and the markdown table, from the same run. Pure: writes nothing. */
export function generate(): { svg: string; table: string } {
  const all = rows();
  return { svg: svg(all), table: table(all) };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const out = generate();
  writeFileSync(SVG_PATH, out.svg);
  writeFileSync(MD_PATH, embedTable(readFileSync(MD_PATH, 'utf8'), out.table));
  process.stdout.write(`${out.table}\n`);
}
