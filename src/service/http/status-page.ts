import type { DecisionCounts, ShardStatus, StatusSnapshot } from '../status/status-snapshot.js';

/** Text made safe for HTML element content and quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const e = escapeHtml;
const n = (v: number): string => v.toLocaleString('en-US');

function table(
  head: readonly string[],
  rows: readonly (readonly string[])[],
  empty: string,
): string {
  if (rows.length === 0) return `<p class="none">${e(empty)}</p>`;
  const th = head.map((h) => `<th>${e(h)}</th>`).join('');
  const body = rows.map((r) => `<tr>${r.map((c) => `<td>${c}</td>`).join('')}</tr>`).join('\n');
  return `<table>\n<thead><tr>${th}</tr></thead>\n<tbody>\n${body}\n</tbody>\n</table>`;
}

const counts = (c: DecisionCounts): string[] => [n(c.decisions), n(c.denied), n(c.wouldDeny)];

function shardRow(s: ShardStatus): string[] {
  const failures = Object.entries(s.failures ?? {})
    .map(([reason, count]) => `${reason} ${n(count)}`)
    .join(', ');
  return [
    e(s.name),
    `<span class="${s.state}">${s.state}</span>`,
    s.connected === undefined ? '–' : s.connected ? 'up' : 'down',
    e(s.since ?? '–'),
    e(failures || '–'),
  ];
}

/** Inline style only: the page loads nothing else (its CSP allows nothing else). */
const STYLE = `body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.4em 0 .4em}
table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}
.meta,.none{color:#666}code{font-size:.95em}
.healthy{color:#176b2c;font-weight:600}.unhealthy{color:#b00020;font-weight:600}`;

/**
 * The status page: plain HTML with an inline style sheet and no script. Every value
 * from the snapshot is escaped; identities appear only as their hashes.
 */
export function renderStatusPage(s: StatusSnapshot): string {
  const policies = table(
    ['policy', 'source', 'algorithm', 'limit', 'failure mode', 'shadow'],
    s.config.policies.map((p) => [
      `<code>${e(p.name)}</code>`,
      e(p.domain === undefined ? p.source : `${p.source} (domain ${p.domain})`),
      e(p.algorithm),
      e(p.limit),
      e(p.failureMode ?? 'default'),
      p.shadow ? 'yes' : 'no',
    ]),
    'No policy is loaded: every request is allowed.',
  );
  const decisions = table(
    [
      'policy',
      'decisions',
      'denied',
      'shadow would-deny',
      'decisions (last min)',
      'denied (last min)',
      'would-deny (last min)',
    ],
    s.decisions.map((d) => [
      `<code>${e(d.policy)}</code>`,
      ...counts(d.total),
      ...counts(d.lastMinute),
    ]),
    'No decision yet.',
  );
  const shadow = s.decisions.filter((d) => d.total.wouldDeny > 0);
  const shadowTable = table(
    ['policy', 'would-deny', 'would-deny (last min)'],
    shadow.map((d) => [
      `<code>${e(d.policy)}</code>`,
      n(d.total.wouldDeny),
      n(d.lastMinute.wouldDeny),
    ]),
    'No shadow policy would have denied a request.',
  );
  const hot =
    s.hotKeys.source === undefined
      ? '<p class="none">Hot keys are not tracked for this store.</p>'
      : `<p class="meta">From ${e(s.hotKeys.source)}; identities are shown as the first 16 hex digits of their SHA-256.</p>\n` +
        table(
          ['identity (hashed)', 'requests'],
          s.hotKeys.keys.map((k) => [`<code>${e(k.hash)}</code>`, n(k.count)]),
          'No request yet.',
        );
  const store = table(
    ['shard', 'state', 'connection', 'unhealthy since', 'failures since'],
    s.store.shards.map(shardRow),
    'No shard.',
  );
  const leases = s.leases.inForce
    ? table(
        ['policy', 'holder', 'mode', 'units per window', 'used', 'expires', 'controller'],
        s.leases.allocations.map((a) => [
          e(a.policy),
          e(a.holder),
          e(a.mode === 'lease' ? 'lease' : `fallback (${a.fallback ?? ''})`),
          n(a.units),
          n(a.usedInWindow),
          e(a.expiresAt ?? '—'),
          e(a.controller ?? 'none'),
        ]),
        'No lease is allocated.',
      )
    : '<p class="none">No lease is in force: this service takes no quota leases (SLUICE_LEASE_CONTROLLERS is not set).</p>';
  const rejected =
    s.config.lastRejected === undefined
      ? ''
      : `<p class="unhealthy">Reload rejected at ${e(s.config.lastRejected.at)}: ${e(s.config.lastRejected.message)} (the configuration above keeps serving)</p>`;
  const files = s.config.files.map((f) => `<code>${e(f)}</code>`).join(', ') || 'none';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Sluice status</title>
<style>${STYLE}</style>
</head>
<body>
<h1>Sluice status</h1>
<p class="meta">Generated ${e(s.generatedAt)}; started ${e(s.startedAt)}. Reload the page for fresh figures; <a href="?format=json">JSON</a>.</p>
<section id="policies">
<h2>Policies in force</h2>
<p class="meta">Loaded ${e(s.config.loadedAt)} from ${files}.</p>
${rejected}
${policies}
</section>
<section id="decisions">
<h2>Decisions</h2>
${decisions}
</section>
<section id="shadow">
<h2>Shadow policies</h2>
${shadowTable}
</section>
<section id="hot-keys">
<h2>Hot keys</h2>
${hot}
</section>
<section id="store">
<h2>Store (${e(s.store.kind)})</h2>
${store}
</section>
<section id="leases">
<h2>Leases</h2>
${leases}
</section>
</body>
</html>
`;
}
