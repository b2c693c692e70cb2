import { describe, expect, it } from 'vitest';
import { escapeHtml, renderStatusPage } from '../../../src/service/http/status-page.js';
import type { StatusSnapshot } from '../../../src/service/status/status-snapshot.js';

const hostile = `<script>alert("x")</script>&'`;

const snapshot: StatusSnapshot = {
  generatedAt: '2026-12-01T00:00:01.000Z',
  startedAt: '2026-12-01T00:00:00.000Z',
  config: {
    loadedAt: '2026-12-01T00:00:00.000Z',
    files: [`/etc/sluice/${hostile}.yaml`],
    policies: [],
    lastRejected: { at: '2026-12-01T00:00:00.500Z', message: hostile },
  },
  decisions: [],
  hotKeys: { keys: [] },
  store: { kind: 'memory', shards: [{ name: 'memory', state: 'healthy' }] },
  leases: { inForce: false, allocations: [] },
};

describe('renderStatusPage', () => {
  it('escapes every value it shows, and has no script', () => {
    expect(escapeHtml(hostile)).toBe(
      '&#60;script&#62;alert(&#34;x&#34;)&#60;/script&#62;&#38;&#39;',
    );
    const html = renderStatusPage(snapshot);
    expect(html).not.toContain('<script');
    expect(html).not.toContain(hostile);
    expect(html.split(escapeHtml(hostile)).length - 1).toBe(2); // the file and the message
  });

  it('says what is empty: no policy, no decision, no hot-key source, no lease', () => {
    const html = renderStatusPage(snapshot);
    expect(html).toContain('No policy is loaded: every request is allowed.');
    expect(html).toContain('No decision yet.');
    expect(html).toContain('Hot keys are not tracked for this store.');
    expect(html).toContain('No lease is in force');
  });

  it('shows a row per leased policy: mode, units of the window, expiry, controller', () => {
    const html = renderStatusPage({
      ...snapshot,
      leases: {
        inForce: true,
        allocations: [
          {
            policy: hostile,
            holder: 'eu-1',
            mode: 'lease',
            units: 49,
            usedInWindow: 12,
            windowMs: 1000,
            ratePerSecond: 49.75,
            expiresAt: '2026-12-01T00:00:03.000Z',
            fencingToken: 2,
            controller: '10.0.0.5:18081',
            refused: 0,
          },
          {
            policy: 'search',
            holder: 'eu-1',
            mode: 'fallback',
            units: 50,
            usedInWindow: 50,
            windowMs: 1000,
            ratePerSecond: 50,
            fallback: 'static',
            controller: null,
            refused: 0,
          },
        ],
      },
    });
    expect(html).not.toContain(hostile);
    expect(html).not.toContain('No lease is in force');
    const cells = (name: string) =>
      [
        ...html
          .split(name)
          .at(-1)!
          .split('</tr>')[0]!
          .matchAll(/<td[^>]*>([^<]*)<\/td>/g),
      ].map((m) => m[1]);
    expect(cells('search')).toEqual(['eu-1', 'fallback (static)', '50', '50', '—', 'none']);
    expect(cells(escapeHtml(hostile))).toEqual([
      'eu-1',
      'lease',
      '49',
      '12',
      '2026-12-01T00:00:03.000Z',
      '10.0.0.5:18081',
    ]);
  });
});
