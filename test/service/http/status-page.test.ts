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
});
