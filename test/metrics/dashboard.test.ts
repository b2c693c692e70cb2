/**
 * deploy/grafana/sluice-dashboard.json against a real service: every panel queries
 * metric families that the service's `GET /metrics` exports (read from its `# TYPE`
 * lines, which list every family before its first sample), and every exported family
 * of docs/metrics.md is on some panel.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../../src/service/main.js';
import { startExampleService } from '../support/loopback-service.js';

interface Target {
  readonly expr: string;
}
interface Panel {
  readonly id: number;
  readonly type: string;
  readonly title: string;
  readonly targets?: readonly Target[];
  readonly datasource?: { readonly uid: string };
}

const dashboard = JSON.parse(
  readFileSync(join(import.meta.dirname, '../../deploy/grafana/sluice-dashboard.json'), 'utf8'),
) as { panels: Panel[]; templating: { list: { name: string }[] } };

let svc: RunningService;
/** Sample names the service exports: each family, and a histogram's series. */
let exported: Set<string>;
let families: string[];

beforeAll(async () => {
  svc = await startExampleService();
  const res = await fetch(`http://127.0.0.1:${svc.httpPort}/metrics`);
  const text = await res.text();
  exported = new Set();
  families = [];
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name, type] = m as unknown as [string, string, string];
    families.push(name);
    exported.add(name);
    if (type === 'histogram') {
      for (const s of ['_bucket', '_count', '_sum']) exported.add(name + s);
    }
  }
});
afterAll(async () => {
  await svc?.shutdown();
});

/** The metric names a PromQL expression reads (Sluice's, by their prefix). */
function metricsIn(expr: string): string[] {
  return [...expr.matchAll(/\bsluice_[a-z0-9_]+/g)].map((m) => m[0]);
}

describe('the Grafana dashboard', () => {
  const panels = dashboard.panels.filter((p) => p.type !== 'row');

  it('has panels with unique ids, each on the datasource variable', () => {
    expect(panels.length).toBeGreaterThan(10);
    expect(new Set(dashboard.panels.map((p) => p.id)).size).toBe(dashboard.panels.length);
    expect(dashboard.templating.list.map((v) => v.name)).toEqual(['datasource', 'job', 'policy']);
    for (const p of panels) expect(p.datasource?.uid, p.title).toBe('${datasource}');
  });

  it('queries in every panel only metrics the service exports', () => {
    expect(exported.size).toBeGreaterThan(0);
    for (const p of panels) {
      const names = (p.targets ?? []).flatMap((t) => metricsIn(t.expr));
      expect(names.length, `panel "${p.title}" names no Sluice metric`).toBeGreaterThan(0);
      for (const name of names) {
        expect(exported.has(name), `panel "${p.title}": ${name} is not exported`).toBe(true);
      }
    }
  });

  it('shows every family the service exports', () => {
    const shown = new Set(
      panels.flatMap((p) => (p.targets ?? []).flatMap((t) => metricsIn(t.expr))),
    );
    const base = (n: string) => n.replace(/_(bucket|count|sum)$/, '');
    const shownFamilies = new Set([...shown].map(base));
    // Scrape-time process metrics are not the service's; Sluice's are all shown.
    expect(families.filter((f) => f.startsWith('sluice_') && !shownFamilies.has(f))).toEqual([]);
  });
});
