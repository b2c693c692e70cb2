/**
 * Writers for one benchmark run: the JSON record, a markdown report (per-scenario table,
 * ceilings, targets met or missed) and an SVG grouped bar chart of decisions/s per
 * scenario (Sluice vs peer vs ceiling), all generated from the same result object.
 */
import type { CeilingResult } from './ceiling.js';
import type { DriveResult } from './driver.js';
import type { RedisWindow } from './redis-stats.js';
import type { Scenario, SideName } from './scenarios.js';

/** One measured window of one side. */
export interface RoundResult extends DriveResult {
  readonly redis?: RedisWindow;
}

/** Medians over a side's rounds. */
export interface SideSummary {
  readonly decisionsPerSecond: number;
  readonly latencyUs: { readonly p50: number; readonly p99: number; readonly p999: number };
  readonly clientCpuUsPerDecision: number;
  readonly allowedShare: number;
  readonly errors: number;
  readonly firstError?: string;
  readonly redisCommandUsPerDecision?: number;
  readonly redisScriptUsPerCall?: number;
  readonly redisScriptCallsPerDecision?: number;
  readonly redisProcessCpuUsPerDecision?: number;
  readonly redisBytesPerKey?: number;
  readonly rounds: readonly RoundResult[];
}

export interface ScenarioResult extends Scenario {
  readonly sides: Partial<Record<SideName, SideSummary>>;
  /** Median over rounds of Sluice/peer decisions/s (each round's pair ran back to back). */
  readonly ratioToPeer: number;
  /** The same for every side. */
  readonly ratios: Partial<Record<SideName, number>>;
  /** The scenario's ceiling: the same script call replayed 50 × 16 deep, or the bare Map bucket. */
  readonly ceiling?: { readonly label: string; readonly decisionsPerSecond: number };
  readonly ratioToCeiling?: number;
  readonly loadAverage1m: number;
}

export interface NamedCeiling extends CeilingResult {
  readonly name: string;
}

export interface Target {
  readonly name: string;
  readonly scenario: string;
  readonly measured: string;
  readonly met: boolean | undefined;
}

export interface RunResult {
  readonly date: string;
  readonly quick: boolean;
  /** One process (sides and Redis float over the cores), or pinned (see bench/run.ts). */
  readonly mode: 'one-process' | 'pinned';
  readonly machine: {
    readonly cpus: number;
    readonly cpuModel: string;
    readonly node: string;
    readonly redis?: string;
    readonly loadAverageStart: readonly number[];
    readonly loadAverageEnd: readonly number[];
  };
  readonly settings: {
    readonly rounds: number;
    readonly windowMs: number;
    readonly warmupMs: number;
    readonly keys: number;
    readonly only?: readonly string[];
    /** The baseline checkout measured as side "before". */
    readonly before?: string;
  };
  readonly ceilings: readonly NamedCeiling[];
  readonly scenarios: readonly ScenarioResult[];
  readonly targets: readonly Target[];
  readonly seconds: number;
}

// ---------------------------------------------------------------------------------------
// Targets of issue 16

export function evaluateTargets(scenarios: readonly ScenarioResult[]): Target[] {
  const byId = new Map(scenarios.map((s) => [s.id, s]));
  const out: Target[] = [];
  const redis = (id: string, name: string, ratio: number, latency?: 'p50' | 'p99'): void => {
    const s = byId.get(id);
    const sl = s?.sides.sluice;
    const peer = s?.sides.peer;
    if (s === undefined || sl === undefined || peer === undefined) {
      out.push({ name, scenario: id, measured: 'not run', met: undefined });
      return;
    }
    const l =
      latency === undefined
        ? ''
        : `; ${latency} ${fmtUs(sl.latencyUs[latency])} vs ${fmtUs(peer.latencyUs[latency])} µs`;
    out.push({
      name,
      scenario: id,
      measured: `${fmtRatio(s.ratioToPeer)}${l}`,
      met:
        s.ratioToPeer >= ratio &&
        (latency === undefined || sl.latencyUs[latency] <= peer.latencyUs[latency]),
    });
  };
  redis('redis/c1/zipf/tb/allow', '≥ 1.0x peer decisions/s, p50 ≤ peer', 1, 'p50');
  redis('redis/c64/zipf/tb/allow', '≥ 2.0x peer decisions/s, p99 ≤ peer', 2, 'p99');
  redis('redis/c64/hot/tb/allow', '≥ 2.0x peer decisions/s', 2);
  const memory = byId.get('memory/c64/zipf/tb/allow');
  for (const [side, ratio] of [
    ['sluice', 2],
    ['sluice-sync', 3],
  ] as const) {
    const r = memory?.ratios[side];
    out.push({
      name: `memory store ${side === 'sluice' ? '`check`' : '`checkSync`'} ≥ ${ratio}x RateLimiterMemory`,
      scenario: 'memory/c64/zipf/tb/allow',
      measured: r === undefined ? 'not run' : fmtRatio(r),
      met: r === undefined ? undefined : r >= ratio,
    });
  }
  return out;
}

/**
 * Every side of every scenario, one line each: decisions/s (median, and the range over
 * rounds), × peer (median of the rounds' ratios), latency, client CPU and Redis CPU per
 * decision.
 */
function sidesTable(run: RunResult): string[] {
  const lines = [
    '| scenario | side | decisions/s (min–max) | × peer | p50 / p99 µs | client CPU µs/dec | Redis cmd µs/dec | Redis CPU µs/dec | errors |',
    '|---|---|--:|--:|--:|--:|--:|--:|--:|',
  ];
  for (const s of run.scenarios) {
    for (const [name, x] of Object.entries(s.sides) as [SideName, SideSummary | undefined][]) {
      if (x === undefined) continue;
      const rates = x.rounds.map((r) => r.decisionsPerSecond);
      const redis = s.store === 'redis';
      lines.push(
        `| ${s.id} | ${name} | ${fmtRate(x.decisionsPerSecond)} (${fmtRate(Math.min(...rates))}–${fmtRate(Math.max(...rates))}) | ${fmtRatio(s.ratios[name])} | ${fmtUs(x.latencyUs.p50)} / ${fmtUs(x.latencyUs.p99)} | ${fmtNum(x.clientCpuUsPerDecision, 2)} | ${redis ? fmtNum(x.redisCommandUsPerDecision, 2) : '–'} | ${redis ? fmtNum(x.redisProcessCpuUsPerDecision, 2) : '–'} | ${x.errors} |`,
      );
    }
  }
  return lines;
}

// ---------------------------------------------------------------------------------------
// Markdown

function fmtNum(x: number | undefined, digits: number): string {
  if (x === undefined || !Number.isFinite(x)) return '–';
  return x.toLocaleString('en-US', {
    maximumFractionDigits: digits,
    minimumFractionDigits: digits,
  });
}
function fmtUs(x: number): string {
  return fmtNum(x, x < 100 ? 1 : 0);
}
function fmtRatio(x: number | undefined): string {
  return x === undefined || !Number.isFinite(x) ? '–' : `${x.toFixed(2)}x`;
}
/** 1234567 → "1.23M", 48123 → "48.1k". */
export function fmtRate(x: number | undefined): string {
  if (x === undefined || !Number.isFinite(x)) return '–';
  if (x >= 1e6) return `${(x / 1e6).toFixed(2)}M`;
  if (x >= 1e3) return `${(x / 1e3).toFixed(1)}k`;
  return x.toFixed(0);
}

export function markdown(run: RunResult): string {
  const lines: string[] = [];
  const m = run.machine;
  lines.push(`# Sluice benchmark ${run.date}${run.quick ? ' (quick)' : ''}`, '');
  lines.push(
    `${m.cpus} × ${m.cpuModel}, Node ${m.node}${m.redis ? `, Redis ${m.redis}` : ''}, ` +
      (run.mode === 'pinned'
        ? 'pinned: redis-server on core 0, each side a Node process of its own on core 1, loopback. '
        : 'one Node process, loopback. ') +
      (run.settings.before === undefined
        ? ''
        : `"before" is the build at ${run.settings.before}. `) +
      `${run.settings.rounds} interleaved rounds of ${run.settings.windowMs} ms per side (after a ${run.settings.warmupMs} ms warm-up); ` +
      `figures are medians over rounds. Load average (1m/5m/15m) ${m.loadAverageStart.map((x) => x.toFixed(2)).join('/')} at start, ` +
      `${m.loadAverageEnd.map((x) => x.toFixed(2)).join('/')} at end. Run took ${Math.round(run.seconds)} s.`,
    '',
  );
  lines.push('## Targets', '');
  lines.push('| target | scenario | measured | met |', '|---|---|---|---|');
  for (const t of run.targets) {
    lines.push(
      `| ${t.name} | ${t.scenario} | ${t.measured} | ${t.met === undefined ? 'not run' : t.met ? 'yes' : '**missed**'} |`,
    );
  }
  lines.push('', '## Sides', '', ...sidesTable(run));
  lines.push('', '## Scenarios', '');
  lines.push(
    'Scenario ids are `store/concurrency/keys/algorithm/mode`: keys `hot` (one key), `uniform` or `zipf` (Zipf(1.0)) over 100k keys; ' +
      '`tb` token bucket, `gcra`, `fw` fixed window, `swc` sliding window counter, `+route` a second policy (tenant + route) on the same identity; ' +
      '`allow` never denies, `deny` admits one unit per key per minute; `/sync`: Sluice through `checkSync` and the bare bucket called in a plain loop (the peer, which has no synchronous API, still awaited). Peer: rate-limiter-flexible RateLimiterMemory / RateLimiterRedis (ioredis). ' +
      'Ceiling: memory, a bare JS Map token bucket; Redis, the exact call a lone Sluice check sends (its keys and packed argument captured with MONITOR, sent as the FCALL of the function library Sluice loads), replayed over 50 connections 16 deep with random keys (redis-benchmark cannot send its packed argument).',
    '',
  );
  lines.push(
    '| scenario | Sluice /s | peer /s | × peer | ceiling /s | × ceiling | Sluice p50 / p99 / p999 µs | peer p50 / p99 / p999 µs | client CPU µs/dec Sluice / peer | Redis cmd µs/dec Sluice / peer | Sluice script µs/call | Redis process CPU µs/dec Sluice / peer | Redis B/key Sluice / peer | allowed % Sluice / peer | load 1m |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
  );
  for (const s of run.scenarios) {
    const sl = s.sides.sluice;
    const p = s.sides.peer;
    const lat = (x: SideSummary | undefined): string =>
      x
        ? `${fmtUs(x.latencyUs.p50)} / ${fmtUs(x.latencyUs.p99)} / ${fmtUs(x.latencyUs.p999)}`
        : '–';
    const pair = (a: number | undefined, b: number | undefined, d: number): string =>
      `${fmtNum(a, d)} / ${fmtNum(b, d)}`;
    const redis = s.store === 'redis';
    lines.push(
      [
        s.id,
        fmtRate(sl?.decisionsPerSecond),
        fmtRate(p?.decisionsPerSecond),
        fmtRatio(s.ratioToPeer),
        s.ceiling ? fmtRate(s.ceiling.decisionsPerSecond) : '–',
        fmtRatio(s.ratioToCeiling),
        lat(sl),
        lat(p),
        pair(sl?.clientCpuUsPerDecision, p?.clientCpuUsPerDecision, 2),
        redis ? pair(sl?.redisCommandUsPerDecision, p?.redisCommandUsPerDecision, 2) : '–',
        redis ? fmtNum(sl?.redisScriptUsPerCall, 2) : '–',
        redis ? pair(sl?.redisProcessCpuUsPerDecision, p?.redisProcessCpuUsPerDecision, 2) : '–',
        redis ? pair(sl?.redisBytesPerKey, p?.redisBytesPerKey, 0) : '–',
        pair(
          sl === undefined ? undefined : sl.allowedShare * 100,
          p === undefined ? undefined : p.allowedShare * 100,
          1,
        ),
        s.loadAverage1m.toFixed(2),
      ]
        .join(' | ')
        .replace(/^/, '| ')
        .concat(' |'),
    );
  }
  const errors = run.scenarios.flatMap((s) =>
    Object.entries(s.sides)
      .filter(([, x]) => x !== undefined && x.errors > 0)
      .map(
        ([name, x]) => `- ${s.id} ${name}: ${x!.errors} errors (first: ${x!.firstError ?? '?'})`,
      ),
  );
  if (errors.length > 0) lines.push('', '## Errors', '', ...errors);
  if (run.ceilings.length > 0) {
    lines.push(
      '',
      '## Redis ceilings (50 connections, 16 pipelined; the trivial rows by redis-benchmark -c 50 -P 16)',
      '',
    );
    lines.push('| what | calls/s | Redis µs/call | command |', '|---|--:|--:|---|');
    for (const c of run.ceilings) {
      lines.push(
        `| ${c.name} | ${fmtRate(c.callsPerSecond)} | ${fmtNum(c.redisUsPerCall, 2)} | \`${c.command.replace(/\|/g, '\\|')}\` |`,
      );
    }
  }
  lines.push(
    '',
    'Client CPU is this Node process (the load driver included) per decision; "Redis cmd" is `INFO commandstats` time per decision of the script calls (FCALL / EVALSHA), whose time includes the commands they run (commandstats lists those again on their own, so they are not added twice); ' +
      '"Redis process CPU" is the server process\'s user+system CPU per decision (networking included); B/key is the mean `MEMORY USAGE` of up to 200 bucket keys after the scenario. ' +
      'Nothing here asserts on timings; rows on a shared VM swing widely, ratios within a round are the robust figure.',
    '',
  );
  return lines.join('\n');
}

// ---------------------------------------------------------------------------------------
// SVG chart

const COLORS: Record<'sluice' | 'peer' | 'ceiling', string> = {
  sluice: '#2b6cb0',
  peer: '#dd6b20',
  ceiling: '#a0aec0',
};

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** A grouped bar chart, log-scale y: decisions/s per scenario for Sluice, peer and ceiling. */
export function svgChart(run: RunResult): string {
  const groups = run.scenarios;
  const barW = 9;
  const gap = 10;
  const groupW = barW * 3 + gap;
  const left = 70;
  const top = 50;
  const plotH = 360;
  const bottom = 190;
  const width = left + Math.max(1, groups.length) * groupW + 20;
  const height = top + plotH + bottom;
  const values = groups.flatMap((s) => [
    s.sides.sluice?.decisionsPerSecond ?? 0,
    s.sides.peer?.decisionsPerSecond ?? 0,
    s.ceiling?.decisionsPerSecond ?? 0,
  ]);
  const positive = values.filter((v) => v > 0);
  const lo = Math.pow(10, Math.floor(Math.log10(Math.min(...positive, 1e3))));
  const hi = Math.pow(10, Math.ceil(Math.log10(Math.max(...positive, 1e4))));
  const y = (v: number): number =>
    top +
    plotH -
    ((Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * plotH;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="${left}" y="20" font-size="14" font-weight="bold">${esc(`Decisions/s per scenario (log scale), ${run.date}${run.quick ? ', quick run' : ''}`)}</text>`,
  );
  // legend
  const legend: [keyof typeof COLORS, string][] = [
    ['sluice', 'Sluice'],
    ['peer', 'rate-limiter-flexible'],
    ['ceiling', 'ceiling (our script replayed 50 × 16 deep / bare Map bucket)'],
  ];
  let lx = left;
  for (const [k, label] of legend) {
    out.push(
      `<rect x="${lx}" y="30" width="10" height="10" fill="${COLORS[k]}"/>`,
      `<text x="${lx + 14}" y="39">${esc(label)}</text>`,
    );
    lx += 30 + label.length * 6;
  }
  // grid
  for (let v = lo; v <= hi; v *= 10) {
    const yy = y(v).toFixed(1);
    out.push(
      `<line x1="${left}" x2="${width - 10}" y1="${yy}" y2="${yy}" stroke="#e2e8f0"/>`,
      `<text x="${left - 6}" y="${yy}" text-anchor="end" dominant-baseline="middle">${fmtRate(v)}</text>`,
    );
  }
  out.push(
    `<line x1="${left}" x2="${left}" y1="${top}" y2="${top + plotH}" stroke="#4a5568"/>`,
    `<text transform="translate(16 ${top + plotH / 2}) rotate(-90)" text-anchor="middle">decisions/s</text>`,
  );
  groups.forEach((s, g) => {
    const x0 = left + g * groupW + gap / 2;
    const bars: [keyof typeof COLORS, number | undefined][] = [
      ['sluice', s.sides.sluice?.decisionsPerSecond],
      ['peer', s.sides.peer?.decisionsPerSecond],
      ['ceiling', s.ceiling?.decisionsPerSecond],
    ];
    bars.forEach(([k, v], b) => {
      if (v === undefined || !(v > 0)) return;
      const yy = y(v);
      out.push(
        `<rect x="${(x0 + b * barW).toFixed(1)}" y="${yy.toFixed(1)}" width="${barW - 1}" height="${(top + plotH - yy).toFixed(1)}" fill="${COLORS[k]}"><title>${esc(`${s.id} ${k}: ${fmtRate(v)}/s`)}</title></rect>`,
      );
    });
    const lxx = x0 + (barW * 3) / 2;
    const ly = top + plotH + 8;
    out.push(
      `<text transform="translate(${lxx.toFixed(1)} ${ly}) rotate(60)" font-size="10">${esc(s.id)}</text>`,
    );
  });
  out.push('</svg>', '');
  return out.join('\n');
}
